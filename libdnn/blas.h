// libdnn/blas.h — the BLAS multiplexer: runs a GEMM through LibDNN's generated kernels,
// CLBlast (OpenCL fp32/fp16, on our queue and buffers) or cuBLAS (CUDA fp32/fp16, in our context
// on our stream and memory; libcublas opened at run time), choosing per (operation, dtype,
// backend, shape) from the measurement the Tuner recorded in the tuning table.
//
// Choice, in order: MPCAFFE_BLAS=libdnn|clblast|cublas|auto (a forced library is used wherever
// it supports the GEMM, LibDNN elsewhere); else the tuning table's "blas_gemm" record for the
// device and GemmDesc::ToString(); else the documented default, LibDNN (on PoCL it measured
// faster than CLBlast on every benchmark shape, docs/BENCHMARKS.md; on CUDA devices the tuner's
// measurement decides between LibDNN and cuBLAS).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "libdnn/cublas_gemm.h"
#include "libdnn/gemm.h"

namespace mpcaffe::libdnn {

enum class BlasImpl { kLibDNN, kCLBlast, kCuBLAS };

/// "libdnn", "clblast", "cublas" (the benchmark's JSON "impl" values).
const char* BlasImplName(BlasImpl impl);
/// Parses BlasImplName()'s spellings; nothing otherwise.
std::optional<BlasImpl> ParseBlasImpl(const std::string& name);

/// Whether `impl` can run `desc` on `device`; when not, `why` (if given) says why.
/// CLBlast: OpenCL devices, fp32/fp16, no fused bias/ReLU, built with CLBlast. cuBLAS: CUDA
/// devices, fp32/fp16 (fp32 arithmetic), no fused bias/ReLU, libcublas loadable.
bool Available(BlasImpl impl, const Device& device, const GemmDesc& desc,
               std::string* why = nullptr);

/// The implementation the multiplexer picks for `desc` on `device` (see the file comment).
BlasImpl ChooseGemmImpl(const Device& device, const GemmDesc& desc);

/// A GEMM bound to one implementation. Same contract and arguments as Gemm.
class BlasGemm {
 public:
  /// `impl` forces an implementation (it must be Available); without it ChooseGemmImpl picks.
  BlasGemm(Device& device, const GemmDesc& desc, const GemmQuant& quant = {},
           std::optional<BlasImpl> impl = std::nullopt);
  BlasImpl impl() const { return impl_; }
  const GemmDesc& desc() const { return desc_; }
  /// The LibDNN GEMM (null when another library runs it); quantized callers use it for
  /// ComputeWeightSums.
  Gemm* libdnn() const { return libdnn_.get(); }
  /// Enqueues the GEMM on `queue` (default queue when null); the event times it.
  Event Run(const GemmArgs& args, Queue* queue = nullptr);

 private:
  Device* device_;
  GemmDesc desc_;
  BlasImpl impl_;
  std::unique_ptr<Gemm> libdnn_;
};

}  // namespace mpcaffe::libdnn
