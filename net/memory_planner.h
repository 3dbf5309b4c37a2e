// net/memory_planner.h — the reduced-memory planner: assigns blobs with non-overlapping
// lifetimes to shared device allocations ("slots") for inference.
#pragma once

#include <cstddef>
#include <vector>

namespace mpcaffe {

/// A blob's size and the first and last layer steps that touch it (inclusive; the user's
/// writes before Forward count as step −1, reads after it as step = number of layers).
struct BlobLifetime {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
};

/// Which slot each blob uses and how large each slot is.
struct MemoryPlan {
  std::vector<size_t> slot_bytes;
  std::vector<int> slot_of;  // per blob, in the order given
  size_t total_bytes() const;
};

/// Greedy interval assignment in order of first use: a blob takes a free slot (one whose
/// blobs all ended before it starts) — the smallest that is large enough, else the largest
/// (grown to fit) — or opens a new slot. Two blobs whose [first, last] intervals intersect
/// never share a slot, so a layer's inputs and outputs never alias unless they are the same
/// blob (in place).
MemoryPlan PlanSharedMemory(const std::vector<BlobLifetime>& blobs);

}  // namespace mpcaffe
