// layers/host_math.h — fp32 host views of a Blob's diff for the backward passes that
// run on the host side of the synced memory (element-wise layers, losses, structure layers).
#pragma once

#include "layers/blob.h"

namespace mpcaffe {

inline const float* HostDiff(const Blob& b) { return static_cast<const float*>(b.host_diff()); }
inline float* MutableHostDiff(Blob& b) { return static_cast<float*>(b.mutable_host_diff()); }

}  // namespace mpcaffe
