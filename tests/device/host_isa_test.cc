// tests/device/host_isa_test.cc — MPCAFFE_ISA: each level the CPU has is taken as written, a
// higher one is capped at the CPU's level, and a value that names no level is an error.
#include "device/host_isa.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "device/error.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

TEST(HostIsa, UnsetIsTheCpuLevel) {
  ScopedSettings env([](Settings& s) { s.isa = ""; });
  EXPECT_EQ(ActiveHostIsa(), CpuHostIsa());
  EXPECT_EQ(HostIsaUnavailable(CpuHostIsa()), "");
  std::printf("note: this CPU runs the host paths up to %s\n", Name(CpuHostIsa()));
}

TEST(HostIsa, EveryLevelUpToTheCpuIsTakenAsWritten) {
  for (HostIsa isa : AllHostIsas()) {
    if (isa > CpuHostIsa()) continue;
    ScopedSettings env([&](Settings& s) { s.isa = Name(isa); });
    EXPECT_EQ(ActiveHostIsa(), isa) << Name(isa);
  }
  EXPECT_EQ(AllHostIsas().front(), HostIsa::kGeneric);  // every CPU runs at least this one
}

TEST(HostIsa, LevelsAboveTheCpuAreCapped) {
  if (CpuHostIsa() == AllHostIsas().back())
    GTEST_SKIP() << "this CPU has every level (" << Name(CpuHostIsa()) << "): nothing to cap";
  for (HostIsa isa : AllHostIsas()) {
    if (isa <= CpuHostIsa()) continue;
    EXPECT_NE(HostIsaUnavailable(isa), "") << Name(isa);
    ScopedSettings env([&](Settings& s) { s.isa = Name(isa); });
    EXPECT_EQ(ActiveHostIsa(), CpuHostIsa()) << Name(isa);
  }
}

TEST(HostIsa, UnknownValueIsAnErrorNamingTheChoices) {
  ScopedSettings env([](Settings& s) { s.isa = "avx10"; });
  try {
    ActiveHostIsa();
    FAIL() << "MPCAFFE_ISA=avx10 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "MPCAFFE_ISA=avx10: expected generic, avx2 or avx512");
  }
}

}  // namespace
}  // namespace mpcaffe
