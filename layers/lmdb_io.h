// layers/lmdb_io.h — minimal LMDB access for the Data layer and `mpcaffe convert_mnist`: a
// read cursor that wraps around at the end, and a batched writer. Errors name the database.
#pragma once

#include <memory>
#include <string>

#include "device/error.h"

namespace mpcaffe {

/// An LMDB call failed; the message names the database path and LMDB's reason.
class DbError : public Error {
 public:
  using Error::Error;
};

/// The part of every Data layer's records this process reads in a data-parallel job: records
/// index, index + count, index + 2·count, … (BVLC's solver_rank / solver_count). {0, 1}: all.
struct DataShard {
  int index = 0;
  int count = 1;
};
/// Sets the shard of the Data layers built from now on (net/distributed.cc sets the MPI rank's).
void SetDataShard(DataShard shard);
DataShard GetDataShard();

/// Reads the (key, value) pairs of an LMDB database in key order, starting over after the last:
/// every one, or those of one shard (records index, index + count, …, then index again).
/// Not thread-safe; use one reader per thread.
class LmdbReader {
 public:
  /// Throws DbError when the database cannot be opened or has fewer records than the shard's
  /// index needs (a shard with no record).
  explicit LmdbReader(const std::string& path, DataShard shard = {});
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;
  /// The next value of the shard (wrapping to its first at the end). Throws DbError for an
  /// empty database.
  std::string Next();
  /// Number of entries (of the whole database).
  size_t size() const { return entries_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  size_t entries_ = 0;
  DataShard shard_;
  size_t next_ = 0;  // the record index Next() returns
};

/// Writes (key, value) pairs into a new LMDB database directory, committing every `batch` puts
/// and at Finish (or destruction).
class LmdbWriter {
 public:
  explicit LmdbWriter(const std::string& path, int batch = 1000);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;
  void Put(const std::string& key, const std::string& value);
  void Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  int batch_, pending_ = 0;
};

}  // namespace mpcaffe
