// device/host_isa.cc — the CPU's instruction-set level and MPCAFFE_ISA (see host_isa.h).
#include "device/host_isa.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "device/error.h"
#include "device/settings.h"

namespace mpcaffe {

namespace {

constexpr HostIsa kLevels[] = {HostIsa::kGeneric, HostIsa::kAvx2, HostIsa::kAvx512};

HostIsa DetectCpu() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return HostIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return HostIsa::kAvx2;
#endif
  return HostIsa::kGeneric;
}

}  // namespace

const char* Name(HostIsa isa) {
  switch (isa) {
    case HostIsa::kGeneric:
      return "generic";
    case HostIsa::kAvx2:
      return "avx2";
    case HostIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<HostIsa> AllHostIsas() { return {std::begin(kLevels), std::end(kLevels)}; }

HostIsa CpuHostIsa() {
  static const HostIsa cpu = DetectCpu();
  return cpu;
}

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool vnni = CpuHostIsa() == HostIsa::kAvx512 && __builtin_cpu_supports("avx512vnni");
  return vnni;
#else
  return false;
#endif
}

bool CpuIsAmd() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool amd = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    return std::string(vendor) == "AuthenticAMD";
  }();
  return amd;
#else
  return false;
#endif
}

bool HostAmxTilesUsable() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1u, int8 = (d >> 25) & 1u;
    if (!tile || !int8) return false;
    // ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): without it the first tile
    // instruction faults (SIGILL); a kernel too old to know the request refuses it.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

std::string HostIsaUnavailable(HostIsa isa) {
  if (isa <= CpuHostIsa()) return "";
#if !(defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))
  return std::string("the ") + Name(isa) + " paths are built for x86-64 (GCC or Clang) only";
#else
  if (isa == HostIsa::kAvx2) return "this CPU has no AVX2";
  return "this CPU has no AVX-512 (F, BW, VL, DQ)";
#endif
}

HostIsa ActiveHostIsa() {
  const std::string& value = GetSettings().isa;
  if (value.empty()) return CpuHostIsa();
  for (HostIsa isa : kLevels) {
    if (value != Name(isa)) continue;
    if (isa <= CpuHostIsa()) return isa;
    // A cap rather than an error: one job script (or one environment) serves every machine of
    // a cluster, and a level the CPU lacks would otherwise stop the run on the older ones.
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::fprintf(stderr, "mpcaffe: warning: MPCAFFE_ISA=%s: %s; using %s\n", value.c_str(),
                   HostIsaUnavailable(isa).c_str(), Name(CpuHostIsa()));
    return CpuHostIsa();
  }
  throw Error("MPCAFFE_ISA=" + value + ": expected generic, avx2 or avx512");
}

}  // namespace mpcaffe
