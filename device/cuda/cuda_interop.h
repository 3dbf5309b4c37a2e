// device/cuda/cuda_interop.h — the CUDA handles behind mpcaffe buffers and queues, for libraries
// that work on them directly (cuBLAS in libdnn/blas.cc). Built with the CUDA backend only
// (MPCAFFE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "device/device.h"

namespace mpcaffe::cuda {

/// The device address (CUdeviceptr) of `bytes` bytes at `byte_offset` in `mem`. Throws
/// DeviceError when `mem` is not CUDA memory or the range exceeds the allocation.
uint64_t NativeAddress(const DeviceMemory& mem, size_t byte_offset, size_t bytes);

/// The CUstream of `queue`, or of the current queue (QueueScope, else the default queue) when
/// `queue` is null. Throws DeviceError when `device` is not a CUDA device.
void* NativeStream(Device& device, Queue* queue = nullptr);

/// Runs `enqueue` (which puts work on NativeStream(device, queue)) between two recorded events,
/// in the device's context: the returned Event waits for and times that work.
Event TimedOnStream(Device& device, Queue* queue, const std::function<void()>& enqueue);

/// Makes the device's primary context current on this thread while alive: libraries built on
/// the CUDA runtime (cuBLAS) then work in mpcaffe's context, on its memory and streams.
class NativeContext {
 public:
  explicit NativeContext(Device& device);
  ~NativeContext();
  NativeContext(const NativeContext&) = delete;
  NativeContext& operator=(const NativeContext&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mpcaffe::cuda
