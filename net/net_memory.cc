// net/net_memory.cc — the Net's device memory: the reduced-memory plan (blobs sharing memory by
// lifetime) and the byte counts of what the net holds.
#include <algorithm>

#include "net/memory_planner.h"
#include "net/net.h"

namespace mpcaffe {

void Net::PlanMemory() {
  std::vector<BlobLifetime> lives;
  std::map<Blob*, size_t> index;
  const int n = static_cast<int>(layers_.size());
  auto touch = [&](Blob* b, int step) {
    auto it = index.find(b);
    if (it == index.end()) {
      index[b] = lives.size();
      lives.push_back({b->bytes(), step, step});
    } else {
      lives[it->second].first = std::min(lives[it->second].first, step);
      lives[it->second].last = std::max(lives[it->second].last, step);
    }
  };
  for (int i = 0; i < n; ++i) {
    for (Blob* b : bottom_vecs_[i]) touch(b, i);
    for (Blob* b : top_vecs_[i]) touch(b, i);
    // A fused chain's last top is written by its producer, some steps early.
    if (fusion_end(i) > i)
      for (Blob* b : top_vecs_[fusion_end(i)]) touch(b, i);
  }
  for (Blob* b : input_blobs_) touch(b, -1);  // written by the user before Forward
  for (Blob* b : output_blobs_) touch(b, n);  // read by the user after Forward
  for (const auto& name : options_.keep_blobs) {
    auto it = blobs_.find(name);
    if (it == blobs_.end())
      throw NetError("keep_blobs names '" + name + "', which the net has not");
    touch(it->second.get(), -1);
    touch(it->second.get(), n);
  }
  const MemoryPlan plan = PlanSharedMemory(lives);
  slots_.clear();
  for (size_t bytes : plan.slot_bytes)
    slots_.push_back(device_->Allocate(std::max<size_t>(bytes, 4)));
  std::vector<Blob*> order(lives.size());
  for (const auto& [b, i] : index) order[i] = b;
  for (size_t i = 0; i < order.size(); ++i) order[i]->SetDataMemory(slots_[plan.slot_of[i]]);
}

uint64_t Net::peak_device_bytes() const {
  const uint64_t peak = device_->peak_bytes();
  return peak > base_bytes_ ? peak - base_bytes_ : 0;
}

uint64_t Net::blob_device_bytes() const {
  std::set<const DeviceMemory*> seen;
  uint64_t total = 0;
  auto add = [&](const Blob& b) {
    auto m = b.data_memory();
    if (m && seen.insert(m.get()).second) total += m->bytes();
  };
  for (const auto& [name, b] : blobs_) add(*b);
  for (const auto& l : layers_)
    for (int i = 0; i < l->num_params(); ++i) add(l->param_blob(i));
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Net* n : nested_nets(static_cast<int>(i))) total += n->blob_device_bytes();
  return total;
}

}  // namespace mpcaffe
