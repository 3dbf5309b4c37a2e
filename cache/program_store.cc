// cache/program_store.cc — ProgramCache as the ProgramBinaryStore behind Device::BuildProgram:
// program keys and their hashes, Load / Save / Reject of binaries (an in-process map per device
// in front of the file), the compile and load counters, file statistics and Clear.
#include "cache/database.h"
#include "cache/sha256.h"

namespace mpcaffe::cache {

using namespace db;  // NOLINT: the database layer's vocabulary

namespace {

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

}  // namespace

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

bool ProgramCache::WasBuilt(const ProgramKey& key) {
  const std::string hash = ProgramKeyHash(key);
  {
    std::shared_lock<std::shared_mutex> lock(memory_mutex_);
    if (built_memory_.count(hash)) return true;
  }
  bool found = false;
  std::lock_guard<std::mutex> lock(db_mutex_);
  WithFile("looking up a build", false, [&] {
    Statement select(db_, Sql("SELECT 1 FROM $T WHERE key = ?1", kBuilt).c_str());
    select.Text(1, hash);
    found = select.Step();
  });
  return found;
}

void ProgramCache::NoteBuilt(const ProgramKey& key) {
  const std::string hash = ProgramKeyHash(key);
  {
    std::unique_lock<std::shared_mutex> lock(memory_mutex_);
    built_memory_.insert(hash);
  }
  const std::string created = UtcNow();
  std::lock_guard<std::mutex> lock(db_mutex_);
  WithFile("noting a build", true, [&] {
    Statement insert(db_, Sql("INSERT OR REPLACE INTO $T(key, device, created) VALUES(?1, ?2, ?3)",
                              kBuilt)
                              .c_str());
    insert.Text(1, hash).Text(2, ProgramDeviceHash(key)).Text(3, created);
    insert.Step();
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
    built_memory_.clear();
  }
  {
    std::lock_guard<std::mutex> count(counters_mutex_);
    pending_ = PendingCounters{};
  }
  std::lock_guard<std::mutex> lock(db_mutex_);
  const bool cleared = WithFile("clearing", true, [&] {
    Transaction txn(db_);
    for (const char* table : {kPrograms, kTuning, kCounters, kBuilt})
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

}  // namespace mpcaffe::cache
