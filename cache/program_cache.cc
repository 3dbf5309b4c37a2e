// cache/program_cache.cc — ProgramCache: SQLite storage, failure policy, counters, tuning
// table, and the process's default cache.
#include "cache/program_cache.h"

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

#include "cache/sha256.h"
#include "device/settings.h"

namespace mpcaffe::cache {
namespace {

namespace fs = std::filesystem;

/// An SQLite call failed. Internal: ProgramCache catches every one and applies its policy.
class SqliteError : public Error {
 public:
  SqliteError(int code, const std::string& message) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] void Fail(sqlite3* db, int rc, const std::string& what) {
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

void Exec(sqlite3* db, const std::string& sql) {
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

std::string Sql(const char* pattern, const char* table) {
  std::string s = pattern;
  const auto at = s.find("$T");
  if (at != std::string::npos) s.replace(at, 2, table);
  return s;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool IsCorruption(int code) {
  const int primary = code & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

/// An exclusive flock on the cache file's directory, so only one process at a time decides
/// that the file is corrupt and replaces it. (Not on the file itself: closing any descriptor
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
std::string QuickCheck(const std::string& path, int timeout_ms, int* rc_out) {
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

void CountInto(CacheFileStats* stats, const std::string& name, double value) {
  if (name == "hits") stats->hits += static_cast<uint64_t>(value);
  if (name == "misses") stats->misses += static_cast<uint64_t>(value);
  if (name == "compiles") stats->compiles += static_cast<uint64_t>(value);
  if (name == "loads") stats->loads += static_cast<uint64_t>(value);
  if (name == "compile_seconds") stats->compile_seconds += value;
  if (name == "load_seconds") stats->load_seconds += value;
}

bool SameKey(const ProgramKey& a, const ProgramKey& b) {
  return a.backend == b.backend && a.platform == b.platform && a.device == b.device &&
         a.driver == b.driver && a.arch == b.arch && a.options == b.options && a.source == b.source;
}

std::string TuningMemoryKey(const std::string& device, const std::string& operation,
                            const std::string& signature) {
  std::string key;
  for (const std::string* part : {&device, &operation, &signature}) {
    key += std::to_string(part->size());
    key += ':';
    key += *part;
  }
  return key;
}

}  // namespace

const char* CacheStateName(CacheState state) {
  switch (state) {
    case CacheState::kReadWrite:
      return "read-write";
    case CacheState::kReadOnly:
      return "read-only";
    case CacheState::kMemoryOnly:
      return "memory-only";
  }
  return "?";
}

std::string ProgramKeyHash(const ProgramKey& key) {
  Sha256 h;
  h.UpdateField("mpcaffe program cache");
  h.UpdateField(std::to_string(kCacheFormatVersion));
  for (const std::string* field : {&key.backend, &key.platform, &key.device, &key.driver, &key.arch,
                                   &key.options, &key.source})
    h.UpdateField(*field);
  const auto digest = h.Digest();
  return ToHex(digest.data(), digest.size());
}

std::string ProgramDeviceHash(const ProgramKey& key) {
  Sha256 h;
  for (const std::string* field :
       {&key.backend, &key.platform, &key.device, &key.driver, &key.arch})
    h.UpdateField(*field);
  const auto digest = h.Digest();
  return ToHex(digest.data(), digest.size());
}

std::string TuningDeviceKey(const DeviceInfo& info) {
  std::string key = std::string(BackendName(info.backend)) + " | " + info.platform_name + " " +
                    info.platform_version + " | " + info.name + " | " + info.driver_version;
  if (info.backend == Backend::kCuda) key += " | " + info.arch;
  return key;
}

// ---------------------------------------------------------------------------------------------
// Opening, schema, failure policy.

ProgramCache::ProgramCache(CacheOptions options) : options_(std::move(options)) {
  std::lock_guard<std::mutex> lock(db_mutex_);
  try {
    Connect();
  } catch (const SqliteError& e) {
    if (HandleFailure(e.code(), e.what(), "opening the file")) {
      try {
        Connect();
      } catch (const SqliteError& again) {
        HandleFailure(again.code(), again.what(), "opening the rebuilt file");
        Degrade(CacheState::kMemoryOnly, "");
      }
    }
  }
}

ProgramCache::~ProgramCache() {
  std::lock_guard<std::mutex> lock(db_mutex_);
  if (state_.load() == CacheState::kReadWrite) {
    try {
      FlushCounters();
    } catch (const SqliteError&) {
      // Counters are informational; a process that ends while the file is busy loses its own.
    }
  }
  Disconnect();
}

void ProgramCache::Disconnect() {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void ProgramCache::Connect() {
  Disconnect();
  state_ = CacheState::kMemoryOnly;
  const std::string& path = options_.path;
  if (path.empty()) return;
  if (!options_.create && !fs::exists(path)) return;  // nothing to read, nothing to say
  if (options_.create) {
    std::error_code ec;
    const fs::path dir = fs::path(path).parent_path();
    if (!dir.empty() && !fs::exists(dir, ec)) fs::create_directories(dir, ec);
    if (ec) {
      Problem("cannot create its directory (" + ec.message() +
              "); continuing without a cache file");
      return;
    }
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;  // db_mutex_ serializes all use
  if (options_.create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = std::string("open: ") + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    Disconnect();
    throw SqliteError(rc, message);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
  const bool read_only = sqlite3_db_readonly(db_, "main") == 1;
  if (options_.max_page_count > 0)
    Exec(db_, "PRAGMA max_page_count=" + std::to_string(options_.max_page_count));
  if (!read_only) {
    // WAL lets readers and one writer of several processes work at once; NORMAL
    // synchronization keeps the file consistent (a power loss can only drop the last writes).
    Statement wal(db_, "PRAGMA journal_mode=WAL");
    wal.Step();
    Exec(db_, "PRAGMA synchronous=NORMAL");
  }
  CreateSchema(read_only);
}

void ProgramCache::CreateSchema(bool read_only) {
  // Is this file ours, and in which format?
  bool has_meta = false, has_other_tables = false;
  {
    Statement tables(db_, "SELECT name FROM sqlite_master WHERE type='table'");
    while (tables.Step()) {
      const std::string name = tables.String(0);
      if (name == "meta")
        has_meta = true;
      else
        has_other_tables = true;
    }
  }
  int format = 0;
  if (has_meta) {
    Statement meta(db_, "SELECT value FROM meta WHERE name='format'");
    if (meta.Step()) format = static_cast<int>(meta.Int(0));
  }
  if (has_meta && format == 0) has_other_tables = true;  // a "meta" table that is not ours
  if (!has_meta && has_other_tables) {
    Degrade(CacheState::kMemoryOnly,
            "is an SQLite database but not an mpcaffe kernel cache; leaving it untouched and "
            "continuing without a cache file");
    return;
  }
  if (format > kCacheFormatVersion) {
    Degrade(CacheState::kMemoryOnly,
            "was written by a newer mpcaffe (cache format " + std::to_string(format) +
                ", this build uses " + std::to_string(kCacheFormatVersion) +
                "); leaving it untouched and continuing without a cache file");
    return;
  }
  // The library version the tuning records were measured with (absent: before versions).
  std::string file_version;
  if (has_meta && format == kCacheFormatVersion) {
    Statement meta(db_, "SELECT value FROM meta WHERE name='library_version'");
    if (meta.Step()) file_version = meta.String(0);
  }
  const bool other_version = file_version != options_.library_version;
  if (read_only) {
    if (format == kCacheFormatVersion) {
      state_ = CacheState::kReadOnly;
      tuning_from_other_version_ = other_version;
      Problem("is read-only: stored programs are used, new ones are not saved");
    } else {
      Degrade(CacheState::kMemoryOnly,
              format ? "is read-only and of an older cache format; continuing without it"
                     : "is read-only and empty; continuing without a cache file");
    }
    return;
  }

  Transaction txn(db_);
  if (format && format < kCacheFormatVersion) {
    // An older layout: its binaries were keyed under other rules. Rebuild.
    std::vector<std::string> tables;
    {
      Statement list(db_, "SELECT name FROM sqlite_master WHERE type='table'");
      while (list.Step()) tables.push_back(list.String(0));
    }
    for (const auto& t : tables) Exec(db_, "DROP TABLE IF EXISTS \"" + t + "\"");
    Problem("was written by an older cache format (" + std::to_string(format) +
            "); it has been emptied and is refilled as programs compile");
  }
  Exec(db_, "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL)");
  Exec(db_, Sql("CREATE TABLE IF NOT EXISTS $T("
                "key TEXT PRIMARY KEY, device TEXT NOT NULL, backend TEXT NOT NULL, "
                "platform TEXT NOT NULL, device_name TEXT NOT NULL, driver TEXT NOT NULL, "
                "arch TEXT NOT NULL, options TEXT NOT NULL, created TEXT NOT NULL, "
                "checksum TEXT NOT NULL, source TEXT NOT NULL, binary BLOB NOT NULL)",
                kPrograms));
  Exec(db_, Sql("CREATE TABLE IF NOT EXISTS $T("
                "device TEXT NOT NULL, operation TEXT NOT NULL, signature TEXT NOT NULL, "
                "parameters TEXT NOT NULL, time_ms REAL NOT NULL, date TEXT NOT NULL, "
                "PRIMARY KEY(device, operation, signature))",
                kTuning));
  Exec(db_,
       Sql("CREATE TABLE IF NOT EXISTS $T(name TEXT PRIMARY KEY, value REAL NOT NULL)", kCounters));
  Exec(db_, "INSERT OR IGNORE INTO meta(name, value) VALUES('format', '" +
                std::to_string(kCacheFormatVersion) + "')");
  if (other_version) {
    Statement count(db_, Sql("SELECT COUNT(*) FROM $T", kTuning).c_str());
    const int64_t stale = count.Step() ? count.Int(0) : 0;
    Exec(db_, Sql("DELETE FROM $T", kTuning));
    Statement set(db_, "INSERT OR REPLACE INTO meta(name, value) VALUES('library_version', ?1)");
    set.Text(1, options_.library_version);
    set.Step();
    if (stale > 0)
      Problem("holds " + std::to_string(stale) + " tuning records of mpcaffe " +
              (file_version.empty() ? std::string("(unrecorded version)") : file_version) +
              "; they were deleted, as this is mpcaffe " + options_.library_version +
              " (run `mpcaffe tune` again to re-measure)");
  }
  txn.Commit();
  state_ = CacheState::kReadWrite;
}

void ProgramCache::Problem(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(problem_mutex_);
    last_problem_ = message;
  }
  {
    std::lock_guard<std::mutex> lock(counters_mutex_);
    ++counters_.problems;
  }
  if (!warned_.exchange(true))
    std::fprintf(stderr,
                 "mpcaffe: warning: kernel cache %s %s (programs compile from source when "
                 "needed; later cache problems in this process are not printed)\n",
                 options_.path.c_str(), message.c_str());
}

void ProgramCache::Degrade(CacheState state, const std::string& message) {
  if (state == CacheState::kMemoryOnly) Disconnect();
  state_ = state;
  if (!message.empty()) Problem(message);
}

std::string ProgramCache::last_problem() const {
  std::lock_guard<std::mutex> lock(problem_mutex_);
  return last_problem_;
}

bool ProgramCache::HandleFailure(int code, const std::string& message, const char* what) {
  const int primary = code & 0xff;
  const std::string detail = std::string(" (") + what + ": " + message + ")";
  if (IsCorruption(code)) return RepairCorruptFile(what + (": " + message));
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      Degrade(CacheState::kMemoryOnly, "is locked by another process for longer than the " +
                                           std::to_string(options_.busy_timeout_ms) +
                                           " ms busy timeout; continuing without it" + detail);
      return false;
    case SQLITE_FULL:
      Degrade(CacheState::kReadOnly,
              "is full (disk full or size limit reached); stored programs are used, new ones "
              "are no longer saved" +
                  detail);
      return false;
    case SQLITE_READONLY:
      Degrade(CacheState::kReadOnly,
              "cannot be written; stored programs are used, new ones are not saved" + detail);
      return false;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      Degrade(CacheState::kMemoryOnly, "cannot be opened; continuing without it" + detail);
      return false;
    default:
      Degrade(CacheState::kMemoryOnly, "failed; continuing without it" + detail);
      return false;
  }
}

bool ProgramCache::RepairCorruptFile(const std::string& why) {
  Disconnect();
  state_ = CacheState::kMemoryOnly;
  DirectoryLock lock(options_.path, options_.busy_timeout_ms);
  if (!lock.locked()) {
    Problem("looks corrupt (" + why +
            ") and its directory could not be locked to repair it; "
            "continuing without it");
    return false;
  }
  // Another process may have replaced the file while this one waited: ask SQLite again.
  int rc = SQLITE_OK;
  const std::string verdict = QuickCheck(options_.path, options_.busy_timeout_ms, &rc);
  if (rc == SQLITE_OK && verdict == "ok") return true;
  if (rc != SQLITE_OK && !IsCorruption(rc)) {
    HandleFailure(rc, verdict, "checking a file that looked corrupt");
    return false;
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = options_.path + suffix;
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
      Problem("is corrupt (" + why + ") and cannot be removed (" + std::strerror(errno) +
              "); continuing without it");
      return false;
    }
  }
  Problem("was corrupt (" + why + "); it has been deleted and is rebuilt as programs compile");
  return true;
}

template <typename Body>
bool ProgramCache::WithFile(const char* what, bool write, Body&& body) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const CacheState state = state_.load();
    if (!db_ || state == CacheState::kMemoryOnly) return false;
    if (write && state != CacheState::kReadWrite) return false;
    try {
      body();
      return true;
    } catch (const SqliteError& e) {
      if (!HandleFailure(e.code(), e.what(), what)) return false;
      try {
        Connect();
      } catch (const SqliteError& again) {
        HandleFailure(again.code(), again.what(), "reopening the rebuilt file");
        Degrade(CacheState::kMemoryOnly, "");
        return false;
      }
    }
  }
  return false;
}

void ProgramCache::FlushCounters() {
  PendingCounters p;
  {
    std::lock_guard<std::mutex> lock(counters_mutex_);
    p = pending_;
    pending_ = PendingCounters{};
  }
  const std::pair<const char*, double> values[] = {{"hits", double(p.hits)},
                                                   {"misses", double(p.misses)},
                                                   {"compiles", double(p.compiles)},
                                                   {"loads", double(p.loads)},
                                                   {"compile_seconds", p.compile_seconds},
                                                   {"load_seconds", p.load_seconds}};
  for (const auto& [name, value] : values) {
    if (value == 0) continue;
    Statement add(db_, Sql("INSERT INTO $T(name, value) VALUES(?1, ?2) "
                           "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
                           kCounters)
                           .c_str());
    add.Text(1, name).Real(2, value);
    add.Step();
  }
}

// ---------------------------------------------------------------------------------------------
// ProgramBinaryStore.

std::optional<std::string> ProgramCache::Load(const ProgramKey& key) {
  const std::string device = ProgramDeviceHash(key);
  const std::string hash = ProgramKeyHash(key);
  {
    std::shared_lock<std::shared_mutex> lock(memory_mutex_);
    auto d = memory_.find(device);
    if (d != memory_.end()) {
      auto e = d->second.find(hash);
      if (e != d->second.end() && SameKey(e->second.key, key)) {
        std::lock_guard<std::mutex> count(counters_mutex_);
        ++counters_.hits;
        ++counters_.memory_hits;
        ++pending_.hits;
        counters_.bytes_loaded += e->second.binary->size();
        return *e->second.binary;
      }
    }
  }

  std::optional<std::string> found;
  bool corrupt_entry = false;
  {
    std::lock_guard<std::mutex> lock(db_mutex_);
    WithFile("loading a program", false, [&] {
      Statement select(db_, Sql("SELECT backend, platform, device_name, driver, arch, options, "
                                "source, checksum, binary FROM $T WHERE key = ?1",
                                kPrograms)
                                .c_str());
      select.Text(1, hash);
      if (!select.Step()) return;
      ProgramKey stored{select.String(0), select.String(1), select.String(2), select.String(3),
                        select.String(4), select.String(5), select.String(6)};
      // A different key under the same hash: never load it (Save will replace the row).
      if (!SameKey(stored, key)) return;
      std::string binary = select.String(8);
      if (binary.empty() || Sha256Hex(binary) != select.String(7)) {
        corrupt_entry = true;
        return;
      }
      found = std::move(binary);
    });
    if (corrupt_entry) {
      Problem(
          "holds a corrupt binary (checksum mismatch); the entry is deleted and the program "
          "compiled from source");
      WithFile("deleting a corrupt entry", true, [&] {
        Statement del(db_, Sql("DELETE FROM $T WHERE key = ?1", kPrograms).c_str());
        del.Text(1, hash);
        del.Step();
      });
    }
  }

  if (found) {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    memory_[device][hash] = MemoryEntry{key, std::make_shared<const std::string>(*found)};
  }
  std::lock_guard<std::mutex> count(counters_mutex_);
  if (corrupt_entry) ++counters_.rejects;
  if (!found) {
    ++counters_.misses;
    ++pending_.misses;
    return std::nullopt;
  }
  ++counters_.hits;
  ++pending_.hits;
  counters_.bytes_loaded += found->size();
  return found;
}

void ProgramCache::Save(const ProgramKey& key, const std::string& binary) {
  const std::string device = ProgramDeviceHash(key);
  const std::string hash = ProgramKeyHash(key);
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    memory_[device][hash] = MemoryEntry{key, std::make_shared<const std::string>(binary)};
  }
  {
    std::lock_guard<std::mutex> count(counters_mutex_);
    ++counters_.saves;
    counters_.bytes_saved += binary.size();
  }
  if (binary.empty()) return;
  const std::string checksum = Sha256Hex(binary);
  const std::string created = UtcNow();
  std::lock_guard<std::mutex> lock(db_mutex_);
  WithFile("saving a program", true, [&] {
    Transaction txn(db_);
    Statement insert(db_, Sql("INSERT OR REPLACE INTO $T(key, device, backend, platform, "
                              "device_name, driver, arch, options, created, checksum, source, "
                              "binary) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                              kPrograms)
                              .c_str());
    insert.Text(1, hash).Text(2, device).Text(3, key.backend).Text(4, key.platform);
    insert.Text(5, key.device).Text(6, key.driver).Text(7, key.arch).Text(8, key.options);
    insert.Text(9, created).Text(10, checksum).Text(11, key.source).Blob(12, binary);
    insert.Step();
    FlushCounters();
    txn.Commit();
  });
}

void ProgramCache::Reject(const ProgramKey& key, const std::string& reason) {
  const std::string device = ProgramDeviceHash(key);
  const std::string hash = ProgramKeyHash(key);
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    auto d = memory_.find(device);
    if (d != memory_.end()) d->second.erase(hash);
  }
  {
    std::lock_guard<std::mutex> count(counters_mutex_);
    ++counters_.rejects;
  }
  Problem("holds a binary the driver rejected (" + reason +
          "); the entry is deleted and the program compiled from source");
  std::lock_guard<std::mutex> lock(db_mutex_);
  WithFile("deleting a rejected entry", true, [&] {
    Statement del(db_, Sql("DELETE FROM $T WHERE key = ?1", kPrograms).c_str());
    del.Text(1, hash);
    del.Step();
  });
}

void ProgramCache::RecordCompile(double seconds) {
  std::lock_guard<std::mutex> lock(counters_mutex_);
  ++counters_.compiles;
  counters_.compile_seconds += seconds;
  ++pending_.compiles;
  pending_.compile_seconds += seconds;
}

void ProgramCache::RecordLoad(double seconds) {
  std::lock_guard<std::mutex> lock(counters_mutex_);
  ++counters_.loads;
  counters_.load_seconds += seconds;
  ++pending_.loads;
  pending_.load_seconds += seconds;
}

CacheCounters ProgramCache::counters() const {
  std::lock_guard<std::mutex> lock(counters_mutex_);
  return counters_;
}

CacheFileStats ProgramCache::FileStats() {
  CacheFileStats stats;
  stats.path = options_.path;
  std::lock_guard<std::mutex> lock(db_mutex_);
  stats.file_exists = !options_.path.empty() && fs::exists(options_.path);
  stats.file_bytes = FileSize(options_.path) + FileSize(options_.path + "-wal");
  bool pending = false;
  {
    std::lock_guard<std::mutex> count(counters_mutex_);
    pending = pending_.hits || pending_.misses || pending_.compiles || pending_.loads;
  }
  if (pending) {
    WithFile("flushing counters", true, [&] {
      Transaction txn(db_);
      FlushCounters();
      txn.Commit();
    });
  }
  WithFile("reading statistics", false, [&] {
    CacheFileStats s = stats;
    {
      Statement programs(
          db_, Sql("SELECT count(*), coalesce(sum(length(binary)), 0) FROM $T", kPrograms).c_str());
      programs.Step();
      s.programs = programs.Int(0);
      s.bytes = programs.Int(1);
    }
    {
      Statement tuning(db_, Sql("SELECT count(*) FROM $T", kTuning).c_str());
      tuning.Step();
      s.tuning_records = tuning.Int(0);
    }
    Statement counters(db_, Sql("SELECT name, value FROM $T", kCounters).c_str());
    while (counters.Step()) CountInto(&s, counters.String(0), counters.Double(1));
    stats = s;
  });
  stats.state = state_.load();
  {
    // Whatever could not be flushed (read-only or memory-only file) is added here.
    std::lock_guard<std::mutex> count(counters_mutex_);
    const PendingCounters& p = pending_;
    stats.hits += p.hits;
    stats.misses += p.misses;
    stats.compiles += p.compiles;
    stats.loads += p.loads;
    stats.compile_seconds += p.compile_seconds;
    stats.load_seconds += p.load_seconds;
  }
  return stats;
}

bool ProgramCache::Clear() {
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    memory_.clear();
    tuning_memory_.clear();
  }
  {
    std::lock_guard<std::mutex> count(counters_mutex_);
    pending_ = PendingCounters{};
  }
  std::lock_guard<std::mutex> lock(db_mutex_);
  const bool cleared = WithFile("clearing", true, [&] {
    Transaction txn(db_);
    for (const char* table : {kPrograms, kTuning, kCounters})
      Exec(db_, std::string("DELETE FROM ") + table);
    txn.Commit();
  });
  if (cleared) {
    // Give the space back; harmless if another process holds a read transaction.
    WithFile("compacting", true, [&] {
      Exec(db_, "VACUUM");
      Exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
    });
  }
  return cleared;
}

// ---------------------------------------------------------------------------------------------
// Tuning table.

std::optional<TuningRecord> ProgramCache::GetTuning(const std::string& device,
                                                    const std::string& operation,
                                                    const std::string& signature) {
  const std::string memory_key = TuningMemoryKey(device, operation, signature);
  {
    std::shared_lock<std::shared_mutex> lock(memory_mutex_);
    auto it = tuning_memory_.find(memory_key);
    if (it != tuning_memory_.end()) return it->second;
  }
  std::optional<TuningRecord> found;
  {
    std::lock_guard<std::mutex> lock(db_mutex_);
    if (!tuning_from_other_version_) WithFile("reading a tuning record", false, [&] {
      Statement select(db_, Sql("SELECT parameters, time_ms, date FROM $T WHERE device = ?1 "
                                "AND operation = ?2 AND signature = ?3",
                                kTuning)
                                .c_str());
      select.Text(1, device).Text(2, operation).Text(3, signature);
      if (select.Step())
        found = TuningRecord{device,           operation,        signature,
                             select.String(0), select.Double(1), select.String(2)};
    });
  }
  if (found) {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    tuning_memory_[memory_key] = *found;
  }
  return found;
}

bool ProgramCache::PutTuning(TuningRecord record) {
  if (record.date.empty()) record.date = UtcNow();
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    tuning_memory_[TuningMemoryKey(record.device, record.operation, record.signature)] = record;
  }
  std::lock_guard<std::mutex> lock(db_mutex_);
  return WithFile("saving a tuning record", true, [&] {
    Transaction txn(db_);
    Statement insert(db_, Sql("INSERT OR REPLACE INTO $T(device, operation, signature, "
                              "parameters, time_ms, date) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                              kTuning)
                              .c_str());
    insert.Text(1, record.device).Text(2, record.operation).Text(3, record.signature);
    insert.Text(4, record.parameters).Real(5, record.time_ms).Text(6, record.date);
    insert.Step();
    txn.Commit();
  });
}

std::vector<TuningRecord> ProgramCache::ListTuning(const std::string& device,
                                                   const std::string& operation) {
  std::vector<TuningRecord> out;
  bool from_file = false;
  {
    std::lock_guard<std::mutex> lock(db_mutex_);
    from_file = WithFile("listing tuning records", false, [&] {
      std::vector<TuningRecord> rows;
      Statement select(db_, Sql("SELECT device, operation, signature, parameters, time_ms, date "
                                "FROM $T WHERE (?1 = '' OR device = ?1) AND "
                                "(?2 = '' OR operation = ?2) "
                                "ORDER BY device, operation, signature",
                                kTuning)
                                .c_str());
      select.Text(1, device).Text(2, operation);
      while (select.Step())
        rows.push_back(TuningRecord{select.String(0), select.String(1), select.String(2),
                                    select.String(3), select.Double(4), select.String(5)});
      out = std::move(rows);
    });
  }
  // Records that never reached the file (read-only, memory-only) still count.
  std::shared_lock<std::shared_mutex> lock(memory_mutex_);
  for (const auto& [k, r] : tuning_memory_) {
    if ((!device.empty() && r.device != device) || (!operation.empty() && r.operation != operation))
      continue;
    bool present = false;
    if (from_file)
      for (const auto& o : out)
        present |= o.device == r.device && o.operation == r.operation && o.signature == r.signature;
    if (!present) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const TuningRecord& a, const TuningRecord& b) {
    return std::tie(a.device, a.operation, a.signature) <
           std::tie(b.device, b.operation, b.signature);
  });
  return out;
}

size_t ProgramCache::ClearTuning(const std::string& device, const std::string& operation) {
  size_t removed_memory = 0;
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    for (auto it = tuning_memory_.begin(); it != tuning_memory_.end();) {
      const TuningRecord& r = it->second;
      if ((device.empty() || r.device == device) &&
          (operation.empty() || r.operation == operation)) {
        it = tuning_memory_.erase(it);
        ++removed_memory;
      } else {
        ++it;
      }
    }
  }
  size_t removed_file = 0;
  std::lock_guard<std::mutex> lock(db_mutex_);
  const bool done = WithFile("clearing tuning records", true, [&] {
    Transaction txn(db_);
    Statement del(db_, Sql("DELETE FROM $T WHERE (?1 = '' OR device = ?1) AND "
                           "(?2 = '' OR operation = ?2)",
                           kTuning)
                           .c_str());
    del.Text(1, device).Text(2, operation);
    del.Step();
    removed_file = static_cast<size_t>(sqlite3_changes(db_));
    txn.Commit();
  });
  return done ? removed_file : removed_memory;
}

// ---------------------------------------------------------------------------------------------
// The default cache.

std::string DefaultCachePath(std::string* why) {
  auto said = [&](const char* reason) {
    if (why) *why = reason;
  };
  const Settings& settings = GetSettings();
  if (!settings.cache.empty()) {
    const std::string& value = settings.cache;
    std::string lower;
    for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    said("MPCAFFE_CACHE");
    return lower == "off" ? std::string() : value;
  }
  const std::string& xdg = settings.xdg_cache_home;
  if (!xdg.empty() && xdg[0] == '/') {  // the XDG spec ignores relative paths
    said("XDG_CACHE_HOME");
    return xdg + "/mpcaffe/kernels.sqlite";
  }
  std::string home = settings.home;
  if (home.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  said(home.empty() ? "no HOME" : "HOME");
  return home.empty() ? std::string() : home + "/.cache/mpcaffe/kernels.sqlite";
}

namespace {
std::mutex default_mutex;
bool default_done = false;
std::shared_ptr<ProgramCache> default_cache;
}  // namespace

std::shared_ptr<ProgramCache> EnableProgramCache() {
  std::lock_guard<std::mutex> lock(default_mutex);
  if (default_done) return default_cache;
  default_done = true;
  std::string why;
  const std::string path = DefaultCachePath(&why);
  if (path.empty()) {
    if (why != "MPCAFFE_CACHE")
      std::fprintf(stderr,
                   "mpcaffe: warning: no kernel cache location (set MPCAFFE_CACHE, "
                   "XDG_CACHE_HOME or HOME); programs compile from source in every run\n");
    return nullptr;
  }
  default_cache = std::make_shared<ProgramCache>(CacheOptions{path});
  SetProgramBinaryStore(default_cache);
  return default_cache;
}

std::shared_ptr<ProgramCache> ActiveProgramCache() {
  std::lock_guard<std::mutex> lock(default_mutex);
  return default_cache;
}

}  // namespace mpcaffe::cache
