// tests/testing/kernel_families.h — the kernel-family registry: for every family of generated
// programs (KernelWriter's `family`, e.g. "gemm", "conv_forward", "relu"), an enumerator of
// representative program texts for a target — every data type the family has, and its
// configurations' distinct code paths. tests/cuda compiles every enumerated CUDA text with NVRTC;
// every test suite fails at its end when a program it generated names a family missing here
// (a family whose name starts with "test_" is a test's own kernel, exempt), and
// tests/cuda/kernel_families_test.cc fails when the library source constructs a KernelWriter
// of an unregistered family. Registering a family is one entry in kernel_families.cc.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "libdnn/kernel_families.h"

namespace mpcaffe::testing_families {

/// One program text of a family: `kernel` names one of its kernels.
using Sample = libdnn::KernelSample;

struct KernelFamily {
  const char* name;
  std::function<std::vector<Sample>(const KernelTarget&)> samples;
};

/// The registry, in registration order.
const std::vector<KernelFamily>& KernelFamilies();
/// The registered family `name`, or nullptr.
const KernelFamily* FindKernelFamily(const std::string& name);
/// Whether `name` is a test's own family ("test_…"), which needs no registration.
bool IsTestFamily(const std::string& name);
/// The names of `families` that are neither registered nor a test's own, in order (what the
/// end-of-suite check reports for KernelWriter::GeneratedFamilies()).
std::vector<std::string> UnregisteredFamilies(const std::vector<std::string>& families);

}  // namespace mpcaffe::testing_families
