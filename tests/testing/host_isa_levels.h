// tests/testing/host_isa_levels.h — tests of a host path chosen by CPU level run once per level
// (TEST_P over HostIsaLevels()): the levels this CPU has run with MPCAFFE_ISA set to them, the
// others are skipped with the reason, so no level passes unseen or by running another's code.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "device/host_isa.h"
#include "device/settings.h"

namespace mpcaffe::test_support {

/// Every host ISA level, for INSTANTIATE_TEST_SUITE_P.
inline std::vector<HostIsa> HostIsaLevels() { return AllHostIsas(); }

/// The test name suffix of a level ("generic", "avx2", "avx512").
inline std::string HostIsaParamName(const testing::TestParamInfo<HostIsa>& info) {
  return Name(info.param);
}

/// MPCAFFE_ISA set to `isa` while it lives.
class ScopedHostIsa {
 public:
  explicit ScopedHostIsa(HostIsa isa) { settings_->isa = Name(isa); }

 private:
  ScopedSettings settings_;
};

}  // namespace mpcaffe::test_support

/// In a test over HostIsaLevels(): skips a level this CPU lacks, with the reason, and otherwise
/// sets MPCAFFE_ISA to it for the rest of the test and checks that it took effect.
#define MPCAFFE_RUN_AT_HOST_ISA(isa)                                                \
  if (const std::string why_ = ::mpcaffe::HostIsaUnavailable(isa); !why_.empty())   \
    GTEST_SKIP() << "MPCAFFE_ISA=" << ::mpcaffe::Name(isa) << " not run: " << why_; \
  ::mpcaffe::test_support::ScopedHostIsa scoped_isa_(isa);                          \
  ASSERT_EQ(::mpcaffe::ActiveHostIsa(), isa)

/// In a test of the kernel text's portable helper forms on `dev` (KernelTarget::helper_forms
/// kPortable, the form of every compiler that targets no x86): skips where nothing is to force
/// (CUDA's text has no x86 branches; on a CPU without AVX2 the compilers take them already),
/// otherwise sets MPCAFFE_ISA=generic for the rest of the test and checks the target took it.
#define MPCAFFE_RUN_IN_PORTABLE_FORMS(dev)                                                     \
  if ((dev).backend() != ::mpcaffe::Backend::kOpenCL)                                          \
    GTEST_SKIP() << "the x86 branches are OpenCL text";                                        \
  if (::mpcaffe::CpuHostIsa() == ::mpcaffe::HostIsa::kGeneric)                                 \
    GTEST_SKIP() << "this CPU has no AVX2: its OpenCL compilers take the portable forms already"; \
  ::mpcaffe::test_support::ScopedHostIsa portable_forms_(::mpcaffe::HostIsa::kGeneric);        \
  ASSERT_EQ(::mpcaffe::KernelTarget::Of(dev).helper_forms,                                     \
            ::mpcaffe::KernelTarget::HelperForms::kPortable)
