// libdnn/kernel_families.h — the registry of libdnn's kernel families: per family the name its
// programs are written under (KernelWriter's family), the names its kernel choices carry in
// tuning records, MPCAFFE_KERNEL_CONFIG and `mpcaffe time --explain` (KernelChoice), and sample
// program texts for a target (every data type and distinct code path, in the default
// configurations). The tests' NVRTC and Oclgrind sweeps walk this list (tests/testing/
// kernel_families.h); the convolution's rules of application and defaults tables are its forward
// families' rows (libdnn/conv_families.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"

namespace mpcaffe::libdnn {

/// One program text of a family: `kernel` names one of its kernels.
struct KernelSample {
  std::string kernel;
  std::string source;
};

/// A name a family's kernel choices carry; `configurable`: it has a configuration text
/// (ConfigSchema) that records and MPCAFFE_KERNEL_CONFIG give as "name:config".
struct KernelChoiceName {
  const char* name;
  bool configurable = false;
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
/// im2col + GEMM), the backward kernels, pooling (max with its vector form, average,
/// stochastic), LRN.
const std::vector<KernelFamilyEntry>& KernelFamilyRegistry();

}  // namespace mpcaffe::libdnn
