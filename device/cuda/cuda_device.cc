// device/cuda/cuda_device.cc — the CUDA backend: devices on their primary contexts, memory,
// streams, events and NVRTC-built modules (the driver is loaded in cuda_driver.cc, kernels are
// launched in cuda_kernel.cc).
#include <algorithm>
#include <cstring>

#include "device/cuda/cuda_interop.h"
#include "device/cuda/cuda_objects.h"
#include "device/cuda/driver_api.h"
#include "device/cuda/nvrtc.h"
#include "device/program_store.h"

namespace mpcaffe {
namespace cuda {

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
}  // namespace mpcaffe
