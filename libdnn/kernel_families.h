// libdnn/kernel_families.h — the registry of libdnn's kernel families: per family the name its
// programs are written under (KernelWriter's family), the names its kernel choices carry in
// tuning records, MPCAFFE_KERNEL_CONFIG and `mpcaffe time --explain` (KernelChoice), and sample
// program texts for a target (every data type and distinct code path, in the default
// configurations), and per configurable choice its schema (the text form, the tuner's
// candidates) and per choice its defaults tables' rows. The tests' NVRTC and Oclgrind sweeps, the
// schema and defaults checks, ConfigurableFamilies (MPCAFFE_KERNEL_CONFIG) and
// `mpcaffe_defaults` walk this list; the rules of application are the families' rows
// (conv_families.h, GemmForwardFamily, PoolForwardFamilies, LrnForwardFamilies).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"  // DeviceInfo

namespace mpcaffe::libdnn {

/// One program text of a family: `kernel` names one of its kernels.
struct KernelSample {
  std::string kernel;
  std::string source;
};

/// One row of a choice's defaults table, printed: what the table chooses ("configuration",
/// "launch", …), the row's device and problem class, its value and the measurement behind it.
/// `is_config`: the value is the choice's configuration text (ChoiceSchema).
struct ChoiceDefaultsRow {
  std::string what;
  std::string device_class;
  std::string config;
  std::string provenance;
  bool is_config = false;
};

/// A configuration the tuner times for one problem, printed, and whether it satisfies the
/// family's constraints for that problem (GemmConfig::Supports, ConvConfig::Validate, …).
struct ChoiceCandidate {
  std::string config;
  std::string problem;
  bool satisfies = false;
};

/// A configurable choice's schema (ConfigSchema) reached through its text form: the text that
/// records and MPCAFFE_KERNEL_CONFIG give as "name:config".
struct ChoiceSchema {
  /// The schema's keys, e.g. "tm, tn, vw, …".
  std::string (*keys)();
  /// `text` parsed and checked by the schema and printed back; nothing, with `why`, when it is
  /// malformed or out of range.
  std::optional<std::string> (*round_trip)(const std::string& text, std::string* why);
  /// The configurations the tuner times on `device` for the registry's sample problems (the
  /// family's default first per problem); none where the choice is not tuned.
  std::vector<ChoiceCandidate> (*candidates)(const DeviceInfo& device);
};

/// A name a family's kernel choices carry, with its schema where it is configurable and its
/// defaults tables' rows where it has any (the rule of DefaultDepthwiseRows is code, no table).
struct KernelChoiceName {
  const char* name;
  const ChoiceSchema* schema = nullptr;
  std::vector<ChoiceDefaultsRow> (*defaults)() = nullptr;
  bool configurable() const { return schema != nullptr; }
};

/// A sample per data type of `types`: kernel `name(t)` of program `source(target, t)`.
template <typename Name, typename Source>
std::vector<KernelSample> PerTypeSamples(const std::vector<DataType>& types,
                                         const KernelTarget& target, Name name, Source source) {
  std::vector<KernelSample> samples;
  for (DataType t : types) samples.push_back({name(t), source(target, t)});
  return samples;
}
/// Every data type, and the float ones.
const std::vector<DataType>& AllTypes();
const std::vector<DataType>& FloatTypes();

struct KernelFamilyEntry {
  const char* name;                       ///< KernelWriter's family: "gemm", "conv_forward", …
  std::vector<KernelChoiceName> choices;  ///< "conv" for conv_forward; none for helper kernels
  std::function<std::vector<KernelSample>(const KernelTarget&)> samples;
};

/// Every libdnn family, in registration order: GEMM (and its 4-bit weight forms), the
/// convolution's forward families (direct, depthwise, pointwise and its row form, im2col for
/// im2col + GEMM), the Im2col layer's requantizing im2col, the backward kernels, pooling (max with
/// its vector form, average, stochastic), LRN.
const std::vector<KernelFamilyEntry>& KernelFamilyRegistry();

}  // namespace mpcaffe::libdnn
