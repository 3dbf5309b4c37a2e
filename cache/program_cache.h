// cache/program_cache.h — the SQLite file that keeps compiled program binaries and tuning
// results across processes, and the process-wide default cache behind every BuildProgram.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "device/device.h"
#include "device/program_store.h"
#include "mpcaffe/version.h"

struct sqlite3;

namespace mpcaffe::cache {

/// Version of the file layout and of the key derivation. It is hashed into every key and
/// names the tables, so a change can never load a binary written under other rules. A file
/// of an older version is rebuilt; a file of a newer version is left alone and not used.
inline constexpr int kCacheFormatVersion = 1;

/// The syntax of the tuning records' parameters, part of the records' version (library_version
/// below): 2 is "family:config" (libdnn/kernel_config.h). A file holding records of another
/// syntax has them deleted when opened, as records of another library version are.
inline constexpr int kTuningRecordSyntax = 2;

/// How to open a cache file.
struct CacheOptions {
  std::string path;             // the SQLite file; its directory is created when absent
  int busy_timeout_ms = 10000;  // how long to wait for another process's lock before giving up
  int64_t max_page_count = 0;   // > 0: PRAGMA max_page_count (a size limit; tests use it)
  bool create = true;           // false: a missing file is not created (the cache is then empty)
  /// The library version the tuning records belong to. Program binaries need no version: their
  /// key holds the whole kernel text and options, so a release that changes a kernel misses.
  /// Tuning records are keyed by problem, not by kernel text, so a winner measured under another
  /// version's kernels is not trusted: opening a file last used by another version deletes its
  /// tuning records (read-only: ignores them).
  std::string library_version =
      std::string(MPCAFFE_VERSION) + "+records" + std::to_string(kTuningRecordSyntax);
};

/// What the cache can still do with its file.
enum class CacheState {
  kReadWrite,   // loads and saves go to the file
  kReadOnly,    // stored programs load; new ones are kept in memory only
  kMemoryOnly,  // the file is not used (absent, unusable, locked, newer format, or disabled)
};
const char* CacheStateName(CacheState state);

/// This process's counters (since the cache object was created).
struct CacheCounters {
  uint64_t hits = 0;         // Load() returned a binary
  uint64_t memory_hits = 0;  // ... of which came from the in-process map, not from SQLite
  uint64_t misses = 0;       // Load() returned nothing
  uint64_t saves = 0;        // Save() calls
  uint64_t rejects = 0;      // binaries dropped: checksum mismatch or refused by the driver
  uint64_t compiles = 0;     // RecordCompile() calls
  uint64_t loads = 0;        // RecordLoad() calls
  double compile_seconds = 0;
  double load_seconds = 0;
  uint64_t bytes_loaded = 0;  // binary bytes returned by Load()
  uint64_t bytes_saved = 0;   // binary bytes passed to Save()
  uint64_t problems = 0;      // file problems met (only the first one is printed)
};

/// The file's contents and its counters accumulated over every process that used it
/// (this process's included).
struct CacheFileStats {
  std::string path;
  CacheState state = CacheState::kMemoryOnly;
  bool file_exists = false;
  uint64_t programs = 0;
  uint64_t tuning_records = 0;
  uint64_t bytes = 0;       // sum of stored binary sizes
  uint64_t file_bytes = 0;  // size of the SQLite file (and its WAL) on disk
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t compiles = 0;
  double compile_seconds = 0;
  uint64_t loads = 0;
  double load_seconds = 0;
};

/// One tuning result: the best parameters found for an operation on a device.
struct TuningRecord {
  std::string device;      // TuningDeviceKey() of the device
  std::string operation;   // e.g. "gemm"
  std::string signature;   // the problem, e.g. "fp32 M=64 N=64 K=576 ta=0 tb=1"
  std::string parameters;  // the winner, as text the tuner can parse back
  double time_ms = 0;      // its measured time
  std::string date;        // UTC, ISO 8601; filled in by PutTuning when empty
};

/// Program binaries and tuning results in one SQLite file (WAL journal, busy timeout, every
/// write a transaction), fronted by a thread-safe in-process map per device. It never throws
/// and never fails a build: when the file is corrupt it is deleted and rebuilt, and when it is
/// locked for too long, read-only, full, or of a newer format, the cache says so once on
/// stderr and carries on in memory.
class ProgramCache : public ProgramBinaryStore {
 public:
  explicit ProgramCache(CacheOptions options);
  ~ProgramCache() override;  // adds this process's counters to the file's
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // ProgramBinaryStore.
  std::optional<std::string> Load(const ProgramKey& key) override;
  void Save(const ProgramKey& key, const std::string& binary) override;
  void Reject(const ProgramKey& key, const std::string& reason) override;
  bool WasBuilt(const ProgramKey& key) override;
  void NoteBuilt(const ProgramKey& key) override;
  void RecordCompile(double seconds) override;
  void RecordLoad(double seconds) override;

  const std::string& path() const { return options_.path; }
  CacheState state() const { return state_.load(); }
  CacheCounters counters() const;
  /// Counts from the file plus this process's counters. Never throws.
  CacheFileStats FileStats();
  /// Deletes every program, tuning record and counter, in the file and in memory. Returns
  /// false when the file could not be written (the in-memory part is cleared anyway).
  bool Clear();

  /// The tuning table. Keys are (device, operation, signature); Put replaces.
  std::optional<TuningRecord> GetTuning(const std::string& device, const std::string& operation,
                                        const std::string& signature);
  /// Stores the record (in memory at least); returns whether it reached the file.
  bool PutTuning(TuningRecord record);
  /// Records matching the filters (empty = any), ordered by device, operation, signature.
  std::vector<TuningRecord> ListTuning(const std::string& device = "",
                                       const std::string& operation = "");
  /// Deletes matching records; returns how many were removed from the file (or memory).
  size_t ClearTuning(const std::string& device = "", const std::string& operation = "");

  /// How many warnings this cache printed (at most one) and the latest problem met.
  int warnings_printed() const { return warned_.load() ? 1 : 0; }
  std::string last_problem() const;

 private:
  struct MemoryEntry {
    ProgramKey key;
    std::shared_ptr<const std::string> binary;
  };
  struct PendingCounters {
    uint64_t hits = 0, misses = 0, compiles = 0, loads = 0;
    double compile_seconds = 0, load_seconds = 0;
  };

  // All of these run with db_mutex_ held.
  void Connect();
  void CreateSchema(bool read_only);
  void Disconnect();
  /// Runs `body` against the file when the state allows it; on an SQLite failure applies
  /// the failure policy (repair once and retry, or degrade). Returns whether `body` completed.
  template <typename Body>
  bool WithFile(const char* what, bool write, Body&& body);
  /// Handles a failure of `what`; returns true when the file was repaired (retry makes sense).
  bool HandleFailure(int code, const std::string& message, const char* what);
  bool RepairCorruptFile(const std::string& why);
  void FlushCounters();

  void Problem(const std::string& message);
  void Degrade(CacheState state, const std::string& message);

  CacheOptions options_;
  std::mutex db_mutex_;
  sqlite3* db_ = nullptr;
  std::atomic<CacheState> state_{CacheState::kMemoryOnly};

  std::shared_mutex memory_mutex_;
  // device id -> key hash -> entry
  std::unordered_map<std::string, std::unordered_map<std::string, MemoryEntry>> memory_;
  std::unordered_map<std::string, TuningRecord> tuning_memory_;
  std::unordered_set<std::string> built_memory_;  // key hashes NoteBuilt recorded

  mutable std::mutex counters_mutex_;
  CacheCounters counters_;
  PendingCounters pending_;  // not yet added to the file's counters

  std::atomic<bool> tuning_from_other_version_{false};  // read-only file of another version
  std::atomic<bool> warned_{false};
  mutable std::mutex problem_mutex_;
  std::string last_problem_;
};

/// Hex SHA-256 of the format version and every field of the key: the row key.
std::string ProgramKeyHash(const ProgramKey& key);
/// Hex SHA-256 of the device part of the key (backend, platform, device, driver, arch).
std::string ProgramDeviceHash(const ProgramKey& key);
/// The device column of the tuning table for a device: backend, platform, name, driver and
/// architecture, readable.
std::string TuningDeviceKey(const DeviceInfo& info);

/// Where the default cache lives: MPCAFFE_CACHE (a path, or "off" which gives ""), else
/// $XDG_CACHE_HOME/mpcaffe/kernels.sqlite, else ~/.cache/mpcaffe/kernels.sqlite. `why` (if
/// given) receives which variable decided.
std::string DefaultCachePath(std::string* why = nullptr);

/// Installs the default cache as the process's program binary store (once; later calls
/// return the same object). Returns null when MPCAFFE_CACHE=off or no location is known.
std::shared_ptr<ProgramCache> EnableProgramCache();
/// The cache EnableProgramCache() installed, or null.
std::shared_ptr<ProgramCache> ActiveProgramCache();

}  // namespace mpcaffe::cache
