// libdnn/kernel_families.cc — the registry of libdnn's kernel families (kernel_families.h): a
// row per family with its choice names and its sample program texts.
#include "libdnn/kernel_families.h"

#include <iterator>

#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_nd.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/int4_internal.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "libdnn/pool_stochastic.h"

namespace mpcaffe::libdnn {

namespace {

using Samples = std::vector<KernelSample>;
/// The device a target stands for, as the default-configuration choosers want it: a native dot
/// product (dp4a) where the target has one, the backend's scheduling otherwise.
DeviceInfo InfoOf(const KernelTarget& k) {
  DeviceInfo info;
  info.backend = k.backend;
  info.dot_product = k.dot_product;
  return info;
}

/// Every data type and weight signedness (int8 on a dot-product target: four channels per dp4a,
/// ConvInput::kDot4).
std::vector<ConvDesc> ConvDescs() {
  std::vector<ConvDesc> ds;
  for (DataType t : kAllDataTypes)
    for (bool sw : {false, true}) {
      if (sw && !IsQuantized(t)) continue;
      ConvDesc d;
      d.type = t, d.weights_signed = sw;
      ds.push_back(d);
    }
  return ds;
}

std::vector<KernelFamilyEntry> Build() {
  std::vector<KernelFamilyEntry> f;
  // GEMM: outer-product (B rows) and dot-product (matrix × vector) kernels with the fused
  // pipeline, in their default configurations (tests/cuda/candidates_test.cc compiles every
  // tuner candidate).
  f.push_back({"gemm", {{"gemm", true}}, [](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : kAllDataTypes)
                   for (int n : {48, 1}) {
                     GemmDesc d;
                     d.type = d.out_type = t;
                     d.M = 64, d.N = n, d.K = 96, d.bias = true, d.relu = true;
                     d.weights = WeightOperand::kA;
                     d.per_channel = IsQuantized(t);
                     s.push_back({Gemm::KernelName(d),
                                  Gemm::Source(k, d, DefaultGemmConfig(InfoOf(k), d))});
                   }
                 return s;
               }});
  // The 4-bit weight unpack kernel (both backends) and the native byte-pair kernels
  // (GemmConfig::kU8S4: an outer product and a dot product along K), chosen as "gemm" configs.
  f.push_back({"int4_unpack", {}, [](const KernelTarget& k) {
                 return Samples{{int4::UnpackKernelName(), int4::UnpackSource(k)}};
               }});
  f.push_back({"gemm_int4", {}, [](const KernelTarget& k) {
                 Samples s;
                 for (bool outer : {true, false}) {
                   GemmDesc d;
                   d.type = d.out_type = DataType::kInt8Q;
                   d.weight_bits = 4, d.weights_signed = true, d.weight_zero = false;
                   d.M = 64, d.N = outer ? 64 : 1, d.K = 96, d.bias = true, d.relu = true;
                   d.weights = WeightOperand::kA;
                   d.per_channel = true;
                   for (const GemmConfig& c : GemmCandidates(InfoOf(k), d))
                     if (int4::Native(d, c) &&
                         (c.algorithm == GemmConfig::Algorithm::kOuter) == outer) {
                       s.push_back({Gemm::KernelName(d), int4::NativeSource(k, d, c)});
                       break;
                     }
                 }
                 return s;
               }});
  // The convolution's forward families (conv_families.h), in their default configurations.
  f.push_back({"conv_forward", {{"conv", true}}, [](const KernelTarget& k) {
                 Samples s;
                 for (const auto& d : ConvDescs())
                   s.push_back(
                       {Convolution::ForwardKernelName(d),
                        Convolution::ForwardSource(k, d, DefaultConvConfig(InfoOf(k), d.type))});
                 return s;
               }});
  f.push_back(
      {"conv_depthwise", {{"conv_dw", true}}, [](const KernelTarget& k) {
         Samples s;
         for (const auto& d : ConvDescs())
           s.push_back({Convolution::DepthwiseKernelName(d), Convolution::DepthwiseSource(k, d)});
         return s;
       }});
  f.push_back(
      {"conv_pointwise", {{"conv_pw", true}}, [](const KernelTarget& k) {
         // fp32: the default tile and one with a partial channel block, bias,
         // residual and ReLU (every branch of the epilogue).
         ConvDesc d;
         d.channels = 6, d.height = 5, d.width = 7, d.out_channels = 10;
         ConvDesc e = d;
         e.bias = e.relu = e.residual = true;
         Samples s{
             {Convolution::PointwiseKernelName(d),
              Convolution::PointwiseSource(k, d, Convolution::DefaultPointwiseTile(d))},
             {Convolution::PointwiseKernelName(e), Convolution::PointwiseSource(k, e, {3, 3, 4})}};
         if (k.vector_builtins) {
           // int8q (vector dialects only): the plane form with every epilogue branch,
           // and the row form of a first layer.
           ConvDesc q = e;
           q.type = DataType::kInt8Q;
           q.height = 4;
           ConvDesc r = q;
           r.channels = 3, r.kernel_h = r.kernel_w = 3, r.stride_h = r.stride_w = 2;
           r.height = r.width = 17;
           for (const ConvDesc& c : {q, r})
             s.push_back(
                 {Convolution::PointwiseKernelName(c),
                  Convolution::PointwiseSource(k, c, Convolution::DefaultPointwiseTile(c))});
         }
         return s;
       }});
  // im2col + GEMM ("conv_gemm"): the im2col kernel of every type (the GEMM is gemm's).
  f.push_back({"im2col", {{"conv_gemm"}}, [](const KernelTarget& k) {
                 return PerTypeSamples(AllTypes(), k, conv_internal::Im2colKernelName,
                                       conv_internal::Im2colSource);
               }});
  f.push_back({"conv_backward", {}, [](const KernelTarget& k) {
                 return Samples{{"conv_bwd_col2im", Convolution::BackwardSource(k)}};
               }});
  f.push_back({"conv_nd", {}, [](const KernelTarget& k) {
                 return Samples{{"conv_nd_col2im", ConvolutionNd::Source(k)}};
               }});
  // Pooling ("pool_vector_max": the max kernel's vector form, in the same program).
  f.push_back(
      {"pool_forward", {{"pool"}, {"pool_vector_max"}}, [](const KernelTarget& k) {
         Samples s;
         for (DataType t : kAllDataTypes)
           for (auto m : {PoolMethod::kMax, PoolMethod::kAverage})
             s.push_back({Pooling::ForwardKernelName(t, m), Pooling::ForwardSource(k, t, m)});
         return s;
       }});
  f.push_back({"pool_backward", {}, [](const KernelTarget& k) {
                 Samples s;
                 for (auto m : {PoolMethod::kMax, PoolMethod::kAverage})
                   s.push_back({Pooling::BackwardKernelName(m), Pooling::BackwardSource(k, m)});
                 return s;
               }});
  // Float types' forward kernels; fp32's program also carries the backward kernel.
  f.push_back({"pool_stochastic", {}, [](const KernelTarget& k) {
                 return PerTypeSamples(FloatTypes(), k, StochasticPooling::TrainKernelName,
                                       StochasticPooling::Source);
               }});
  f.push_back({"lrn_forward", {{"lrn"}, {"lrn_vector"}}, [](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : FloatTypes())
                   s.push_back({Lrn::ForwardKernelName(t), Lrn::ForwardSource(k, t)});
                 return s;
               }});
  f.push_back({"lrn_backward", {}, [](const KernelTarget& k) {
                 return Samples{{Lrn::BackwardKernelName(), Lrn::BackwardSource(k)}};
               }});
  return f;
}

}  // namespace

const std::vector<DataType>& AllTypes() {
  static const std::vector<DataType> types(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  return types;
}

const std::vector<DataType>& FloatTypes() {
  static const std::vector<DataType> types = {DataType::kFloat32, DataType::kFloat16};
  return types;
}

const std::vector<KernelFamilyEntry>& KernelFamilyRegistry() {
  static const std::vector<KernelFamilyEntry> families = Build();
  return families;
}

}  // namespace mpcaffe::libdnn
