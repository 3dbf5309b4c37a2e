// device/cuda/nvrtc.h — compiles CUDA C kernel text with NVRTC to PTX or cubin; needs no GPU
// and no driver, so every generated kernel can be compile-checked on any machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpcaffe::cuda {

/// The result of one NVRTC compilation.
struct NvrtcOutput {
  std::string arch;                  // the target compiled for: "compute_75" or "sm_80"
  std::string ptx;                   // PTX text, for a virtual ("compute_XY") target
  std::string cubin;                 // ELF image, for a real ("sm_XY") target
  std::string log;                   // NVRTC's log (warnings; empty when clean)
  std::vector<std::string> options;  // every option given to NVRTC, in order
  double seconds = 0;                // wall time of nvrtcCompileProgram plus fetching output

  /// The image to hand to cuModuleLoadData: the cubin when there is one, else the PTX.
  const std::string& image() const { return cubin.empty() ? ptx : cubin; }
};

/// Compiles `source` with NVRTC for `arch`: "compute_XY" gives PTX, "sm_XY" gives a cubin.
/// The CUDA include directory is passed with -I so kernels may `#include <cuda_fp16.h>`.
/// `extra_options` go to NVRTC after the defaults (e.g. "-DTILE=16"); `program_name` names the
/// source in the log ("<program_name>(12): error: ..."). `device` describes what the code is
/// for in error messages; empty means "NVRTC <version> <arch>". Throws DeviceError for an
/// architecture this NVRTC does not support and BuildError (log, options and numbered source
/// lines) when the source does not compile. Thread-safe.
NvrtcOutput CompileCuda(const std::string& source, const std::string& arch,
                        const std::vector<std::string>& extra_options = {},
                        const std::string& program_name = "mpcaffe_kernel.cu",
                        const std::string& device = "");

/// The compute capabilities this NVRTC can target, e.g. {75, 80, 86, ..., 120}, ascending.
std::vector<int> SupportedArchs();

/// The oldest virtual architecture this NVRTC can emit PTX for ("compute_75" with CUDA 13).
/// Older toolkits reach compute_50/compute_70; CUDA 13 dropped everything below Turing, so a
/// request for compute_70 PTX can only be honoured as compute_75 here. Callers that want
/// "the most portable PTX" should use this rather than hard-code an architecture.
std::string OldestPtxArch();

/// The target to compile for a device of compute capability `major`.`minor`: "sm_XY" when
/// NVRTC supports it; else PTX of the newest supported virtual architecture not above it
/// (the driver JIT-compiles that for the newer device). Throws DeviceError when the device
/// is older than every architecture NVRTC supports.
std::string TargetForDevice(int major, int minor);

/// "13.0".
std::string NvrtcVersion();

/// The directory passed to NVRTC with -I (holds cuda_fp16.h), or empty when none was found.
/// Searched in order: $MPCAFFE_CUDA_INCLUDE, the toolkit include directory recorded at build
/// time (MPCAFFE_CUDA_INCLUDE_DIR), the include directory next to the loaded libnvrtc,
/// /usr/local/cuda/include.
const std::string& CudaIncludeDir();

/// Process-wide NVRTC counters (successful and failed compilations and their wall time).
struct NvrtcStats {
  uint64_t compiles = 0;
  uint64_t failures = 0;
  double seconds = 0;
};
NvrtcStats GetNvrtcStats();

/// Splits a build-option string into NVRTC options at whitespace; double quotes group.
std::vector<std::string> SplitOptions(const std::string& options);

}  // namespace mpcaffe::cuda
