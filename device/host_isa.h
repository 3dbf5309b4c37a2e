// device/host_isa.h — the instruction-set level of the host code paths chosen at run time (the
// quantize and dequantize loops, the random fillers): what this CPU has, and the level in use,
// which MPCAFFE_ISA lowers (to test or to compare the paths on one machine) but never raises
// above what the CPU has.
#pragma once

#include <string>
#include <vector>

namespace mpcaffe {

/// Host instruction-set levels, each including the ones before it.
enum class HostIsa {
  kGeneric,  ///< the baseline of the build (x86-64: SSE2), and every non-x86 CPU
  kAvx2,     ///< AVX2
  kAvx512,   ///< AVX-512 F, BW, VL and DQ (every AVX-512 CPU since Skylake-SP has all four)
};

/// "generic", "avx2" or "avx512" (MPCAFFE_ISA's spelling).
const char* Name(HostIsa isa);

/// Every level, lowest first.
std::vector<HostIsa> AllHostIsas();

/// The highest level this CPU (and this build's compiler) can run.
HostIsa CpuHostIsa();

/// Whether this CPU has AVX-512 VNNI (vpdpbusd: four unsigned × signed byte products summed per
/// 32-bit lane). Not a level of its own: only the OpenCL kernels that ask for it in a helper
/// function use it (DeviceInfo::byte_quad_products_in_helper), and only while MPCAFFE_ISA leaves
/// the AVX-512 level on (ByteQuadsInHelper, codegen/target_profile.h).
bool CpuHasAvx512Vnni();

/// Whether this CPU is AMD's (CPUID vendor "AuthenticAMD"): Intel's CPU runtime compiles for it
/// as well as PoCL does at AVX2 (DeviceInfo::net_passes_slow_at_avx2); its fp32 passes at AVX-512
/// keep PoCL ahead there (DeviceInfo::fp32_passes_slow_at_avx512).
bool CpuIsAmd();

/// Whether this CPU has AMX's tile registers and byte tile products (AMX-TILE and AMX-INT8,
/// CPUID leaf 7) and this process may use them: Linux grants the tile data state only on request
/// (arch_prctl ARCH_REQ_XCOMP_PERM), which the first call makes for the whole process. Like VNNI,
/// only OpenCL kernels that ask for it in a helper function use it
/// (DeviceInfo::byte_tile_products_in_helper).
bool HostAmxTilesUsable();

/// "" when this CPU runs `isa`, else why not (e.g. "this CPU has no AVX-512 (F, BW, VL, DQ)").
std::string HostIsaUnavailable(HostIsa isa);

/// The level the host paths use: MPCAFFE_ISA when set, capped at CpuHostIsa() (a level the CPU
/// lacks prints a warning once per process and runs the highest it has), else CpuHostIsa().
/// Throws mpcaffe::Error on a value that names no level. Read at each call, so a ScopedSettings
/// changes it.
HostIsa ActiveHostIsa();

}  // namespace mpcaffe
