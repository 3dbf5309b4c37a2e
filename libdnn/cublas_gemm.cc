// libdnn/cublas_gemm.cc — cuBLAS behind the BLAS multiplexer: libcublas opened at run time
// (like the driver, so mpcaffe runs where it is absent), called in mpcaffe's CUDA context on its
// streams and memory. Its own file: cuBLAS's cuda_fp16.h and CLBlast's half.h both define `half`.
#include "libdnn/cublas_gemm.h"

#if defined(MPCAFFE_HAVE_CUDA) && defined(MPCAFFE_HAVE_CUBLAS_HEADERS)
#include <cublas_api.h>
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <type_traits>

#include "device/cuda/cuda_interop.h"
#endif

namespace mpcaffe::libdnn {

#if defined(MPCAFFE_HAVE_CUDA) && defined(MPCAFFE_HAVE_CUBLAS_HEADERS)
namespace {
/// The cuBLAS entry points mpcaffe uses, resolved from the toolkit's libcublas at first use (so
/// the library runs where cuBLAS is absent, like it runs without a driver).
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const float*, const float*, int, const float*, int, const float*, float*,
                          int) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;  // optional (CUDA ≥ 11.4)
  std::string problem;  // why the library is unusable ("" when loaded)
};

const CublasApi& Cublas() {
  static const CublasApi* api = [] {
    auto* a = new CublasApi();  // lives until exit, like the library
    void* lib = nullptr;
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      const char* err = dlerror();
      a->problem = std::string("libcublas.so not found (") + (err ? err : "dlopen failed") +
                   "); install the CUDA toolkit's cuBLAS";
      return a;
    }
    auto resolve = [&](auto** fn, const char* symbol, bool required) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, symbol));
      if (!*fn && required && a->problem.empty())
        a->problem = std::string("libcublas has no ") + symbol;
    };
    resolve(&a->create, "cublasCreate_v2", true);
    resolve(&a->destroy, "cublasDestroy_v2", true);
    resolve(&a->set_stream, "cublasSetStream_v2", true);
    resolve(&a->sgemm, "cublasSgemm_v2", true);
    resolve(&a->gemm_ex, "cublasGemmEx", true);
    resolve(&a->status_string, "cublasGetStatusString", false);
    return a;
  }();
  return *api;
}

void CheckCublas(cublasStatus_t status, const char* call, const GemmDesc& d, Device& device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& api = Cublas();
  const std::string name = api.status_string ? api.status_string(status)
                                             : "cublasStatus_t " + std::to_string(int(status));
  throw DeviceError(std::string(call) + ": " + name + " for " + d.ToString() + " on " +
                    device.Describe());
}

/// One cuBLAS handle per device, created in the device's context on first use.
cublasHandle_t CublasHandle(Device& device, const GemmDesc& d) {
  static std::mutex mutex;
  static std::map<Device*, cublasHandle_t> handles;  // kept until exit, like the contexts
  std::lock_guard<std::mutex> lock(mutex);
  cublasHandle_t& h = handles[&device];
  if (!h) CheckCublas(Cublas().create(&h), "cublasCreate", d, device);
  return h;
}

}  // namespace

std::string CublasLoadProblem() { return Cublas().problem; }

/// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ on the same memory: cuBLAS gets
/// B first, N and M swapped, the same transposition flags and row strides as leading dimensions.
Event RunCublasGemm(Device& device, const GemmDesc& d, const GemmArgs& args, Queue* queue) {
  const CublasApi& api = Cublas();
  cuda::NativeContext context(device);
  cublasHandle_t h = CublasHandle(device, d);
  const size_t e = SizeOf(d.type);
  const size_t a_rows = d.trans_a ? d.K : d.M, b_rows = d.trans_b ? d.N : d.K;
  auto address = [&](const BufferRef& r, size_t rows, int ld, int cols) {
    const size_t bytes = rows ? ((rows - 1) * size_t(ld) + size_t(cols)) * e : 0;
    return reinterpret_cast<void*>(cuda::NativeAddress(*r.mem, r.byte_offset, bytes));
  };
  void* a = address(args.a, a_rows, d.lda_or_packed(), d.trans_a ? d.M : d.K);
  void* b = address(args.b, b_rows, d.ldb_or_packed(), d.trans_b ? d.K : d.N);
  void* c = address(args.c, d.M, d.ldc_or_packed(), d.N);
  const cublasOperation_t ta = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  return cuda::TimedOnStream(device, queue, [&] {
    CheckCublas(api.set_stream(h, static_cast<cudaStream_t>(cuda::NativeStream(device, queue))),
                "cublasSetStream", d, device);
    if (d.type == DataType::kFloat32) {
      CheckCublas(api.sgemm(h, tb, ta, d.N, d.M, d.K, &args.alpha, static_cast<const float*>(b),
                            d.ldb_or_packed(), static_cast<const float*>(a), d.lda_or_packed(),
                            &args.beta, static_cast<float*>(c), d.ldc_or_packed()),
                  "cublasSgemm", d, device);
    } else {  // fp16 storage, fp32 arithmetic
      CheckCublas(api.gemm_ex(h, tb, ta, d.N, d.M, d.K, &args.alpha, b, CUDA_R_16F,
                              d.ldb_or_packed(), a, CUDA_R_16F, d.lda_or_packed(), &args.beta, c,
                              CUDA_R_16F, d.ldc_or_packed(), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx", d, device);
    }
  });
}
#else

std::string CublasLoadProblem() {
#ifdef MPCAFFE_HAVE_CUDA
  return "built without cuBLAS's headers (NVRTC and the CUDA headers from PyPI, no toolkit)";
#else
  return "built without the CUDA backend (no CUDA toolkit at build time)";
#endif
}

Event RunCublasGemm(Device& device, const GemmDesc& d, const GemmArgs&, Queue*) {
  throw Error("cuBLAS GEMM " + d.ToString() + " on " + device.Describe() + ": " + CublasLoadProblem());
}

#endif

}  // namespace mpcaffe::libdnn
