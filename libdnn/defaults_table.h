// libdnn/defaults_table.h — a kernel family's default configurations as data: rows of (device
// class, configuration, the measurement behind it), the first row serving a device and problem
// taken. `mpcaffe time --explain` names the family and configuration; the row says why.
#pragma once

#include <string>
#include <vector>

#include "codegen/target_profile.h"
#include "device/error.h"

namespace mpcaffe::libdnn {

/// One row: `serves` says whether the row is the default of a device (its target profile) for a
/// problem key (a data type, a description); `device_class` says the same in words.
template <typename Config, typename Key>
struct DefaultRow {
  const char* device_class;
  bool (*serves)(const TargetProfile&, const Key&);
  Config config;
  /// The command and date that measured the row (figures: docs/BENCHMARKS.md, "Default
  /// configurations"), or why it was not measured.
  const char* provenance;
};

template <typename Config, typename Key>
using DefaultsTable = std::vector<DefaultRow<Config, Key>>;

/// The first row of `table` serving (`profile`, `key`). A table ends in a row serving every
/// device; one that does not is a library bug, reported as an Error naming `family`.
template <typename Config, typename Key>
const DefaultRow<Config, Key>& DefaultRowFor(const DefaultsTable<Config, Key>& table,
                                             const char* family, const TargetProfile& profile,
                                             const Key& key) {
  for (const auto& row : table)
    if (row.serves(profile, key)) return row;
  throw Error(std::string("kernel family ") + family + ": no default row serves this device");
}

/// The first of `families` (rows with `applies(desc, profile)`, in the order they are tried) that
/// applies to `desc`. Every list ends in a family that applies everywhere; one that does not is
/// a library bug, reported as an Error naming `what` (the operation and its description).
template <typename Family, typename Desc>
const Family& FirstFamilyApplying(const std::vector<Family>& families, const Desc& desc,
                                  const TargetProfile& profile, const std::string& what) {
  for (const Family& f : families)
    if (f.applies(desc, profile)) return f;
  throw Error(what + ": no forward family applies");
}

}  // namespace mpcaffe::libdnn
