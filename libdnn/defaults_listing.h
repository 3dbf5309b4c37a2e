// libdnn/defaults_listing.h — every kernel family's defaults table as text rows (family, device
// class, configuration, provenance) and as the markdown table docs/BENCHMARKS.md holds
// ("Default configurations"; `mpcaffe_defaults --markdown`, scripts/bench.sh's defaults step).
#pragma once

#include <string>
#include <vector>

namespace mpcaffe::libdnn {

/// One row of a family's defaults table, printed.
struct DefaultsListingRow {
  std::string family;        ///< the choice name: "gemm", "conv", "conv_pw", …
  std::string what;          ///< what the table chooses: "configuration", "launch", …
  std::string device_class;  ///< the row's device class and problem class
  std::string config;        ///< the configuration, as records and --explain print it
  std::string provenance;    ///< the command and date behind the row
};

/// The rows of every defaults table held as data, choice by choice in the registry's order
/// (KernelChoiceName::defaults: GEMM, the convolution's direct, pointwise and im2col + GEMM
/// families, the pointwise launch, pooling's vector max, LRN).
std::vector<DefaultsListingRow> DefaultsListing();

/// DefaultsListing as a markdown table (cells with `|` escaped), one line per row.
std::string DefaultsMarkdown();

}  // namespace mpcaffe::libdnn
