// tests/cuda/generated_kernels_test.cc — CUDA honesty: the CUDA text of every generated kernel,
// every data type, compiles with NVRTC to PTX (oldest supported virtual arch) and to cubin
// for sm_80 and sm_90, with no GPU needed. Prints the compile count and time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/kernel_writer.h"
#include "layers/layer_kernels.h"
#include "net/moe_layer.h"
#include "layers/train_kernels.h"
#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#endif
#include "quant/quantizer.h"

namespace mpcaffe {
namespace {

#ifdef MPCAFFE_HAVE_CUDA

struct Generated {
  std::string name;
  std::function<std::string(const KernelTarget&)> make;
};

/// Every kernel text the library generates so far, for every data type.
std::vector<Generated> AllGenerated() {
  std::vector<Generated> all;
  for (DataType t : kAllDataTypes) {
    all.push_back({ElementwiseKernelName("relu", t), [t](const KernelTarget& k) { return ReluSource(k, t); }});
    all.push_back({ElementwiseKernelName("scale", t), [t](const KernelTarget& k) { return ScaleSource(k, t); }});
    all.push_back({ElementwiseKernelName("axpby", t), [t](const KernelTarget& k) { return AxpbySource(k, t); }});
    for (DataType to : kAllDataTypes)
      all.push_back({ConvertKernelName(t, to),
                     [t, to](const KernelTarget& k) { return ConvertSource(k, t, to); }});
    all.push_back({quant::PseudoKernelName(t),
                   [t](const KernelTarget& k) { return quant::PseudoSource(k, t); }});
  }
  all.push_back({quant::kObserveRangeKernel, [](const KernelTarget& k) { return quant::ObserveRangeSource(k); }});
  // libdnn/gemm: every data type, outer-product (B rows) and dot-product (matrix × vector)
  // kernels with the fused pipeline, in their default CUDA configurations.
  for (DataType t : kAllDataTypes)
    for (int n : {48, 1}) {
      libdnn::GemmDesc d;
      d.type = d.out_type = t;
      d.M = 64, d.N = n, d.K = 96, d.bias = true, d.relu = true;
      d.weights = libdnn::WeightOperand::kA;
      d.per_channel = IsQuantized(t);
      all.push_back({libdnn::Gemm::KernelName(d), [d](const KernelTarget& k) {
                       DeviceInfo info;
                       info.backend = k.backend;
                       return libdnn::Gemm::Source(k, d, libdnn::DefaultGemmConfig(info, d));
                     }});
    }
  // layers/layer_kernels: every data type each kernel has.
  for (DataType t : kAllDataTypes) {
    all.push_back({LayerKernelName("concat", t), [t](const KernelTarget& k) { return ConcatSource(k, t); }});
    if (IsQuantized(t)) continue;
    for (const char* op : {"sigmoid", "tanh"})
      all.push_back({LayerKernelName(op, t), [t, op](const KernelTarget& k) { return UnarySource(k, op, t); }});
    for (const char* op : {"prod", "max"})
      all.push_back({LayerKernelName(std::string("eltwise_") + op, t),
                     [t, op](const KernelTarget& k) { return EltwiseSource(k, op, t); }});
    for (DataType pt : {DataType::kFloat32, DataType::kFloat16})
      all.push_back({ChannelAffineKernelName(t, pt),
                     [t, pt](const KernelTarget& k) { return ChannelAffineSource(k, t, pt); }});
    all.push_back({LayerKernelName("softmax", t), [t](const KernelTarget& k) { return SoftmaxSource(k, t); }});
    all.push_back({LayerKernelName("dropout", t), [t](const KernelTarget& k) { return DropoutSource(k, t); }});
    all.push_back({LayerKernelName("softmax_loss", t), [t](const KernelTarget& k) { return SoftmaxLossSource(k, t); }});
    all.push_back({LayerKernelName("accuracy", t), [t](const KernelTarget& k) { return AccuracySource(k, t); }});
    all.push_back({LayerKernelName("sqdiff", t), [t](const KernelTarget& k) { return SquaredDifferenceSource(k, t); }});
  }
  // libdnn/conv, pool, lrn: every data type, weight signedness and pooling method.
  for (DataType t : kAllDataTypes) {
    for (bool sw : {false, true}) {
      if (sw && !IsQuantized(t)) continue;
      libdnn::ConvDesc d;
      d.type = t, d.weights_signed = sw;
      DeviceInfo cuda_info;
      cuda_info.backend = Backend::kCuda;
      cuda_info.dot_product = true;  // int8: four channels per dp4a (ConvInput::kDot4)
      all.push_back(
          {libdnn::Convolution::ForwardKernelName(d), [d, cuda_info](const KernelTarget& k) {
             return libdnn::Convolution::ForwardSource(
                 k, d, libdnn::DefaultConvConfig(cuda_info, d.type));
           }});
      all.push_back({libdnn::Convolution::DepthwiseKernelName(d), [d](const KernelTarget& k) {
                       return libdnn::Convolution::DepthwiseSource(k, d);
                     }});
    }
    for (libdnn::PoolMethod m : {libdnn::PoolMethod::kMax, libdnn::PoolMethod::kAverage})
      all.push_back({libdnn::Pooling::ForwardKernelName(t, m),
                     [t, m](const KernelTarget& k) { return libdnn::Pooling::ForwardSource(k, t, m); }});
  }
  all.push_back({"conv_bwd", [](const KernelTarget& k) { return libdnn::Convolution::BackwardSource(k); }});
  for (libdnn::PoolMethod m : {libdnn::PoolMethod::kMax, libdnn::PoolMethod::kAverage})
    all.push_back({libdnn::Pooling::BackwardKernelName(m),
                   [m](const KernelTarget& k) { return libdnn::Pooling::BackwardSource(k, m); }});
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    all.push_back({libdnn::Lrn::ForwardKernelName(t), [t](const KernelTarget& k) { return libdnn::Lrn::ForwardSource(k, t); }});
  all.push_back({libdnn::Lrn::BackwardKernelName(), [](const KernelTarget& k) { return libdnn::Lrn::BackwardSource(k); }});
  // net/moe_layer: gather / scatter-add per data type (fp32 also carries the training kernels).
  for (DataType t : kAllDataTypes)
    all.push_back({MoeKernelName("gather", t), [t](const KernelTarget& k) { return MoeSource(k, t); }});
  // layers/train_kernels: fp32 backward passes, reductions, solver updates (one entry per
  // program, named by one of its kernels).
  all.push_back({"relu_backward", [](const KernelTarget& k) { return ReluBackwardSource(k); }});
  for (const char* op : {"sigmoid", "tanh"})
    all.push_back({std::string(op) + "_backward", [op](const KernelTarget& k) { return UnaryBackwardSource(k, op); }});
  all.push_back({"softmax_backward", [](const KernelTarget& k) { return SoftmaxBackwardSource(k); }});
  all.push_back({"softmax_loss_backward", [](const KernelTarget& k) { return SoftmaxLossBackwardSource(k); }});
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    all.push_back({MaskedMeanKernelName(t), [t](const KernelTarget& k) { return MaskedMeanSource(k, t); }});
  all.push_back({"euclidean_backward", [](const KernelTarget& k) { return EuclideanBackwardSource(k); }});
  all.push_back({"concat_backward", [](const KernelTarget& k) { return ConcatBackwardSource(k); }});
  all.push_back({"max_select", [](const KernelTarget& k) { return EltwiseMaxBackwardSource(k); }});
  all.push_back({"channel_sum", [](const KernelTarget& k) { return ChannelSumSource(k); }});
  all.push_back({"bn_backward", [](const KernelTarget& k) { return BatchNormSource(k); }});
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    all.push_back({BatchNormFoldKernelName(t), [t](const KernelTarget& k) { return BatchNormFoldSource(k, t); }});
  all.push_back({"clip_scale", [](const KernelTarget& k) { return SolverCommonSource(k); }});
  for (const char* rule : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"})
    all.push_back({SolverUpdateKernelName(rule), [rule](const KernelTarget& k) { return SolverUpdateSource(k, rule); }});
  return all;
}

/// "compute_75" → 75.
int ComputeCapability(const std::string& arch) { return std::stoi(arch.substr(arch.find('_') + 1)); }

TEST(NvrtcAllKernels, EveryGeneratedKernelCompilesForEveryArch) {
  const std::vector<std::string> archs = {cuda::OldestPtxArch(), "sm_80", "sm_90"};
  const auto start = std::chrono::steady_clock::now();
  int compiles = 0;
  for (const auto& arch : archs) {
    const KernelTarget target = KernelTarget::Cuda(ComputeCapability(arch));
    for (const auto& g : AllGenerated()) {
      const std::string source = g.make(target);
      try {
        cuda::NvrtcOutput out = cuda::CompileCuda(source, arch, {}, g.name + ".cu");
        ++compiles;
        if (arch.rfind("compute_", 0) == 0) {
          EXPECT_NE(out.ptx.find(".entry " + g.name), std::string::npos) << g.name << " " << arch;
        } else {
          EXPECT_FALSE(out.cubin.empty()) << g.name << " " << arch;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << g.name << " for " << arch << " failed:\n" << e.what();
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("NVRTC: %d compiles (%zu kernels x %zu archs: %s, sm_80, sm_90) in %.1f s\n", compiles,
              AllGenerated().size(), archs.size(), archs[0].c_str(), seconds);
}

TEST(NvrtcAllKernels, Dot4UsesTheDp4aInstructionOnSm61AndLater) {
  KernelWriter w(KernelTarget::Cuda(80));
  w.UseHelper(KernelHelper::kDot4);
  w.Kernel("dot4").In("mp_u32", "a").In("mp_u32", "b").Out("int", "c").Body(R"(  int i = $global_id(0);
  c[i] = mp_dot4_u8s8(a[i], b[i], mp_dot4_s8s8(a[i], b[i], mp_dot4_u8u8(a[i], b[i], 0)));
)");
  cuda::NvrtcOutput out = cuda::CompileCuda(w.Source(), "compute_80");
  EXPECT_NE(out.ptx.find("dp4a.u32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.s32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.u32.u32"), std::string::npos) << out.ptx;
}

#else
TEST(NvrtcAllKernels, Skipped) { GTEST_SKIP() << "CUDA toolkit not found at build time: no NVRTC"; }
#endif

}  // namespace
}  // namespace mpcaffe
