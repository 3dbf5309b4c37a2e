// libdnn/scratch.cc — the shared scratch arena of reduced-memory inference.
#include "libdnn/scratch.h"

#include <algorithm>

namespace mpcaffe::libdnn {

std::shared_ptr<DeviceMemory> ScratchArena::Get(Device& device, Queue* queue, ScratchUse use,
                                                size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  const Queue* key = queue ? queue : &device.current_queue();
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<DeviceMemory>& buffer = buffers_[{key, use}];
  // Replaced, not grown in place: commands enqueued on the old buffer keep it until they end.
  if (!buffer || buffer->bytes() < bytes) {
    buffer.reset();  // before allocating, so the old and new buffers need not fit at once
    buffer = device.Allocate(bytes);
  }
  return buffer;
}

size_t ScratchArena::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const auto& [key, buffer] : buffers_) total += buffer->bytes();
  return total;
}

void TakeScratch(Device& device, ScratchArena* arena, Queue* queue, ScratchUse use, size_t bytes,
                 std::shared_ptr<DeviceMemory>* buffer) {
  if (arena)
    *buffer = arena->Get(device, queue, use, bytes);
  else if (!*buffer || (*buffer)->bytes() < bytes)
    *buffer = device.Allocate(bytes);
}

}  // namespace mpcaffe::libdnn
