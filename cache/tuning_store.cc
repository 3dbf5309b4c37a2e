// cache/tuning_store.cc — the tuning table of ProgramCache: device keys, Get / Put / List /
// Clear of tuning records (in memory and in the file; records of another library version are
// dropped when the file is opened, see database.cc).
#include "cache/database.h"

namespace mpcaffe::cache {

using namespace db;  // NOLINT: the database layer's vocabulary

namespace {

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

std::string TuningDeviceKey(const DeviceInfo& info) {
  std::string key = std::string(BackendName(info.backend)) + " | " + info.platform_name + " " +
                    info.platform_version + " | " + info.name + " | " + info.driver_version;
  if (info.backend == Backend::kCuda) key += " | " + info.arch;
  if (!info.compile_target.empty()) key += " | target " + info.compile_target;
  return key;
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
    if (!tuning_from_other_version_)
      WithFile("reading a tuning record", false, [&] {
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

}  // namespace mpcaffe::cache
