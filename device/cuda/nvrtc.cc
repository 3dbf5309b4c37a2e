// device/cuda/nvrtc.cc — NVRTC compilation of CUDA kernel text to PTX or cubin, with the
// include path for cuda_fp16.h, architecture checks and process-wide compile counters.
#include "device/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "device/device.h"
#include "device/error.h"
#include "device/settings.h"

namespace mpcaffe::cuda {
namespace {

std::atomic<uint64_t> g_compiles{0};
std::atomic<uint64_t> g_failures{0};
std::atomic<uint64_t> g_nanoseconds{0};

std::string Check(nvrtcResult result, const char* call) {
  return std::string(call) + ": " + nvrtcGetErrorString(result);
}

void ThrowIfFailed(nvrtcResult result, const char* call) {
  if (result != NVRTC_SUCCESS) throw DeviceError(Check(result, call));
}

bool HasFp16Header(const std::string& dir) {
  struct stat st;
  return !dir.empty() && stat((dir + "/cuda_fp16.h").c_str(), &st) == 0;
}

std::string FindIncludeDir() {
  std::vector<std::string> candidates;
  if (const std::string& env = GetSettings().cuda_include; !env.empty()) candidates.push_back(env);
#ifdef MPCAFFE_CUDA_INCLUDE_DIR
  // CMake may hand over a ;-separated list (CUDAToolkit_INCLUDE_DIRS).
  std::stringstream recorded(MPCAFFE_CUDA_INCLUDE_DIR);
  for (std::string dir; std::getline(recorded, dir, ';');) candidates.push_back(dir);
#endif
  // The headers that ship with the libnvrtc actually loaded match its version best.
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&nvrtcCompileProgram), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    std::string lib_dir = lib.substr(0, lib.find_last_of('/'));
    for (const char* rel : {"/../include", "/../../include", "/../targets/x86_64-linux/include"})
      candidates.push_back(lib_dir + rel);
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const std::string& dir : candidates)
    if (HasFp16Header(dir)) return dir;
  return "";
}

struct ArchSpec {
  bool is_virtual = false;
  int number = 0;  // 75 for compute_75, 90 for sm_90a
};

// Parses "compute_XY" / "sm_XY" (with an optional feature suffix such as "sm_90a").
bool ParseArch(const std::string& arch, ArchSpec* spec) {
  std::string digits;
  if (arch.rfind("compute_", 0) == 0) {
    spec->is_virtual = true;
    digits = arch.substr(8);
  } else if (arch.rfind("sm_", 0) == 0) {
    spec->is_virtual = false;
    digits = arch.substr(3);
  } else {
    return false;
  }
  size_t n = 0;
  while (n < digits.size() && std::isdigit(static_cast<unsigned char>(digits[n]))) ++n;
  if (n == 0 || n + 1 < digits.size()) return false;
  if (n < digits.size() && digits[n] != 'a' && digits[n] != 'f') return false;
  spec->number = std::stoi(digits.substr(0, n));
  return true;
}

std::string JoinOptions(const std::vector<std::string>& options) {
  std::string joined;
  for (const std::string& o : options) joined += (joined.empty() ? "" : " ") + o;
  return joined;
}

std::string ArchList() {
  std::string list;
  for (int a : SupportedArchs()) list += (list.empty() ? "" : " ") + std::to_string(a);
  return list;
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};

}  // namespace

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  ThrowIfFailed(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> SupportedArchs() {
  static const std::vector<int> archs = [] {
    int count = 0;
    ThrowIfFailed(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
    std::vector<int> list(count);
    if (count > 0) ThrowIfFailed(nvrtcGetSupportedArchs(list.data()), "nvrtcGetSupportedArchs");
    std::sort(list.begin(), list.end());
    return list;
  }();
  return archs;
}

std::string OldestPtxArch() {
  // nvrtcGetSupportedArchs lists the compute capabilities NVRTC accepts for both virtual and
  // real targets. CUDA 13 starts at 75 (Turing): compute_70, which the project's plan names as
  // the portable PTX target, is rejected ("invalid value for --gpu-architecture"). We do not
  // pretend otherwise: the oldest PTX we can produce is the first entry here, and the tests
  // report which one it was.
  std::vector<int> archs = SupportedArchs();
  if (archs.empty()) throw DeviceError("nvrtcGetSupportedArchs: NVRTC reports no architectures");
  return "compute_" + std::to_string(archs.front());
}

std::string TargetForDevice(int major, int minor) {
  int cc = major * 10 + minor;
  std::vector<int> archs = SupportedArchs();
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) return "sm_" + std::to_string(cc);
  int best = 0;
  for (int a : archs)
    if (a <= cc) best = std::max(best, a);
  if (best == 0) {
    throw DeviceError("NVRTC " + NvrtcVersion() + " cannot generate code for sm_" +
                      std::to_string(cc) + " (supported: " + ArchList() +
                      "); use a CUDA toolkit that still supports this GPU");
  }
  return "compute_" + std::to_string(best);
}

const std::string& CudaIncludeDir() {
  static const std::string dir = FindIncludeDir();
  return dir;
}

std::vector<std::string> SplitOptions(const std::string& options) {
  std::vector<std::string> out;
  std::string current;
  bool quoted = false, have = false;
  for (char c : options) {
    if (c == '"') {
      quoted = !quoted;
      have = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (have) out.push_back(current);
      current.clear();
      have = false;
    } else {
      current += c;
      have = true;
    }
  }
  if (have) out.push_back(current);
  return out;
}

NvrtcOutput CompileCuda(const std::string& source, const std::string& arch,
                        const std::vector<std::string>& extra_options,
                        const std::string& program_name, const std::string& device) {
  ArchSpec spec;
  if (!ParseArch(arch, &spec)) {
    throw DeviceError("CompileCuda: '" + arch +
                      "' is not a CUDA architecture (expected compute_XY or sm_XY)");
  }
  std::vector<int> archs = SupportedArchs();
  if (std::find(archs.begin(), archs.end(), spec.number) == archs.end()) {
    throw DeviceError("CompileCuda: NVRTC " + NvrtcVersion() + " does not support " + arch +
                      " (supported compute capabilities: " + ArchList() +
                      "; oldest PTX target: " + OldestPtxArch() + ")");
  }

  NvrtcOutput out;
  out.arch = arch;
  out.options.push_back("--gpu-architecture=" + arch);
  const std::string& include_dir = CudaIncludeDir();
  if (!include_dir.empty()) out.options.push_back("-I" + include_dir);
  out.options.insert(out.options.end(), extra_options.begin(), extra_options.end());
  const std::string what_device =
      device.empty() ? "NVRTC " + NvrtcVersion() + " " + arch + " (no device)" : device;

  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  ThrowIfFailed(
      nvrtcCreateProgram(program.get(), source.c_str(), program_name.c_str(), 0, nullptr, nullptr),
      "nvrtcCreateProgram");
  std::vector<const char*> argv;
  for (const std::string& o : out.options) argv.push_back(o.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(*program, static_cast<int>(argv.size()), argv.data());

  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(*program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    if (nvrtcGetProgramLog(*program, &out.log[0]) != NVRTC_SUCCESS) out.log.clear();
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
      out.log.pop_back();
  }

  if (compiled == NVRTC_SUCCESS) {
    size_t size = 0;
    if (spec.is_virtual) {
      ThrowIfFailed(nvrtcGetPTXSize(*program, &size), "nvrtcGetPTXSize");
      out.ptx.resize(size);
      ThrowIfFailed(nvrtcGetPTX(*program, &out.ptx[0]), "nvrtcGetPTX");
      while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    } else {
      ThrowIfFailed(nvrtcGetCUBINSize(*program, &size), "nvrtcGetCUBINSize");
      out.cubin.resize(size);
      ThrowIfFailed(nvrtcGetCUBIN(*program, &out.cubin[0]), "nvrtcGetCUBIN");
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g_nanoseconds += static_cast<uint64_t>(out.seconds * 1e9);
  // A device's programs are logged by Device::BuildProgram; these are compile-only checks.
  if (device.empty())
    LogProgramEvent(compiled == NVRTC_SUCCESS ? "compile" : "fail", "cuda", arch, source,
                    JoinOptions(out.options), out.seconds);

  if (compiled != NVRTC_SUCCESS) {
    ++g_failures;
    std::string log = out.log;
    if (include_dir.empty() && log.find("cuda_fp16.h") != std::string::npos) {
      log +=
          "\n(no CUDA include directory holding cuda_fp16.h was found; set "
          "MPCAFFE_CUDA_INCLUDE to the toolkit's include directory)";
    }
    std::string what = Check(compiled, "nvrtcCompileProgram") + " (" + program_name + ")";
    throw BuildError(FormatBuildFailure(what, what_device, JoinOptions(out.options), log, source),
                     log);
  }
  ++g_compiles;
  return out;
}

NvrtcStats GetNvrtcStats() {
  NvrtcStats stats;
  stats.compiles = g_compiles.load();
  stats.failures = g_failures.load();
  stats.seconds = g_nanoseconds.load() * 1e-9;
  return stats;
}

}  // namespace mpcaffe::cuda
