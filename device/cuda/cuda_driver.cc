// device/cuda/cuda_driver.cc — the CUDA driver API loaded with dlopen (no NVIDIA driver needed to
// build or start), its error names, and the enumeration that registers the CUDA devices.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "device/backends.h"
#include "device/cuda/cuda_objects.h"
#include "device/cuda/driver_api.h"
#include "device/cuda/nvrtc.h"

namespace mpcaffe {
namespace cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

// Looks up the first of `names` that libcuda exports. Versioned names come first: the plain
// names are kept by the driver for binaries built against old headers and may have older
// semantics (cuMemAlloc is the 32-bit-size original of cuMemAlloc_v2).
template <typename F>
bool Resolve(void* library, F* slot, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* symbol = dlsym(library, name)) {
      *slot = reinterpret_cast<F>(symbol);
      return true;
    }
  }
  return false;
}

struct LoadedDriver {
  DriverApi api;
  std::string problem;  // empty when loaded
};

LoadedDriver Load() {
  LoadedDriver d;
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    d.problem = std::string(kDriverLibrary) + " not found (no NVIDIA driver)";
    return d;
  }
  // The library stays open for the life of the process: devices, modules and streams live
  // in the global device list until exit.
  DriverApi& a = d.api;
  struct Entry {
    bool found;
    const char* name;
  };
  const Entry required[] = {
      {Resolve(library, &a.init, {"cuInit"}), "cuInit"},
      {Resolve(library, &a.driver_get_version, {"cuDriverGetVersion"}), "cuDriverGetVersion"},
      {Resolve(library, &a.get_error_name, {"cuGetErrorName"}), "cuGetErrorName"},
      {Resolve(library, &a.device_get_count, {"cuDeviceGetCount"}), "cuDeviceGetCount"},
      {Resolve(library, &a.device_get, {"cuDeviceGet"}), "cuDeviceGet"},
      {Resolve(library, &a.device_get_name, {"cuDeviceGetName"}), "cuDeviceGetName"},
      {Resolve(library, &a.device_total_mem, {"cuDeviceTotalMem_v2"}), "cuDeviceTotalMem_v2"},
      {Resolve(library, &a.device_get_attribute, {"cuDeviceGetAttribute"}), "cuDeviceGetAttribute"},
      {Resolve(library, &a.primary_ctx_retain, {"cuDevicePrimaryCtxRetain"}),
       "cuDevicePrimaryCtxRetain"},
      {Resolve(library, &a.primary_ctx_release,
               {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}),
       "cuDevicePrimaryCtxRelease"},
      {Resolve(library, &a.ctx_push_current, {"cuCtxPushCurrent_v2"}), "cuCtxPushCurrent_v2"},
      {Resolve(library, &a.ctx_pop_current, {"cuCtxPopCurrent_v2"}), "cuCtxPopCurrent_v2"},
      {Resolve(library, &a.mem_alloc, {"cuMemAlloc_v2"}), "cuMemAlloc_v2"},
      {Resolve(library, &a.mem_free, {"cuMemFree_v2"}), "cuMemFree_v2"},
      {Resolve(library, &a.memcpy_htod_async, {"cuMemcpyHtoDAsync_v2"}), "cuMemcpyHtoDAsync_v2"},
      {Resolve(library, &a.memcpy_dtoh_async, {"cuMemcpyDtoHAsync_v2"}), "cuMemcpyDtoHAsync_v2"},
      {Resolve(library, &a.memcpy_dtod_async, {"cuMemcpyDtoDAsync_v2"}), "cuMemcpyDtoDAsync_v2"},
      {Resolve(library, &a.memset_d8_async, {"cuMemsetD8Async"}), "cuMemsetD8Async"},
      {Resolve(library, &a.module_load_data, {"cuModuleLoadData"}), "cuModuleLoadData"},
      {Resolve(library, &a.module_unload, {"cuModuleUnload"}), "cuModuleUnload"},
      {Resolve(library, &a.module_get_function, {"cuModuleGetFunction"}), "cuModuleGetFunction"},
      {Resolve(library, &a.func_get_attribute, {"cuFuncGetAttribute"}), "cuFuncGetAttribute"},
      {Resolve(library, &a.func_set_attribute, {"cuFuncSetAttribute"}), "cuFuncSetAttribute"},
      {Resolve(library, &a.launch_kernel, {"cuLaunchKernel"}), "cuLaunchKernel"},
      {Resolve(library, &a.stream_create, {"cuStreamCreate"}), "cuStreamCreate"},
      {Resolve(library, &a.stream_destroy, {"cuStreamDestroy_v2"}), "cuStreamDestroy_v2"},
      {Resolve(library, &a.stream_synchronize, {"cuStreamSynchronize"}), "cuStreamSynchronize"},
      {Resolve(library, &a.event_create, {"cuEventCreate"}), "cuEventCreate"},
      {Resolve(library, &a.event_destroy, {"cuEventDestroy_v2"}), "cuEventDestroy_v2"},
      {Resolve(library, &a.event_record, {"cuEventRecord"}), "cuEventRecord"},
      {Resolve(library, &a.event_synchronize, {"cuEventSynchronize"}), "cuEventSynchronize"},
      // _v2 (CUDA 12.8+) and the original have the same signature; older drivers have only
      // the original.
      {Resolve(library, &a.event_elapsed_time, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}),
       "cuEventElapsedTime"},
  };
  for (const Entry& e : required) {
    if (!e.found) {
      d.problem = std::string(kDriverLibrary) + " lacks " + e.name + " (driver too old)";
      return d;
    }
  }
  Resolve(library, &a.func_get_param_info, {"cuFuncGetParamInfo"});
  return d;
}

}  // namespace

std::string CudaVersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string NvidiaDriverRelease() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::istringstream words(line);
  for (std::string w; words >> w;) {
    if (w.find('.') != std::string::npos &&
        std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(c) || c == '.'; }))
      return w;
  }
  return "";
}

const DriverApi* LoadDriver(std::string* problem) {
  static const LoadedDriver* driver = new LoadedDriver(Load());  // lives until exit, like libcuda
  if (!driver->problem.empty()) {
    if (problem) *problem = driver->problem;
    return nullptr;
  }
  return &driver->api;
}

std::string ErrorName(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  if (api.get_error_name && api.get_error_name(result, &name) == CUDA_SUCCESS && name) return name;
  // cuGetErrorName itself fails in the toolkit's stub libcuda; name the errors that explain
  // why a machine has no usable driver.
  const std::string number = " (CUresult " + std::to_string(static_cast<int>(result)) + ")";
  switch (result) {
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY" + number +
             ": libcuda.so.1 is the toolkit's stub, not an NVIDIA driver";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE" + number;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" + number;
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED" + number;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY" + number;
    default:
      return "CUresult " + std::to_string(static_cast<int>(result));
  }
}

}  // namespace cuda

std::string EnumerateCuda() {
  std::string problem;
  const cuda::DriverApi* api = cuda::LoadDriver(&problem);
  if (!api) return "cuda: " + problem + ": no CUDA devices";
  CUresult r = api->init(0);
  if (r != CUDA_SUCCESS) return "cuda: cuInit: " + cuda::ErrorName(*api, r) + ": no CUDA devices";
  int count = 0;
  r = api->device_get_count(&count);
  if (r != CUDA_SUCCESS)
    return "cuda: cuDeviceGetCount: " + cuda::ErrorName(*api, r) + ": no CUDA devices";
  int version = 0;
  std::string driver = api->driver_get_version(&version) == CUDA_SUCCESS
                           ? "driver CUDA " + cuda::CudaVersionString(version)
                           : "driver version unknown";
  int registered = 0;
  std::string skipped;
  for (int i = 0; i < count; ++i) {
    try {
      RegisterDevice(cuda::CreateCudaDevice(*api, i));
      ++registered;
    } catch (const Error& e) {
      skipped += "; device " + std::to_string(i) + " skipped: " + e.what();
    }
  }
  return "cuda: " + std::to_string(registered) + (registered == 1 ? " device" : " devices") + " (" +
         driver + ", NVRTC " + cuda::NvrtcVersion() + ")" + skipped;
}

}  // namespace mpcaffe
