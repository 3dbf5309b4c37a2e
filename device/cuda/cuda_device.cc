// device/cuda/cuda_device.cc — the CUDA backend: the driver API loaded with dlopen, devices on
// their primary contexts, memory, streams, events, NVRTC-built modules and kernel launches.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "device/backends.h"
#include "device/cuda/cuda_interop.h"
#include "device/cuda/driver_api.h"
#include "device/cuda/nvrtc.h"
#include "device/program_store.h"

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

std::string CudaVersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The kernel module's release ("550.54.15") from /proc, or empty.
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

size_t AlignUp(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

class CudaDevice;

// Makes a device's primary context current on this thread for the scope of a driver call.
class ContextScope {
 public:
  explicit ContextScope(const CudaDevice& device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const DriverApi& api_;
  bool pushed_ = false;
};

class CudaQueue : public Queue {
 public:
  CudaQueue(const CudaDevice* device, CUstream stream) : device_(device), stream_(stream) {}
  ~CudaQueue() override;
  void Finish() override;
  const CudaDevice* device() const { return device_; }
  CUstream stream() const { return stream_; }

 private:
  const CudaDevice* device_;
  CUstream stream_;
};

class CudaMemory : public DeviceMemory {
 public:
  CudaMemory(CudaDevice* device, size_t bytes, CUdeviceptr ptr);
  /// A view of `bytes` bytes at `ptr` inside `parent` (nothing to free).
  CudaMemory(CudaDevice* device, size_t bytes, CUdeviceptr ptr,
             std::shared_ptr<DeviceMemory> parent);
  ~CudaMemory() override;
  CUdeviceptr ptr() const { return ptr_; }

 private:
  CudaDevice* cuda_device_;
  CUdeviceptr ptr_;
};

// A start and an end event around one piece of work on a stream.
class CudaEvent : public Event::Impl {
 public:
  explicit CudaEvent(const CudaDevice& device) : device_(device) {}
  ~CudaEvent() override;
  /// Creates both events and records the start (call with the context current).
  void RecordStart(CUstream stream);
  void RecordEnd(CUstream stream);
  void Wait() override;
  double ElapsedMs() override;

 private:
  const CudaDevice& device_;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
};

class CudaProgram;

class CudaDevice : public Device {
 public:
  CudaDevice(const DriverApi& api, int ordinal);
  ~CudaDevice() override;

  std::shared_ptr<DeviceMemory> Allocate(size_t bytes) override;
  std::shared_ptr<DeviceMemory> SubMemory(const std::shared_ptr<DeviceMemory>& parent,
                                          size_t offset, size_t bytes) override;
  void CopyToDevice(const void* host, DeviceMemory* dst, size_t dst_offset, size_t bytes,
                    Queue* queue) override;
  void CopyToHost(const DeviceMemory* src, size_t src_offset, void* host, size_t bytes,
                  Queue* queue) override;
  void CopyOnDevice(const DeviceMemory* src, size_t src_offset, DeviceMemory* dst,
                    size_t dst_offset, size_t bytes, Queue* queue) override;
  void Zero(DeviceMemory* dst, size_t offset, size_t bytes, Queue* queue) override;
  ProgramKey BinaryKey(const std::string& source, const std::string& options) const override;
  std::shared_ptr<Program> LoadBinary(const std::string& binary, const std::string& source,
                                      const std::string& options, std::string* why) override;
  Compiled Compile(const std::string& source, const std::string& options,
                   const ProgramHints& hints, bool want_binary) override;
  Queue& default_queue() override { return *default_queue_; }
  std::unique_ptr<Queue> CreateQueue() override;

  const DriverApi& api() const { return api_; }
  CUcontext context() const { return context_; }
  int warp_size() const { return warp_size_; }
  int shared_per_block() const { return shared_per_block_; }
  int shared_per_block_optin() const { return shared_per_block_optin_; }
  const Dim3& max_block() const { return max_block_; }
  const Dim3& max_grid() const { return max_grid_; }

  /// Throws DeviceError "<call>: <CUDA_ERROR_...> (device <describe>[, context])".
  void Check(CUresult result, const char* call, const std::string& context = "") const;
  /// The stream of `queue` (the default queue when null); throws for a foreign queue.
  CUstream StreamOf(Queue* queue, const char* call) const;
  /// The device address of `bytes` bytes at `offset` in `mem`, checked against its size.
  CUdeviceptr Address(const DeviceMemory* mem, size_t offset, size_t bytes, const char* call) const;

 private:
  std::shared_ptr<Program> LoadModule(const std::string& image, const std::string& source,
                                      const std::string& options, bool from_cache,
                                      CUresult* result);

  const DriverApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  int cc_major_ = 0, cc_minor_ = 0;
  int warp_size_ = 32;
  int shared_per_block_ = 48 * 1024;
  int shared_per_block_optin_ = 48 * 1024;
  Dim3 max_block_ = {1024, 1024, 64};
  Dim3 max_grid_ = {2147483647, 65535, 65535};
  std::string platform_key_;
  std::unique_ptr<CudaQueue> default_queue_;
};

class CudaProgram : public Program, public std::enable_shared_from_this<CudaProgram> {
 public:
  CudaProgram(CudaDevice* device, CUmodule module, const std::string& source,
              const std::string& options, bool from_cache)
      : device_(device), module_(module) {
    source_ = source;
    options_ = options;
    from_cache_ = from_cache;
  }
  ~CudaProgram() override {
    try {
      ContextScope scope(*device_);
      device_->api().module_unload(module_);
    } catch (const Error&) {  // the context is gone (process teardown)
    }
  }
  Kernel GetKernel(const std::string& name) override;
  CudaDevice* device() const { return device_; }

 private:
  CudaDevice* device_;
  CUmodule module_;
};

class CudaKernel : public Kernel::Impl {
 public:
  CudaKernel(std::shared_ptr<CudaProgram> program, CUfunction function, std::string name);

  void SetValue(size_t index, const void* value, size_t bytes) override;
  void SetPointer(size_t index, DeviceMemory* mem, size_t byte_offset,
                  size_t element_size) override;
  void SetLocal(size_t index, size_t bytes) override;
  Event Launch(const Dim3& global, const Dim3& local, Queue* queue) override;
  size_t PreferredMultiple() override { return device_->warp_size(); }
  size_t MaxWorkGroupSize() override { return max_threads_; }

 private:
  struct Arg {
    bool set = false;
    bool local = false;  // a shared-memory block passed as a 32-bit byte offset
    size_t local_bytes = 0;
    std::vector<unsigned char> value;  // the bytes handed to cuLaunchKernel
  };
  Arg& At(size_t index);
  std::string Where() const { return "kernel '" + name_ + "'"; }

  std::shared_ptr<CudaProgram> program_;  // keeps the module loaded
  CudaDevice* device_;
  CUfunction function_;
  std::string name_;
  std::vector<Arg> args_;
  size_t max_threads_ = 0;
  int static_shared_ = 0;
  int dynamic_shared_opted_ = -1;    // the dynamic size cuFuncSetAttribute allowed, if any
  std::vector<size_t> param_sizes_;  // from cuFuncGetParamInfo when the driver has it
  bool param_sizes_known_ = false;
};

// ---------------------------------------------------------------------------------------------

ContextScope::ContextScope(const CudaDevice& device) : api_(device.api()) {
  device.Check(api_.ctx_push_current(device.context()), "cuCtxPushCurrent");
  pushed_ = true;
}

ContextScope::~ContextScope() {
  if (pushed_) {
    CUcontext popped = nullptr;
    api_.ctx_pop_current(&popped);
  }
}

CudaQueue::~CudaQueue() {
  try {
    ContextScope scope(*device_);
    device_->api().stream_destroy(stream_);
  } catch (const Error&) {  // the context is gone (process teardown)
  }
}

void CudaQueue::Finish() {
  CountHostSync();
  ContextScope scope(*device_);
  device_->Check(device_->api().stream_synchronize(stream_), "cuStreamSynchronize");
}

CudaMemory::CudaMemory(CudaDevice* device, size_t bytes, CUdeviceptr ptr)
    : DeviceMemory(device, bytes), cuda_device_(device), ptr_(ptr) {}

CudaMemory::CudaMemory(CudaDevice* device, size_t bytes, CUdeviceptr ptr,
                       std::shared_ptr<DeviceMemory> parent)
    : DeviceMemory(device, bytes, std::move(parent)), cuda_device_(device), ptr_(ptr) {}

CudaMemory::~CudaMemory() {
  if (!ptr_ || parent()) return;
  try {
    ContextScope scope(*cuda_device_);
    cuda_device_->api().mem_free(ptr_);
  } catch (const Error&) {
    // The context is gone (process teardown): the driver has released the memory already.
  }
}

void CudaEvent::RecordStart(CUstream stream) {
  const DriverApi& api = device_.api();
  device_.Check(api.event_create(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  device_.Check(api.event_create(&end_, CU_EVENT_DEFAULT), "cuEventCreate");
  device_.Check(api.event_record(start_, stream), "cuEventRecord");
}

CudaEvent::~CudaEvent() {
  try {
    ContextScope scope(device_);
    if (start_) device_.api().event_destroy(start_);
    if (end_) device_.api().event_destroy(end_);
  } catch (const Error&) {
  }
}

void CudaEvent::RecordEnd(CUstream stream) {
  device_.Check(device_.api().event_record(end_, stream), "cuEventRecord");
}

void CudaEvent::Wait() {
  CountHostSync();
  ContextScope scope(device_);
  device_.Check(device_.api().event_synchronize(end_), "cuEventSynchronize");
}

double CudaEvent::ElapsedMs() {
  Wait();
  ContextScope scope(device_);
  float ms = 0;
  device_.Check(device_.api().event_elapsed_time(&ms, start_, end_), "cuEventElapsedTime");
  return ms;
}

// ---------------------------------------------------------------------------------------------

CudaDevice::CudaDevice(const DriverApi& api, int ordinal) : api_(api) {
  info_.backend = Backend::kCuda;
  const std::string where = "CUDA device " + std::to_string(ordinal);
  auto check = [&](CUresult r, const char* call) {
    if (r != CUDA_SUCCESS)
      throw DeviceError(std::string(call) + ": " + ErrorName(api, r) + " (" + where + ")");
  };
  check(api.device_get(&device_, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(api.device_get_name(name, sizeof name - 1, device_), "cuDeviceGetName");
  auto attribute = [&](CUdevice_attribute a) {
    int v = 0;
    check(api.device_get_attribute(&v, a, device_), "cuDeviceGetAttribute");
    return v;
  };
  cc_major_ = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  cc_minor_ = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  warp_size_ = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  shared_per_block_ = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  shared_per_block_optin_ =
      std::max(shared_per_block_, attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  max_block_ = {size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)),
                size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)),
                size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))};
  max_grid_ = {size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)),
               size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)),
               size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))};
  size_t total = 0;
  check(api.device_total_mem(&total, device_), "cuDeviceTotalMem");
  int version = 0;
  check(api.driver_get_version(&version), "cuDriverGetVersion");

  const int cc = cc_major_ * 10 + cc_minor_;
  info_.name = name;
  info_.vendor = "NVIDIA";
  const std::string cuda_version = "CUDA " + CudaVersionString(version);
  const std::string release = NvidiaDriverRelease();
  info_.driver_version = release.empty() ? cuda_version : release + " (" + cuda_version + ")";
  info_.implementation = "cuda";
  info_.platform_name = "CUDA";
  info_.platform_version = cuda_version;
  info_.arch = "sm_" + std::to_string(cc);
  info_.is_gpu = true;
  info_.max_groups_dim2 = 65535;
  info_.global_mem_bytes = total;
  info_.local_mem_bytes = static_cast<uint64_t>(shared_per_block_);
  info_.max_work_group_size =
      static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  info_.compute_units = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info_.fp16 = cc >= 53;
  info_.int64 = true;
  info_.dot_product = cc >= 61;
  // Everything that decides what a stored binary was built by and for.
  platform_key_ = "CUDA driver " + CudaVersionString(version) + ", NVRTC " + NvrtcVersion();

  check(api.primary_ctx_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
  try {
    ContextScope scope(*this);
    CUstream stream = nullptr;
    Check(api.stream_create(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
    default_queue_ = std::make_unique<CudaQueue>(this, stream);
  } catch (...) {
    api.primary_ctx_release(device_);
    throw;
  }
}

CudaDevice::~CudaDevice() {
  default_queue_.reset();
  api_.primary_ctx_release(device_);
}

void CudaDevice::Check(CUresult result, const char* call, const std::string& context) const {
  if (result == CUDA_SUCCESS) return;
  std::string message = std::string(call) + ": " + ErrorName(api_, result) + " (device " +
                        Describe() + (context.empty() ? "" : ", " + context) + ")";
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw OutOfMemoryError(message);
  throw DeviceError(message);
}

CUstream CudaDevice::StreamOf(Queue* queue, const char* call) const {
  if (!queue) queue = scoped_queue();
  if (!queue) return default_queue_->stream();
  auto* cuda_queue = dynamic_cast<CudaQueue*>(queue);
  if (!cuda_queue || cuda_queue->device() != this)
    throw DeviceError(std::string(call) + ": the queue does not belong to device " + Describe());
  return cuda_queue->stream();
}

CUdeviceptr CudaDevice::Address(const DeviceMemory* mem, size_t offset, size_t bytes,
                                const char* call) const {
  auto* cuda_mem = dynamic_cast<const CudaMemory*>(mem);
  if (!cuda_mem || mem->device() != this)
    throw DeviceError(std::string(call) + ": the memory does not belong to device " + Describe());
  if (offset > mem->bytes() || bytes > mem->bytes() - offset)
    throw DeviceError(std::string(call) + ": " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(offset) + " exceed the allocation of " +
                      std::to_string(mem->bytes()) + " bytes (device " + Describe() + ")");
  return cuda_mem->ptr() + offset;
}

std::shared_ptr<DeviceMemory> CudaDevice::SubMemory(const std::shared_ptr<DeviceMemory>& parent,
                                                  size_t offset, size_t bytes) {
  if (!parent || offset + bytes > parent->bytes() || bytes == 0)
    throw DeviceError("SubMemory: bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + bytes) + ") outside an allocation of " +
                      std::to_string(parent ? parent->bytes() : 0) + " bytes");
  if (offset % 256 != 0) return nullptr;
  const CUdeviceptr base = static_cast<const CudaMemory*>(parent.get())->ptr();
  return std::make_shared<CudaMemory>(this, bytes, base + offset, parent);
}

std::shared_ptr<DeviceMemory> CudaDevice::Allocate(size_t bytes) {
  CUdeviceptr ptr = 0;
  if (bytes > 0) {
    ContextScope scope(*this);
    CUresult r = api_.mem_alloc(&ptr, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      throw OutOfMemoryError("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY on device " + Describe() +
                             ": requested " + std::to_string(bytes) + " bytes with " +
                             std::to_string(bytes_in_use()) + " bytes in use");
    }
    Check(r, "cuMemAlloc", std::to_string(bytes) + " bytes");
  }
  try {
    return std::make_shared<CudaMemory>(this, bytes, ptr);
  } catch (...) {  // the byte counter refused (MPCAFFE_MAX_DEVICE_BYTES)
    if (ptr) {
      ContextScope scope(*this);
      api_.mem_free(ptr);
    }
    throw;
  }
}

void CudaDevice::CopyToDevice(const void* host, DeviceMemory* dst, size_t dst_offset, size_t bytes,
                              Queue* queue) {
  CUdeviceptr to = Address(dst, dst_offset, bytes, "CopyToDevice");
  CUstream stream = StreamOf(queue, "CopyToDevice");
  if (bytes == 0) return;
  ContextScope scope(*this);
  Check(api_.memcpy_htod_async(to, host, bytes, stream), "cuMemcpyHtoDAsync");
  CountHostSync();
  Check(api_.stream_synchronize(stream), "cuStreamSynchronize");
}

void CudaDevice::CopyToHost(const DeviceMemory* src, size_t src_offset, void* host, size_t bytes,
                            Queue* queue) {
  CUdeviceptr from = Address(src, src_offset, bytes, "CopyToHost");
  CUstream stream = StreamOf(queue, "CopyToHost");
  if (bytes == 0) return;
  ContextScope scope(*this);
  Check(api_.memcpy_dtoh_async(host, from, bytes, stream), "cuMemcpyDtoHAsync");
  CountHostSync();
  Check(api_.stream_synchronize(stream), "cuStreamSynchronize");
}

void CudaDevice::CopyOnDevice(const DeviceMemory* src, size_t src_offset, DeviceMemory* dst,
                              size_t dst_offset, size_t bytes, Queue* queue) {
  CUdeviceptr from = Address(src, src_offset, bytes, "CopyOnDevice");
  CUdeviceptr to = Address(dst, dst_offset, bytes, "CopyOnDevice");
  CUstream stream = StreamOf(queue, "CopyOnDevice");
  if (bytes == 0) return;
  ContextScope scope(*this);
  Check(api_.memcpy_dtod_async(to, from, bytes, stream), "cuMemcpyDtoDAsync");
}

void CudaDevice::Zero(DeviceMemory* dst, size_t offset, size_t bytes, Queue* queue) {
  CUdeviceptr to = Address(dst, offset, bytes, "Zero");
  CUstream stream = StreamOf(queue, "Zero");
  if (bytes == 0) return;
  ContextScope scope(*this);
  Check(api_.memset_d8_async(to, 0, bytes, stream), "cuMemsetD8Async");
}

std::unique_ptr<Queue> CudaDevice::CreateQueue() {
  ContextScope scope(*this);
  CUstream stream = nullptr;
  Check(api_.stream_create(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
  return std::make_unique<CudaQueue>(this, stream);
}

std::shared_ptr<Program> CudaDevice::LoadModule(const std::string& image, const std::string& source,
                                                const std::string& options, bool from_cache,
                                                CUresult* result) {
  ContextScope scope(*this);
  CUmodule module = nullptr;
  *result = api_.module_load_data(&module, image.c_str());
  if (*result != CUDA_SUCCESS) return nullptr;
  return std::make_shared<CudaProgram>(this, module, source, options, from_cache);
}

ProgramKey CudaDevice::BinaryKey(const std::string& source, const std::string& options) const {
  ProgramKey key;
  key.backend = "cuda";
  key.platform = platform_key_;
  key.device = info_.name;
  key.driver = info_.driver_version;
  key.arch = TargetForDevice(cc_major_, cc_minor_);
  key.options = options;
  key.source = source;
  return key;
}

std::shared_ptr<Program> CudaDevice::LoadBinary(const std::string& binary,
                                                const std::string& source,
                                                const std::string& options, std::string* why) {
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Program> program = LoadModule(binary, source, options, true, &r);
  if (!program) *why = "cuModuleLoadData: " + ErrorName(api_, r);
  return program;
}

Device::Compiled CudaDevice::Compile(const std::string& source, const std::string& options,
                                     const ProgramHints& /*hints*/, bool want_binary) {
  // The hints' local sizes matter to OpenCL compilers (reqd_work_group_size); NVRTC output
  // does not depend on them, so the CUDA backend has nothing to prepare.
  const std::string target = TargetForDevice(cc_major_, cc_minor_);
  NvrtcOutput out =
      CompileCuda(source, target, SplitOptions(options), "mpcaffe_kernel.cu", Describe());
  CUresult r = CUDA_SUCCESS;
  std::shared_ptr<Program> program = LoadModule(out.image(), source, options, false, &r);
  if (!program) {
    std::string hint = target + " image from NVRTC " + NvrtcVersion();
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_INVALID_IMAGE ||
        r == CUDA_ERROR_NO_BINARY_FOR_GPU)
      hint += "; the driver (" + info_.driver_version + ") may be older than the toolkit";
    Check(r, "cuModuleLoadData", hint);
  }
  Compiled compiled;
  compiled.program = program;
  compiled.seconds = out.seconds;
  if (want_binary) compiled.binary = out.image();
  return compiled;
}

// ---------------------------------------------------------------------------------------------

Kernel CudaProgram::GetKernel(const std::string& name) {
  CUfunction function = nullptr;
  {
    ContextScope scope(*device_);
    CUresult r = device_->api().module_get_function(&function, module_, name.c_str());
    if (r != CUDA_SUCCESS)
      throw DeviceError("cuModuleGetFunction: " + ErrorName(device_->api(), r) + ": no kernel '" +
                        name + "' in the program (device " + device_->Describe() +
                        "; kernels must be declared extern \"C\" __global__)");
  }
  return Kernel(name, std::make_shared<CudaKernel>(shared_from_this(), function, name), device_);
}

CudaKernel::CudaKernel(std::shared_ptr<CudaProgram> program, CUfunction function, std::string name)
    : program_(std::move(program)),
      device_(program_->device()),
      function_(function),
      name_(std::move(name)) {
  const DriverApi& api = device_->api();
  ContextScope scope(*device_);
  int v = 0;
  device_->Check(api.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function_),
                 "cuFuncGetAttribute", Where());
  max_threads_ = static_cast<size_t>(v);
  device_->Check(
      api.func_get_attribute(&static_shared_, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_),
      "cuFuncGetAttribute", Where());
  if (api.func_get_param_info) {
    // Parameters are numbered until the driver answers CUDA_ERROR_INVALID_VALUE (no such
    // index); any other answer means it cannot tell, and launches go unchecked.
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; r == CUDA_SUCCESS; ++i) {
      size_t offset = 0, size = 0;
      r = api.func_get_param_info(function_, i, &offset, &size);
      if (r == CUDA_SUCCESS) param_sizes_.push_back(size);
    }
    param_sizes_known_ = r == CUDA_ERROR_INVALID_VALUE;
  }
}

CudaKernel::Arg& CudaKernel::At(size_t index) {
  if (index >= args_.size()) args_.resize(index + 1);
  return args_[index];
}

void CudaKernel::SetValue(size_t index, const void* value, size_t bytes) {
  Arg& arg = At(index);
  arg.set = true;
  arg.local = false;
  arg.value.assign(static_cast<const unsigned char*>(value),
                   static_cast<const unsigned char*>(value) + bytes);
}

void CudaKernel::SetPointer(size_t index, DeviceMemory* mem, size_t byte_offset,
                            size_t /*element_size*/) {
  // CUDA kernels take the moved address; there is no separate offset parameter.
  CUdeviceptr address = 0;
  if (mem) {
    const std::string call = Where() + " argument " + std::to_string(index);
    address = device_->Address(mem, byte_offset, 0, call.c_str());
  }
  SetValue(index, &address, sizeof address);
}

void CudaKernel::SetLocal(size_t index, size_t bytes) {
  Arg& arg = At(index);
  arg.set = true;
  arg.local = true;
  arg.local_bytes = bytes;
  arg.value.assign(sizeof(uint32_t), 0);  // the offset is filled in at launch
}

Event CudaKernel::Launch(const Dim3& global, const Dim3& local, Queue* queue) {
  const DriverApi& api = device_->api();
  // Arguments: every index set, shared-memory blocks laid out 16-byte aligned in order.
  size_t dynamic_shared = 0;
  std::vector<void*> params(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    Arg& arg = args_[i];
    if (!arg.set) throw DeviceError(Where() + ": argument " + std::to_string(i) + " was not set");
    if (arg.local) {
      if (dynamic_shared > std::numeric_limits<uint32_t>::max())
        throw DeviceError(Where() + ": shared memory offset overflows 32 bits");
      const uint32_t offset = static_cast<uint32_t>(dynamic_shared);
      std::memcpy(arg.value.data(), &offset, sizeof offset);
      dynamic_shared += AlignUp(arg.local_bytes, 16);
    }
    params[i] = arg.value.data();
  }
  if (param_sizes_known_) {
    if (param_sizes_.size() != args_.size())
      throw DeviceError(Where() + ": " + std::to_string(args_.size()) +
                        " arguments given, the kernel takes " +
                        std::to_string(param_sizes_.size()));
    for (size_t i = 0; i < args_.size(); ++i) {
      if (param_sizes_[i] != args_[i].value.size())
        throw DeviceError(Where() + " argument " + std::to_string(i) + ": " +
                          std::to_string(args_[i].value.size()) + " bytes given, the kernel " +
                          "expects " + std::to_string(param_sizes_[i]));
    }
  }

  unsigned int grid[3], block[3];
  size_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (local[d] == 0 || global[d] == 0)
      throw DeviceError(Where() + ": zero launch size in dimension " + std::to_string(d));
    const size_t groups = (global[d] + local[d] - 1) / local[d];
    if (local[d] > device_->max_block()[d] || groups > device_->max_grid()[d])
      throw DeviceError(Where() + ": launch of " + std::to_string(global[d]) + " items in " +
                        "groups of " + std::to_string(local[d]) + " exceeds the device's " +
                        "limits in dimension " + std::to_string(d) + " (block " +
                        std::to_string(device_->max_block()[d]) + ", grid " +
                        std::to_string(device_->max_grid()[d]) + ")");
    block[d] = static_cast<unsigned int>(local[d]);
    grid[d] = static_cast<unsigned int>(groups);
    threads *= local[d];
  }
  if (threads > max_threads_)
    throw DeviceError(Where() + ": work-group of " + std::to_string(threads) +
                      " threads exceeds the kernel's limit of " + std::to_string(max_threads_));
  const size_t total_shared = dynamic_shared + static_cast<size_t>(static_shared_);
  if (total_shared > static_cast<size_t>(device_->shared_per_block_optin()))
    throw DeviceError(Where() + ": " + std::to_string(total_shared) +
                      " bytes of shared memory requested, the device allows " +
                      std::to_string(device_->shared_per_block_optin()) + " per block");

  CUstream stream = device_->StreamOf(queue, "Kernel::Launch");
  ContextScope scope(*device_);
  // Beyond the default per-block limit a kernel must opt in to larger dynamic shared memory.
  if (total_shared > static_cast<size_t>(device_->shared_per_block()) &&
      dynamic_shared_opted_ < static_cast<int>(dynamic_shared)) {
    device_->Check(
        api.func_set_attribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(dynamic_shared)),
        "cuFuncSetAttribute", Where());
    dynamic_shared_opted_ = static_cast<int>(dynamic_shared);
  }
  auto event = std::make_shared<CudaEvent>(*device_);
  event->RecordStart(stream);
  device_->Check(api.launch_kernel(function_, grid[0], grid[1], grid[2], block[0], block[1],
                                   block[2], static_cast<unsigned int>(dynamic_shared), stream,
                                   params.empty() ? nullptr : params.data(), nullptr),
                 "cuLaunchKernel", Where());
  event->RecordEnd(stream);
  return Event(event);
}

}  // namespace

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

std::unique_ptr<Device> CreateCudaDevice(const DriverApi& api, int ordinal) {
  return std::make_unique<CudaDevice>(api, ordinal);
}

namespace {
CudaDevice& AsCuda(Device& device, const char* call) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (!cuda) throw DeviceError(std::string(call) + ": " + device.Describe() + " is not a CUDA device");
  return *cuda;
}
}  // namespace

uint64_t NativeAddress(const DeviceMemory& mem, size_t byte_offset, size_t bytes) {
  return AsCuda(*mem.device(), "cuda::NativeAddress").Address(&mem, byte_offset, bytes, "cuda::NativeAddress");
}

void* NativeStream(Device& device, Queue* queue) {
  return AsCuda(device, "cuda::NativeStream").StreamOf(queue, "cuda::NativeStream");
}

Event TimedOnStream(Device& device, Queue* queue, const std::function<void()>& enqueue) {
  CudaDevice& cuda = AsCuda(device, "cuda::TimedOnStream");
  ContextScope scope(cuda);
  CUstream stream = cuda.StreamOf(queue, "cuda::TimedOnStream");
  auto event = std::make_shared<CudaEvent>(cuda);
  event->RecordStart(stream);
  enqueue();
  event->RecordEnd(stream);
  return Event(event);
}

struct NativeContext::Impl {
  explicit Impl(const CudaDevice& device) : scope(device) {}
  ContextScope scope;
};

NativeContext::NativeContext(Device& device)
    : impl_(std::make_unique<Impl>(AsCuda(device, "cuda::NativeContext"))) {}

NativeContext::~NativeContext() = default;

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
