// device/cuda/cuda_absent.cc — the CUDA enumeration entry point for builds made without a CUDA
// toolkit: it contributes no devices and says why.
#include "device/backends.h"

namespace mpcaffe {

std::string EnumerateCuda() { return "cuda: not built (no CUDA toolkit found at build time)"; }

}  // namespace mpcaffe
