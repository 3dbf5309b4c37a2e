// libdnn/scratch.h — scratch buffers shared by the kernels of one net's pass (reduced-memory
// inference).
//
// A convolution fills scratch before its kernels (packed input planes, im2col columns, a
// GEMM's packed operands, Winograd's transformed input and products). Each object holding its
// own keeps every layer's scratch alive at once; freeing it after each pass and allocating it
// again on the next costs a device allocation per layer and pass, which some runtimes make
// slow (Intel's CPU runtime: ResNet-50 fp32 at batch 1 took 60–67 ms with the re-allocations
// against 46–50 ms holding the buffers, `mpcaffe bench net --reduced-memory on|off`). The
// layers of a pass on one in-order queue never use a scratch buffer at the same time, so one
// buffer per use and queue, grown to the largest request, bounds the memory as freeing did
// (the largest layer's, per use) without the allocations.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "device/device.h"

namespace mpcaffe::libdnn {

/// What a scratch buffer holds: buffers filled and read within one launch sequence of one
/// object. Two uses of one object's sequence never share a buffer.
enum class ScratchUse {
  kPackedInput,     // Convolution: packed input planes of a chunk of the batch
  kColumns,         // Convolution: im2col columns, or a strided 1×1's subsampled input
  kGemmPackedA,     // Gemm: the weights' expanded pairs
  kGemmUnpacked,    // Gemm: 4-bit weights unpacked to bytes
  kGemmActivations, // Gemm: native 4-bit kernels' packed activations
  kWinogradInput,   // WinogradForward: V, the transformed input tiles
  kWinogradProducts, // WinogradForward: M, the element-wise products
  kTopDiff           // Convolution's backward pass: a chunk of the top diff, channel-major
};

/// One buffer per (queue, use), shared by the objects given the arena. Thread-safe. Objects
/// using it take their buffers again on every run (the queue may differ) and drop them after
/// (ReleaseScratch), so a buffer the arena replaced by a larger one is freed once the commands
/// enqueued on it have finished.
class ScratchArena {
 public:
  /// A buffer of at least `bytes` (≥ 1) for `use` on `queue` (nullptr: the device's current
  /// queue).
  std::shared_ptr<DeviceMemory> Get(Device& device, Queue* queue, ScratchUse use, size_t bytes);
  /// Bytes the arena holds.
  size_t bytes() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<const Queue*, ScratchUse>, std::shared_ptr<DeviceMemory>> buffers_;
};

/// Into *buffer a buffer of at least `bytes` for `use` on `queue`: from `arena` on every call
/// when there is one (the queue may differ from the last run's), else one of the caller's own,
/// allocated when *buffer is empty or smaller.
void TakeScratch(Device& device, ScratchArena* arena, Queue* queue, ScratchUse use, size_t bytes,
                 std::shared_ptr<DeviceMemory>* buffer);

}  // namespace mpcaffe::libdnn
