// layers/lmdb_io.cc — LmdbReader / LmdbWriter over liblmdb (read-only env without TLS for the
// reader, so a prefetch thread may own it; 1 TiB sparse map for the writer, as BVLC uses).
#include "layers/lmdb_io.h"

#include <lmdb.h>
#include <sys/stat.h>

namespace mpcaffe {
namespace {

void Check(int rc, const std::string& path, const char* what) {
  if (rc != MDB_SUCCESS)
    throw DbError("LMDB '" + path + "': " + what + " failed: " + mdb_strerror(rc));
}

DataShard& ProcessShard() {
  static DataShard shard;
  return shard;
}

}  // namespace

void SetDataShard(DataShard shard) { ProcessShard() = shard; }
DataShard GetDataShard() { return ProcessShard(); }

struct LmdbReader::Impl {
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  MDB_cursor* cursor = nullptr;
  size_t at = 0;  // the record the cursor is on
  bool positioned = false;
};

LmdbReader::LmdbReader(const std::string& path, DataShard shard)
    : impl_(std::make_unique<Impl>()), path_(path), shard_(shard) {
  if (shard_.count < 1 || shard_.index < 0 || shard_.index >= shard_.count)
    throw DbError("LMDB '" + path + "': shard " + std::to_string(shard_.index) + " of " +
                  std::to_string(shard_.count) + " does not exist");
  next_ = static_cast<size_t>(shard_.index);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw DbError("LMDB '" + path + "' does not exist");
  Check(mdb_env_create(&impl_->env), path, "mdb_env_create");
  const unsigned flags = MDB_RDONLY | MDB_NOTLS | (S_ISDIR(st.st_mode) ? 0 : MDB_NOSUBDIR);
  int rc = mdb_env_open(impl_->env, path.c_str(), flags, 0664);
  if (rc != MDB_SUCCESS) {
    mdb_env_close(impl_->env);
    impl_->env = nullptr;
    Check(rc, path, "opening the database (is it an LMDB directory?)");
  }
  Check(mdb_txn_begin(impl_->env, nullptr, MDB_RDONLY, &impl_->txn), path, "mdb_txn_begin");
  Check(mdb_dbi_open(impl_->txn, nullptr, 0, &impl_->dbi), path, "mdb_dbi_open");
  Check(mdb_cursor_open(impl_->txn, impl_->dbi, &impl_->cursor), path, "mdb_cursor_open");
  MDB_stat s;
  Check(mdb_stat(impl_->txn, impl_->dbi, &s), path, "mdb_stat");
  entries_ = s.ms_entries;
  if (entries_ > 0 && static_cast<size_t>(shard_.index) >= entries_)
    throw DbError("LMDB '" + path + "' has " + std::to_string(entries_) + " records, too few for " +
                  std::to_string(shard_.count) + " shards (process " +
                  std::to_string(shard_.index) + " would read none)");
}

LmdbReader::~LmdbReader() {
  if (impl_->cursor) mdb_cursor_close(impl_->cursor);
  if (impl_->txn) mdb_txn_abort(impl_->txn);
  if (impl_->env) mdb_env_close(impl_->env);
}

std::string LmdbReader::Next() {
  if (entries_ == 0) throw DbError("LMDB '" + path_ + "' has no entries");
  MDB_val key, value;
  // Walk the cursor to record next_ (one step without sharding; `count` steps, or back to the
  // first record after a wrap, with it).
  int rc = MDB_SUCCESS;
  if (!impl_->positioned || next_ < impl_->at) {
    rc = mdb_cursor_get(impl_->cursor, &key, &value, MDB_FIRST);
    impl_->at = 0;
  } else {
    rc = mdb_cursor_get(impl_->cursor, &key, &value, MDB_GET_CURRENT);
  }
  while (rc == MDB_SUCCESS && impl_->at < next_) {
    rc = mdb_cursor_get(impl_->cursor, &key, &value, MDB_NEXT);
    ++impl_->at;
  }
  Check(rc, path_, "reading the next record");
  impl_->positioned = true;
  next_ += static_cast<size_t>(shard_.count);
  if (next_ >= entries_) next_ = static_cast<size_t>(shard_.index);
  return std::string(static_cast<const char*>(value.mv_data), value.mv_size);
}

struct LmdbWriter::Impl {
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
};

LmdbWriter::LmdbWriter(const std::string& path, int batch)
    : impl_(std::make_unique<Impl>()), path_(path), batch_(batch < 1 ? 1 : batch) {
  if (mkdir(path.c_str(), 0755) != 0)
    throw DbError("LMDB '" + path + "': cannot create the directory (it must not exist yet)");
  Check(mdb_env_create(&impl_->env), path, "mdb_env_create");
  Check(mdb_env_set_mapsize(impl_->env, size_t{1} << 40), path, "mdb_env_set_mapsize");
  Check(mdb_env_open(impl_->env, path.c_str(), 0, 0664), path, "mdb_env_open");
  Check(mdb_txn_begin(impl_->env, nullptr, 0, &impl_->txn), path, "mdb_txn_begin");
  Check(mdb_dbi_open(impl_->txn, nullptr, 0, &impl_->dbi), path, "mdb_dbi_open");
}

LmdbWriter::~LmdbWriter() {
  try {
    Finish();
  } catch (const DbError&) {
  }
  if (impl_->env) mdb_env_close(impl_->env);
}

void LmdbWriter::Put(const std::string& key, const std::string& value) {
  if (!impl_->txn) Check(mdb_txn_begin(impl_->env, nullptr, 0, &impl_->txn), path_, "mdb_txn_begin");
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  Check(mdb_put(impl_->txn, impl_->dbi, &k, &v, 0), path_, "mdb_put");
  if (++pending_ >= batch_) {
    MDB_txn* txn = impl_->txn;
    impl_->txn = nullptr;
    pending_ = 0;
    Check(mdb_txn_commit(txn), path_, "mdb_txn_commit");
  }
}

void LmdbWriter::Finish() {
  if (!impl_->txn) return;
  MDB_txn* txn = impl_->txn;
  impl_->txn = nullptr;
  pending_ = 0;
  Check(mdb_txn_commit(txn), path_, "mdb_txn_commit");
}

}  // namespace mpcaffe
