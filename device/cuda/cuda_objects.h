// device/cuda/cuda_objects.h — the CUDA backend's objects (device, context scope, queue, memory,
// event, program, kernel), shared by cuda_device.cc and cuda_kernel.cc; internal to device/cuda.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/cuda/driver_api.h"
#include "device/device.h"

namespace mpcaffe {
namespace cuda {

/// "12.4" from the driver's version number 12040.
std::string CudaVersionString(int version);
/// The kernel module's release ("550.54.15") from /proc, or empty.
std::string NvidiaDriverRelease();

inline size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

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

}  // namespace cuda
}  // namespace mpcaffe
