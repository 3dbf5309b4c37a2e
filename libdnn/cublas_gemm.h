// libdnn/cublas_gemm.h — the cuBLAS runner of the BLAS multiplexer (libdnn/blas.h): fp32 and
// fp16 (fp32 arithmetic) GEMMs in mpcaffe's CUDA context, on its stream and memory.
#pragma once

#include <string>

#include "libdnn/gemm.h"

namespace mpcaffe::libdnn {

/// Why cuBLAS cannot be used in this process ("" when libcublas loaded with every entry point
/// mpcaffe calls; running it still needs a CUDA device).
std::string CublasLoadProblem();

/// Enqueues `d` (fp32 or fp16, no bias/ReLU) with cuBLAS on `queue` of the CUDA `device`
/// (current queue when null); the event waits for and times it. Row-major as GemmDesc says.
Event RunCublasGemm(Device& device, const GemmDesc& d, const GemmArgs& args, Queue* queue);

}  // namespace mpcaffe::libdnn
