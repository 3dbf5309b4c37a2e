// cache/database.h — the database layer of the kernel cache, private to cache/: the SQLite
// wrapper (errors, statements, transactions), the table names, file locking and integrity
// checks, and ProgramCache::WithFile (the failure policy every file access goes through). The
// program store (program_store.cc) and the tuning store (tuning_store.cc) are built on it;
// database.cc opens, creates, repairs and degrades the file.
#pragma once

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <tuple>

#include "cache/program_cache.h"

namespace mpcaffe::cache::db {

namespace fs = std::filesystem;

/// An SQLite call failed. Internal: ProgramCache catches every one and applies its policy.
class SqliteError : public Error {
 public:
  SqliteError(int code, const std::string& message) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] inline void Fail(sqlite3* db, int rc, const std::string& what) {
  std::string message = what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  throw SqliteError(rc, message);
}

/// A prepared statement, finalized on scope exit.
class Statement {
 public:
  // The text is kept (callers often pass a temporary's c_str()) for error messages.
  Statement(sqlite3* db, const std::string& sql) : db_(db), sql_(sql) {
    const int rc = sqlite3_prepare_v2(db, sql_.c_str(), -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) Fail(db, rc, "prepare \"" + sql_ + "\"");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Text(int index, const std::string& value) {
    Check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  /// Binds without copying: `value` must outlive the statement.
  Statement& Blob(int index, const std::string& value) {
    Check(sqlite3_bind_blob(stmt_, index, value.data(), static_cast<int>(value.size()),
                            SQLITE_STATIC));
    return *this;
  }
  Statement& Real(int index, double value) {
    Check(sqlite3_bind_double(stmt_, index, value));
    return *this;
  }
  /// True when a row is available, false when done.
  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Fail(db_, rc, std::string("step \"") + sql_ + "\"");
  }
  std::string String(int column) const {
    const void* data = sqlite3_column_blob(stmt_, column);
    const int bytes = sqlite3_column_bytes(stmt_, column);
    return data ? std::string(static_cast<const char*>(data), bytes) : std::string();
  }
  int64_t Int(int column) const { return sqlite3_column_int64(stmt_, column); }
  double Double(int column) const { return sqlite3_column_double(stmt_, column); }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK) Fail(db_, rc, std::string("bind \"") + sql_ + "\"");
  }
  sqlite3* db_;
  const std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

inline void Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = "\"" + sql + "\": " + (error ? error : sqlite3_errstr(rc));
    sqlite3_free(error);
    throw SqliteError(sqlite3_extended_errcode(db) ? sqlite3_extended_errcode(db) : rc, message);
  }
}

/// BEGIN IMMEDIATE (takes the write lock at once, waiting up to the busy timeout, so two
/// writers never deadlock on a lock upgrade); rolled back unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { Exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (db_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void Commit() {
    Exec(db_, "COMMIT");
    db_ = nullptr;
  }

 private:
  sqlite3* db_;
};

// Table names carry the format version (see kCacheFormatVersion).
#define MPCAFFE_V "_v1"
static_assert(kCacheFormatVersion == 1, "rename the tables with the format version");
constexpr const char* kPrograms = "programs" MPCAFFE_V;
constexpr const char* kTuning = "tuning" MPCAFFE_V;
constexpr const char* kCounters = "counters" MPCAFFE_V;
// Keys compiled without their binary stored (ProgramBinaryStore::NoteBuilt).
constexpr const char* kBuilt = "built" MPCAFFE_V;

inline std::string Sql(const char* pattern, const char* table) {
  std::string s = pattern;
  const auto at = s.find("$T");
  if (at != std::string::npos) s.replace(at, 2, table);
  return s;
}

inline std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

inline uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

inline bool IsCorruption(int code) {
  const int primary = code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

/// An exclusive flock on the cache file's directory, so only one process at a time opens the
/// file until it is in WAL mode, and only one decides that the file is corrupt and replaces it. (Not on the file itself: closing any descriptor
/// of the database would drop this process's SQLite locks on it.)
class DirectoryLock {
 public:
  DirectoryLock(const std::string& file, int timeout_ms) {
    fs::path dir = fs::path(file).parent_path();
    if (dir.empty()) dir = ".";
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    locked_ = true;
  }
  ~DirectoryLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }
  bool locked() const { return locked_; }

 private:
  int fd_ = -1;
  bool locked_ = false;
};

/// "ok" when SQLite finds the file sound; otherwise its complaint.
inline std::string QuickCheck(const std::string& path, int timeout_ms, int* rc_out) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  std::string verdict;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, timeout_ms);
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(stmt, 0);
        verdict = text ? reinterpret_cast<const char*>(text) : "";
        rc = SQLITE_OK;
      }
    }
    if (rc != SQLITE_OK) verdict = sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
  } else {
    verdict = sqlite3_errstr(rc);
  }
  sqlite3_close_v2(db);
  *rc_out = rc;
  return verdict;
}

}  // namespace mpcaffe::cache::db

namespace mpcaffe::cache {

template <typename Body>
bool ProgramCache::WithFile(const char* what, bool write, Body&& body) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const CacheState state = state_.load();
    if (!db_ || state == CacheState::kMemoryOnly) return false;
    if (write && state != CacheState::kReadWrite) return false;
    try {
      body();
      return true;
    } catch (const db::SqliteError& e) {
      if (!HandleFailure(e.code(), e.what(), what)) return false;
      try {
        Connect();
      } catch (const db::SqliteError& again) {
        HandleFailure(again.code(), again.what(), "reopening the rebuilt file");
        Degrade(CacheState::kMemoryOnly, "");
        return false;
      }
    }
  }
  return false;
}

}  // namespace mpcaffe::cache
