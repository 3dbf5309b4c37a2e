// net/memory_planner.cc — greedy lifetime-based slot assignment for reduced-memory inference.
#include "net/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace mpcaffe {

size_t MemoryPlan::total_bytes() const {
  return std::accumulate(slot_bytes.begin(), slot_bytes.end(), size_t{0});
}

MemoryPlan PlanSharedMemory(const std::vector<BlobLifetime>& blobs) {
  MemoryPlan plan;
  plan.slot_of.assign(blobs.size(), -1);
  std::vector<size_t> order(blobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blobs[a].first < blobs[b].first; });
  std::vector<int> slot_end;  // last step of the blob currently in each slot
  for (size_t i : order) {
    const BlobLifetime& b = blobs[i];
    int best = -1;
    for (size_t s = 0; s < plan.slot_bytes.size(); ++s) {
      if (slot_end[s] >= b.first) continue;  // still in use
      const bool fits = plan.slot_bytes[s] >= b.bytes;
      if (best < 0) {
        best = static_cast<int>(s);
        continue;
      }
      const bool best_fits = plan.slot_bytes[best] >= b.bytes;
      if (fits && (!best_fits || plan.slot_bytes[s] < plan.slot_bytes[best])) best = static_cast<int>(s);
      if (!fits && !best_fits && plan.slot_bytes[s] > plan.slot_bytes[best]) best = static_cast<int>(s);
    }
    if (best < 0) {
      best = static_cast<int>(plan.slot_bytes.size());
      plan.slot_bytes.push_back(0);
      slot_end.push_back(b.last);
    }
    plan.slot_bytes[best] = std::max(plan.slot_bytes[best], b.bytes);
    slot_end[best] = b.last;
    plan.slot_of[i] = best;
  }
  return plan;
}

}  // namespace mpcaffe
