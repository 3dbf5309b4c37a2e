// libdnn/defaults_listing.cc — the defaults tables of libdnn's families printed as rows
// (defaults_listing.h).
#include "libdnn/defaults_listing.h"

#include "libdnn/conv_families.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"

namespace mpcaffe::libdnn {

namespace {

template <typename Table, typename Print>
void Add(std::vector<DefaultsListingRow>* rows, const char* family, const char* what,
         const Table& table, Print print) {
  for (const auto& row : table)
    rows->push_back({family, what, row.device_class, print(row.config), row.provenance});
}

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
  Add(&rows, "gemm", "configuration", GemmDefaults(),
      [](const GemmConfig& c) { return c.ToString(); });
  Add(&rows, "conv", "configuration", DirectConvDefaults(),
      [](const ConvConfig& c) { return c.ToString(); });
  Add(&rows, "conv_pw", "configuration", PointwiseDefaults(),
      [](const Convolution::PointwiseTile& t) { return t.ToString(); });
  Add(&rows, "conv_pw", "launch", PointwiseSpreadDefaults(), [](int per_unit) {
    return per_unit ? "at least " + std::to_string(per_unit) + " work-groups per compute unit"
                    : std::string("the runtime's work-groups");
  });
  Add(&rows, "conv_dw", "rows", DepthwiseRowDefaults(),
      [](const DepthwiseRowRange& r) { return r.ToString(); });
  Add(&rows, "conv_gemm", "default forward", ConvGemmDefaults(),
      [](bool gemm) { return std::string(gemm ? "im2col + GEMM" : "off (the next family)"); });
  for (const PoolForwardFamily& f : PoolForwardFamilies())
    if (f.launch)
      Add(&rows, f.name, "launch", f.launch(), [](const RowGroups& r) { return r.ToString(); });
  for (const LrnForwardFamily& f : LrnForwardFamilies())
    Add(&rows, f.name, "launch", f.launch(), [](const RowGroups& r) { return r.ToString(); });
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
