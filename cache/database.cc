// cache/database.cc — the database layer of ProgramCache: opening the SQLite file (WAL, busy
// timeout, size limit), its schema and library version, the failure policy (repair a corrupt
// file once, else degrade to read-only or memory-only and say so once), and the counters it
// flushes to the file.
#include "cache/database.h"

namespace mpcaffe::cache {

using namespace db;  // NOLINT: the database layer's vocabulary

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
  // Processes that open the file at the same instant (CTest starts two suites on a new cache)
  // take turns until it is in WAL mode: a connection that read the header before another one
  // switched it would wait for an exclusive lock that every WAL connection's shared lock denies,
  // and give the file up after the busy timeout. (Without the lock, e.g. a read-only folder,
  // the open goes on as before.)
  DirectoryLock first_open(path, options_.busy_timeout_ms);
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
  Exec(db_, Sql("CREATE TABLE IF NOT EXISTS $T(key TEXT PRIMARY KEY, device TEXT NOT NULL, "
                "created TEXT NOT NULL)",
                kBuilt));
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

}  // namespace mpcaffe::cache
