// libdnn/row_groups.h — the launch of kernels that walk rows of items (pooling's vector max,
// LRN's forward): work-groups along a row, the rows shared by a fixed number of groups; its text
// form ("width=8 groups=1024", MPCAFFE_KERNEL_CONFIG's pool_vector_max, lrn_vector and lrn
// entries) and the choice of a family's launch.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "libdnn/config_schema.h"
#include "libdnn/defaults_table.h"
#include "libdnn/kernel_config.h"

namespace mpcaffe::libdnn {

/// Work-groups of `width` work-items along a row (pooling: no wider than the row's vectors), and
/// about `groups` work-groups in all, each walking rows of its columns.
struct RowGroups {
  int width = 8;
  int groups = 1024;
  /// "width=<w> groups=<g>": a power-of-two width up to 256 (within every runtime's work-group
  /// limit), 1…65536 groups. No tuner variations: the launches are chosen by their tables.
  static const ConfigSchema<RowGroups>& Schema() {
    static const ConfigSchema<RowGroups> schema(
        "=", {{"width", &RowGroups::width, {1, 2, 4, 8, 16, 32, 64, 128, 256}},
              {"groups", &RowGroups::groups, ValueRange(1, 65536)}});
    return schema;
  }
  std::string ToString() const { return Schema().Print(*this); }
};

/// A row-walking family's launch and where it came from.
struct RowGroupsChoice {
  RowGroups launch;
  ConfigSource source = ConfigSource::kDefault;
};

/// The launch of `family` for `key`: MPCAFFE_KERNEL_CONFIG's entry for it (read with
/// RowGroups::Schema; a malformed one throws an Error naming `what`, the setting and the field),
/// else the first row of `table` serving `profile`. Nothing where the entry says "off": the next
/// family that applies runs. `last`: the family every description falls back to, which cannot
/// be off (an Error says so).
template <typename Key>
std::optional<RowGroupsChoice> ChooseRowGroups(const char* family,
                                               const DefaultsTable<RowGroups, Key>& table,
                                               const TargetProfile& profile, const Key& key,
                                               bool last, const std::string& what) {
  if (const std::optional<KernelConfigText> o = KernelConfigOverride(family)) {
    if (o->off()) {
      if (last)
        throw Error(what + ": MPCAFFE_KERNEL_CONFIG: " + o->ToString() + ": " + family +
                    " is the family every description falls back to; it cannot be off");
      return std::nullopt;
    }
    return RowGroupsChoice{
        ParseFamilyConfig(RowGroups::Schema(), family, o->config, what + ": MPCAFFE_KERNEL_CONFIG"),
        ConfigSource::kOverride};
  }
  return RowGroupsChoice{DefaultRowFor(table, family, profile, key).config, ConfigSource::kDefault};
}

/// The first of `families` (rows with a name, `applies(desc, profile)` and a `launch` table, in
/// the order they are tried) that applies to `desc` and that MPCAFFE_KERNEL_CONFIG does not turn
/// off, with its launch (ChooseRowGroups). A family without a launch table (pooling's scalar
/// kernel: the 1-D launch) is taken where it applies and has no configuration. `what` names the
/// operation and its description in errors.
template <typename Family, typename Desc>
std::pair<const Family*, RowGroupsChoice> FirstRowFamily(const std::vector<Family>& families,
                                                         const Desc& desc,
                                                         const TargetProfile& profile,
                                                         const std::string& what) {
  for (size_t i = 0; i < families.size(); ++i) {
    const Family& f = families[i];
    if (!f.applies(desc, profile)) continue;
    if (!f.launch) return {&f, RowGroupsChoice{}};
    const std::optional<RowGroupsChoice> c =
        ChooseRowGroups(f.name, f.launch(), profile, desc, i + 1 == families.size(), what);
    if (c) return {&f, *c};
  }
  throw Error(what + ": no forward family applies");
}

}  // namespace mpcaffe::libdnn
