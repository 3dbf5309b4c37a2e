// libdnn/conv_families.h — the forward kernel families of a convolution as rows: each with its
// name (the tuning records' and `mpcaffe time --explain`'s), the rule of when it applies (the
// description, its quantization and the target profile), how its configuration is chosen
// (MPCAFFE_KERNEL_CONFIG, else the tuning record, else its defaults table) and the defaults
// tables themselves. A convolution runs the first family that applies and is not "off".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "libdnn/conv.h"
#include "libdnn/conv_winograd.h"
#include "libdnn/defaults_table.h"
#include "libdnn/kernel_config.h"
#include "libdnn/tuner.h"  // Chosen

namespace mpcaffe::libdnn {

/// The direct kernel's defaults per device class and data type (DefaultConvConfig).
const DefaultsTable<ConvConfig, DataType>& DirectConvDefaults();
/// The direct kernel's configuration for some descriptions ahead of DirectConvDefaults' row for
/// their data type (DefaultConvConfig of a description); nothing: that row.
const DefaultsTable<std::optional<ConvConfig>, ConvDesc>& DirectShapeDefaults();
/// The pointwise kernel's tile per description, the same on every device
/// (Convolution::DefaultPointwiseTile).
const DefaultsTable<Convolution::PointwiseTile, ConvDesc>& PointwiseDefaults();
/// Whether a strided 1×1 layer (Convolution::IsStridedPointwise) without a tuning record or
/// override takes the pointwise kernel on its subsampled input (true) or the next family.
const DefaultsTable<bool, ConvDesc>& StridedPointwiseDefaults();
/// Whether an int8q first layer (the row form's descriptions) without a tuning record or
/// override takes the pointwise row form (true) or the next family (the direct kernel's grid
/// form where byte quads run: DirectShapeDefaults).
const DefaultsTable<bool, ConvDesc>& FirstLayerPointwiseDefaults();
/// How many input channels ahead the fp32 plane form fetches its pixels (PointwiseTile::pf; 0:
/// none), the default tile's field (Convolution::DefaultPointwiseTile).
const DefaultsTable<int, ConvDesc>& PointwisePrefetchDefaults();
/// The work-groups per compute unit the pointwise kernel's launch spreads to (its plane form);
/// 0 leaves the work-group size to the runtime.
const DefaultsTable<int, ConvDesc>& PointwiseSpreadDefaults();
/// The depthwise kernel's rows per work-item without a tuning record: the largest divisor of the
/// output height in [least, most], else 8 (the output height when it is shorter than 8).
struct DepthwiseRowRange {
  int least = 4, most = 8;
  int RowsFor(const ConvDesc& d) const;
  std::string ToString() const;
};
/// Its rows per description, the same on every device (Convolution::DefaultDepthwiseRows).
const DefaultsTable<DepthwiseRowRange, ConvDesc>& DepthwiseRowDefaults();
/// Whether the depthwise kernel takes its byte-quad form (Convolution::depthwise_quads) where
/// that form applies (Convolution::DepthwiseQuadsApply).
const DefaultsTable<bool, ConvDesc>& DepthwiseQuadDefaults();
/// Whether im2col + GEMM is a description's default forward where it applies (true) or the
/// next family runs (false).
const DefaultsTable<bool, ConvDesc>& ConvGemmDefaults();

/// The Winograd family's configuration per description without a tuning record or override;
/// nothing: off (the direct kernel).
const DefaultsTable<WinogradChoice, ConvDesc>& WinogradDefaults();

/// A family's configuration for one description, and where it came from.
struct ConvFamilyChoice {
  bool off = false;  ///< "family:off" from the override, the record or the defaults: next family
  ConfigSource source = ConfigSource::kDefault;
  ConvConfig direct;                ///< kDirect
  int rows = 0;                     ///< kDepthwise: output rows per work-item
  Convolution::PointwiseTile tile;  ///< kPointwise
  WinogradConfig wino;              ///< kWinograd
};

struct ConvForwardFamily {
  ConvFamily family;
  const char* name;  ///< "conv_dw", "conv_pw", "conv_gemm", "conv_wino", "conv"
  /// Whether the family's kernels compute `desc` with `quant` on a device of `profile` (a
  /// setting that turns the family off counts as not applying).
  bool (*applies)(const ConvDesc& desc, const ConvQuant& quant, const TargetProfile& profile);
  /// MPCAFFE_KERNEL_CONFIG's entry, else the tuning table's record, else the defaults table.
  ConvFamilyChoice (*choose)(const Device& device, const ConvDesc& desc);
};

/// The families in the order a convolution tries them: depthwise, pointwise, im2col + GEMM,
/// Winograd, direct (which applies everywhere).
const std::vector<ConvForwardFamily>& ConvForwardFamilies();
const ConvForwardFamily& ConvForwardFamilyOf(ConvFamily family);

/// What a convolution runs: the first family that applies and whose choice is not off, with
/// that choice, and the direct kernel's configuration (which every Convolution holds; looked
/// up first, so `mpcaffe tune --model` records every description).
struct ConvPlan {
  const ConvForwardFamily* family = nullptr;
  ConvFamilyChoice choice;
  Chosen<ConvConfig> direct;
};
/// The plan for `desc` on `device`; `skip` is left out of the families tried (the tuner times
/// the pointwise kernel against the plan without it).
ConvPlan PlanConvolution(const Device& device, const ConvDesc& desc, const ConvQuant& quant,
                         std::optional<ConvFamily> skip = std::nullopt);

}  // namespace mpcaffe::libdnn
