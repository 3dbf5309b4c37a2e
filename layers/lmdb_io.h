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

/// Reads every (key, value) of an LMDB database in key order, starting over after the last.
/// Not thread-safe; use one reader per thread.
class LmdbReader {
 public:
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;
  /// The next value (wrapping to the first at the end). Throws DbError for an empty database.
  std::string Next();
  /// Number of entries.
  size_t size() const { return entries_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  size_t entries_ = 0;
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
