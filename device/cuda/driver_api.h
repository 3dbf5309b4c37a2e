// device/cuda/driver_api.h — the CUDA driver API entry points the CUDA backend calls, as a table
// of function pointers resolved from libcuda.so.1 with dlsym (private to device/cuda and tests).
#pragma once

#include <cuda.h>  // types and enums only: nothing here links against libcuda

#include <memory>
#include <string>

#include "device/device.h"

namespace mpcaffe::cuda {

/// One pointer per driver call, named after the call without its "cu" prefix and version
/// suffix (cuMemAlloc_v2 -> mem_alloc). Every entry is set except the optional ones.
struct DriverApi {
  CUresult (*init)(unsigned int flags) = nullptr;
  CUresult (*driver_get_version)(int* version) = nullptr;
  CUresult (*get_error_name)(CUresult error, const char** name) = nullptr;
  CUresult (*device_get_count)(int* count) = nullptr;
  CUresult (*device_get)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*device_get_name)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*device_total_mem)(size_t* bytes, CUdevice device) = nullptr;
  CUresult (*device_get_attribute)(int* value, CUdevice_attribute attribute,
                                   CUdevice device) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice device) = nullptr;
  CUresult (*ctx_push_current)(CUcontext context) = nullptr;
  CUresult (*ctx_pop_current)(CUcontext* context) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;
  CUresult (*mem_free)(CUdeviceptr ptr) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr dst, const void* src, size_t bytes,
                                CUstream stream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void* dst, CUdeviceptr src, size_t bytes,
                                CUstream stream) = nullptr;
  CUresult (*memcpy_dtod_async)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                CUstream stream) = nullptr;
  CUresult (*memset_d8_async)(CUdeviceptr dst, unsigned char value, size_t bytes,
                              CUstream stream) = nullptr;
  CUresult (*module_load_data)(CUmodule* module, const void* image) = nullptr;
  CUresult (*module_unload)(CUmodule module) = nullptr;
  CUresult (*module_get_function)(CUfunction* function, CUmodule module,
                                  const char* name) = nullptr;
  CUresult (*func_get_attribute)(int* value, CUfunction_attribute attribute,
                                 CUfunction function) = nullptr;
  CUresult (*func_set_attribute)(CUfunction function, CUfunction_attribute attribute,
                                 int value) = nullptr;
  CUresult (*launch_kernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                            unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                            unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                            void** params, void** extra) = nullptr;
  CUresult (*stream_create)(CUstream* stream, unsigned int flags) = nullptr;
  CUresult (*stream_destroy)(CUstream stream) = nullptr;
  CUresult (*stream_synchronize)(CUstream stream) = nullptr;
  CUresult (*event_create)(CUevent* event, unsigned int flags) = nullptr;
  CUresult (*event_destroy)(CUevent event) = nullptr;
  CUresult (*event_record)(CUevent event, CUstream stream) = nullptr;
  CUresult (*event_synchronize)(CUevent event) = nullptr;
  CUresult (*event_elapsed_time)(float* ms, CUevent start, CUevent end) = nullptr;
  // Optional (CUDA 12.4+ drivers): lets launches check argument count and sizes.
  CUresult (*func_get_param_info)(CUfunction function, size_t index, size_t* offset,
                                  size_t* size) = nullptr;
};

/// The driver table loaded once from libcuda.so.1, or null with `*problem` saying why
/// ("libcuda.so.1 not found (no NVIDIA driver)", "libcuda.so.1 lacks cuX (driver too old)").
const DriverApi* LoadDriver(std::string* problem);

/// "CUDA_ERROR_OUT_OF_MEMORY" (or "CUresult 2" when the driver cannot name it).
std::string ErrorName(const DriverApi& api, CUresult result);

/// Creates (without registering) the device for CUDA ordinal `ordinal` on `api`, which must
/// outlive it and on which cuInit has succeeded. Throws DeviceError naming the failing call.
std::unique_ptr<Device> CreateCudaDevice(const DriverApi& api, int ordinal);

}  // namespace mpcaffe::cuda
