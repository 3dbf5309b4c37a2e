// libdnn/defaults_listing.cc — the defaults tables of libdnn's families printed as rows
// (defaults_listing.h), reached through the registry's choices (kernel_families.h).
#include "libdnn/defaults_listing.h"

#include "libdnn/kernel_families.h"

namespace mpcaffe::libdnn {

namespace {

std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

}  // namespace

std::vector<DefaultsListingRow> DefaultsListing() {
  std::vector<DefaultsListingRow> rows;
  for (const KernelFamilyEntry& family : KernelFamilyRegistry())
    for (const KernelChoiceName& choice : family.choices)
      if (choice.defaults)
        for (const ChoiceDefaultsRow& r : choice.defaults())
          rows.push_back({choice.name, r.what, r.device_class, r.config, r.provenance});
  return rows;
}

std::string DefaultsMarkdown() {
  std::string out =
      "| family | chooses | device class | default | measured by |\n| --- | --- | --- | --- | --- "
      "|\n";
  for (const DefaultsListingRow& r : DefaultsListing())
    out += "| " + Cell(r.family) + " | " + Cell(r.what) + " | " + Cell(r.device_class) + " | `" +
           Cell(r.config) + "` | " + Cell(r.provenance) + " |\n";
  return out;
}

}  // namespace mpcaffe::libdnn
