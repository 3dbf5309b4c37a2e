// libdnn/blas.cc — the BLAS multiplexer: availability, choice (environment, tuning table,
// default) and the CLBlast calls on our OpenCL queue and buffers (cuBLAS: libdnn/cublas_gemm.cc).
#include "libdnn/blas.h"

#include <cstdlib>

#include "codegen/target_profile.h"
#include "cache/program_cache.h"
#include "libdnn/kernel_config.h"
#include "device/opencl/opencl_interop.h"

#ifdef MPCAFFE_HAVE_CLBLAST
#include <clblast.h>
#include <clblast_half.h>
#endif
#include "libdnn/cublas_gemm.h"
#include "device/settings.h"

namespace mpcaffe::libdnn {

namespace {

#ifdef MPCAFFE_HAVE_CLBLAST
/// An event CLBlast returned, timed by our queue's profiling clock.
class ClEvent : public Event::Impl {
 public:
  explicit ClEvent(cl_event e) : event_(e) {}
  ~ClEvent() override { clReleaseEvent(event_); }
  void Wait() override { clWaitForEvents(1, &event_); }
  double ElapsedMs() override {
    Wait();
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    return static_cast<double>(end - start) * 1e-6;
  }

 private:
  cl_event event_;
};

Event RunClBlast(Device& device, const GemmDesc& d, const GemmArgs& args, Queue* queue) {
  cl_command_queue q = opencl::NativeQueue(device, queue);
  const size_t e = SizeOf(d.type);
  const auto ta = d.trans_a ? clblast::Transpose::kYes : clblast::Transpose::kNo;
  const auto tb = d.trans_b ? clblast::Transpose::kYes : clblast::Transpose::kNo;
  cl_mem a = opencl::NativeBuffer(*args.a.mem), b = opencl::NativeBuffer(*args.b.mem),
         c = opencl::NativeBuffer(*args.c.mem);
  cl_event event = nullptr;
  clblast::StatusCode status;
  if (d.type == DataType::kFloat32) {
    status = clblast::Gemm<float>(clblast::Layout::kRowMajor, ta, tb, d.M, d.N, d.K, args.alpha, a,
                                  args.a.byte_offset / e, d.lda_or_packed(), b,
                                  args.b.byte_offset / e, d.ldb_or_packed(), args.beta, c,
                                  args.c.byte_offset / e, d.ldc_or_packed(), &q, &event);
  } else {
    status = clblast::Gemm<half>(
        clblast::Layout::kRowMajor, ta, tb, d.M, d.N, d.K, FloatToHalf(args.alpha), a,
        args.a.byte_offset / e, d.lda_or_packed(), b, args.b.byte_offset / e, d.ldb_or_packed(),
        FloatToHalf(args.beta), c, args.c.byte_offset / e, d.ldc_or_packed(), &q, &event);
  }
  if (status != clblast::StatusCode::kSuccess)
    throw DeviceError("CLBlast Gemm failed with status " +
                      std::to_string(static_cast<int>(status)) + " for " + d.ToString() + " on " +
                      device.Describe());
  return Event(std::make_shared<ClEvent>(event));
}
#endif

}  // namespace

const char* BlasImplName(BlasImpl impl) {
  switch (impl) {
    case BlasImpl::kLibDNN:
      return "libdnn";
    case BlasImpl::kCLBlast:
      return "clblast";
    case BlasImpl::kCuBLAS:
      return "cublas";
  }
  return "?";
}

std::optional<BlasImpl> ParseBlasImpl(const std::string& name) {
  for (BlasImpl i : {BlasImpl::kLibDNN, BlasImpl::kCLBlast, BlasImpl::kCuBLAS})
    if (name == BlasImplName(i)) return i;
  return std::nullopt;
}

bool Available(BlasImpl impl, const Device& device, const GemmDesc& desc, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  switch (impl) {
    case BlasImpl::kLibDNN:
      return true;
    case BlasImpl::kCLBlast:
#ifndef MPCAFFE_HAVE_CLBLAST
      return no("built without CLBlast (install libclblast-dev and reconfigure)");
#else
      if (TargetProfile::Of(device.info()).vendor_blas != VendorBlas::kCLBlast)
        return no("CLBlast runs on OpenCL devices only");
      if (IsQuantized(desc.type)) return no("CLBlast has no quantized GEMM");
      // CLBlast's half kernels compute in half (it reports kNoHalfPrecision otherwise).
      if (desc.type == DataType::kFloat16 && !device.info().fp16)
        return no("CLBlast fp16 needs cl_khr_fp16, which " + device.info().name + " lacks");
      if (desc.bias || desc.relu) return no("CLBlast cannot fuse bias or ReLU");
      return true;
#endif
    case BlasImpl::kCuBLAS:
#ifndef MPCAFFE_HAVE_CUDA
      return no("built without the CUDA backend (no CUDA toolkit at build time)");
#else
      if (TargetProfile::Of(device.info()).vendor_blas != VendorBlas::kCuBLAS)
        return no("cuBLAS runs on CUDA devices only");
      if (IsQuantized(desc.type)) return no("mpcaffe uses cuBLAS for fp32 and fp16 GEMMs only");
      if (desc.bias || desc.relu) return no("cuBLAS cannot fuse bias or ReLU");
      if (const std::string problem = CublasLoadProblem(); !problem.empty()) return no(problem);
      return true;
#endif
  }
  return false;
}

BlasImpl ChooseGemmImpl(const Device& device, const GemmDesc& desc) {
  if (const std::string& env = GetSettings().blas; !env.empty() && env != "auto") {
    auto forced = ParseBlasImpl(env);
    if (!forced)
      throw Error("MPCAFFE_BLAS=" + env + ": expected libdnn, clblast, cublas or auto");
    return Available(*forced, device, desc) ? *forced : BlasImpl::kLibDNN;
  }
  if (auto store = cache::ActiveProgramCache()) {
    if (auto rec =
            store->GetTuning(cache::TuningDeviceKey(device.info()), "blas_gemm", desc.ToString())) {
      // "blas_gemm:<library>", as every tuning record is "family:config" (kernel_config.h).
      const auto text = SplitKernelConfig(rec->parameters);
      if (auto impl = text && text->family == "blas_gemm" ? ParseBlasImpl(text->config)
                                                          : std::nullopt;
          impl && Available(*impl, device, desc))
        return *impl;
    }
  }
  return BlasImpl::kLibDNN;
}

BlasGemm::BlasGemm(Device& device, const GemmDesc& desc, const GemmQuant& quant,
                   std::optional<BlasImpl> impl)
    : device_(&device), desc_(desc), impl_(impl ? *impl : ChooseGemmImpl(device, desc)) {
  desc_.Validate();
  std::string why;
  if (!Available(impl_, device, desc_, &why))
    throw Error(std::string("BLAS GEMM ") + desc_.ToString() + ": " + BlasImplName(impl_) +
                " unavailable: " + why);
  if (impl_ == BlasImpl::kLibDNN) libdnn_ = std::make_unique<Gemm>(device, desc_, quant);
}

Event BlasGemm::Run(const GemmArgs& args, Queue* queue) {
  if (libdnn_) return libdnn_->Run(args, queue);
#ifdef MPCAFFE_HAVE_CLBLAST
  if (impl_ == BlasImpl::kCLBlast) {
    if (!args.a || !args.b || !args.c)
      throw Error("BLAS GEMM " + desc_.ToString() + ": A, B and C buffers are required");
    return RunClBlast(*device_, desc_, args, queue);
  }
#endif
#ifdef MPCAFFE_HAVE_CUDA
  if (impl_ == BlasImpl::kCuBLAS) {
    if (!args.a || !args.b || !args.c)
      throw Error("BLAS GEMM " + desc_.ToString() + ": A, B and C buffers are required");
    return RunCublasGemm(*device_, desc_, args, queue);
  }
#endif
  throw Error(std::string("BLAS GEMM ") + desc_.ToString() + ": no runner for " +
              BlasImplName(impl_));
}

}  // namespace mpcaffe::libdnn
