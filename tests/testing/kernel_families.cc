// tests/testing/kernel_families.cc — the kernel-family registry (kernel_families.h) and the
// end-of-suite check that every family a suite generated is registered.
//
// To register a family: one entry below, {"<family>", <lambda returning its samples>}, with a
// sample per data type (and per distinct code path: weight signedness, pooling method, …).
#include "tests/testing/kernel_families.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

#include "codegen/elementwise.h"
#include "layers/activation_kernels.h"
#include "layers/layer_kernels.h"
#include "layers/train_kernels.h"
#include "libdnn/conv.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_nd.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_config.h"
#include "libdnn/int4_internal.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "libdnn/pool_stochastic.h"
#include "net/moe_layer.h"
#include "quant/quantizer.h"

namespace mpcaffe::testing_families {

namespace {

using Samples = std::vector<Sample>;

/// A sample per data type of `types`: kernel name and source of `t`.
template <typename Name, typename Source>
Samples PerType(const std::vector<DataType>& types, const KernelTarget& k, Name name,
                Source source) {
  Samples s;
  for (DataType t : types) s.push_back({name(t), source(k, t)});
  return s;
}

const std::vector<DataType> kAll(std::begin(kAllDataTypes), std::end(kAllDataTypes));
const std::vector<DataType> kFloats = {DataType::kFloat32, DataType::kFloat16};

/// The device a target stands for, as the default-configuration choosers want it: a CUDA target
/// with a native dot product (dp4a), or an OpenCL one.
DeviceInfo InfoOf(const KernelTarget& k) {
  DeviceInfo info;
  info.backend = k.backend;
  info.dot_product = k.dot_product;
  return info;
}

std::vector<KernelFamily> Build() {
  std::vector<KernelFamily> f;
  // codegen/elementwise
  f.push_back({"relu", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return ElementwiseKernelName("relu", t); },
                     ReluSource);
               }});
  f.push_back({"scale", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return ElementwiseKernelName("scale", t); },
                     ScaleSource);
               }});
  f.push_back({"axpby", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return ElementwiseKernelName("axpby", t); },
                     AxpbySource);
               }});
  f.push_back({"convert", [](const KernelTarget& k) {
                 Samples s;
                 for (DataType from : kAllDataTypes)
                   for (DataType to : kAllDataTypes)
                     s.push_back({ConvertKernelName(from, to), ConvertSource(k, from, to)});
                 return s;
               }});
  // quant/quantizer
  f.push_back({"pseudo_quant", [](const KernelTarget& k) {
                 return PerType(kAll, k, quant::PseudoKernelName, quant::PseudoSource);
               }});
  f.push_back({"observe_range", [](const KernelTarget& k) {
                 return Samples{{quant::kObserveRangeKernel, quant::ObserveRangeSource(k)}};
               }});
  // libdnn/gemm: outer-product (B rows) and dot-product (matrix × vector) kernels with the fused
  // pipeline, in their default configurations (tests/cuda/candidates_test.cc compiles every
  // tuner candidate).
  f.push_back({"gemm", [](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : kAllDataTypes)
                   for (int n : {48, 1}) {
                     libdnn::GemmDesc d;
                     d.type = d.out_type = t;
                     d.M = 64, d.N = n, d.K = 96, d.bias = true, d.relu = true;
                     d.weights = libdnn::WeightOperand::kA;
                     d.per_channel = IsQuantized(t);
                     s.push_back(
                         {libdnn::Gemm::KernelName(d),
                          libdnn::Gemm::Source(k, d, libdnn::DefaultGemmConfig(InfoOf(k), d))});
                   }
                 return s;
               }});
  // libdnn/gemm_int4: the weight unpack kernel (4-bit weights to int8, both backends) and the
  // native byte-pair kernels (GemmConfig::kU8S4: an outer product and a dot product along K).
  f.push_back({"int4_unpack", [](const KernelTarget& k) {
                 return Samples{{libdnn::int4::UnpackKernelName(), libdnn::int4::UnpackSource(k)}};
               }});
  f.push_back({"gemm_int4", [](const KernelTarget& k) {
                 Samples s;
                 for (bool outer : {true, false}) {
                   libdnn::GemmDesc d;
                   d.type = d.out_type = DataType::kInt8Q;
                   d.weight_bits = 4, d.weights_signed = true, d.weight_zero = false;
                   d.M = 64, d.N = outer ? 64 : 1, d.K = 96, d.bias = true, d.relu = true;
                   d.weights = libdnn::WeightOperand::kA;
                   d.per_channel = true;
                   for (const libdnn::GemmConfig& c : libdnn::GemmCandidates(InfoOf(k), d))
                     if (libdnn::int4::Native(d, c) &&
                         (c.algorithm == libdnn::GemmConfig::Algorithm::kOuter) == outer) {
                       s.push_back({libdnn::Gemm::KernelName(d), libdnn::int4::NativeSource(k, d, c)});
                       break;
                     }
                 }
                 return s;
               }});
  // libdnn/conv: every data type and weight signedness (int8 on a dot-product target: four
  // channels per dp4a, ConvInput::kDot4).
  auto conv_descs = [] {
    std::vector<libdnn::ConvDesc> ds;
    for (DataType t : kAllDataTypes)
      for (bool sw : {false, true}) {
        if (sw && !IsQuantized(t)) continue;
        libdnn::ConvDesc d;
        d.type = t, d.weights_signed = sw;
        ds.push_back(d);
      }
    return ds;
  };
  f.push_back({"conv_forward", [conv_descs](const KernelTarget& k) {
                 Samples s;
                 for (const auto& d : conv_descs())
                   s.push_back({libdnn::Convolution::ForwardKernelName(d),
                                libdnn::Convolution::ForwardSource(
                                    k, d, libdnn::DefaultConvConfig(InfoOf(k), d.type))});
                 return s;
               }});
  f.push_back({"conv_depthwise", [conv_descs](const KernelTarget& k) {
                 Samples s;
                 for (const auto& d : conv_descs())
                   s.push_back({libdnn::Convolution::DepthwiseKernelName(d),
                                libdnn::Convolution::DepthwiseSource(k, d)});
                 return s;
               }});
  f.push_back({"conv_pointwise", [](const KernelTarget& k) {
                 // fp32: the default tile and one with a partial channel block, bias,
                 // residual and ReLU (every branch of the epilogue).
                 libdnn::ConvDesc d;
                 d.channels = 6, d.height = 5, d.width = 7, d.out_channels = 10;
                 libdnn::ConvDesc e = d;
                 e.bias = e.relu = e.residual = true;
                 Samples s{{libdnn::Convolution::PointwiseKernelName(d),
                            libdnn::Convolution::PointwiseSource(
                                k, d, libdnn::Convolution::DefaultPointwiseTile(d))},
                           {libdnn::Convolution::PointwiseKernelName(e),
                            libdnn::Convolution::PointwiseSource(k, e, {3, 3, 4})}};
                 if (k.backend == Backend::kOpenCL) {
                   // int8q (OpenCL text only): the plane form with every epilogue branch, and
                   // the row form of a first layer.
                   libdnn::ConvDesc q = e;
                   q.type = DataType::kInt8Q;
                   q.height = 4;
                   libdnn::ConvDesc r = q;
                   r.channels = 3, r.kernel_h = r.kernel_w = 3, r.stride_h = r.stride_w = 2;
                   r.height = r.width = 17;
                   for (const libdnn::ConvDesc& c : {q, r})
                     s.push_back({libdnn::Convolution::PointwiseKernelName(c),
                                  libdnn::Convolution::PointwiseSource(
                                      k, c, libdnn::Convolution::DefaultPointwiseTile(c))});
                 }
                 return s;
               }});
  f.push_back({"im2col", [](const KernelTarget& k) {
                 return PerType(kAll, k, libdnn::conv_internal::Im2colKernelName,
                                libdnn::conv_internal::Im2colSource);
               }});
  f.push_back({"conv_backward", [](const KernelTarget& k) {
                 return Samples{{"conv_bwd_col2im", libdnn::Convolution::BackwardSource(k)}};
               }});
  f.push_back({"conv_nd", [](const KernelTarget& k) {
                 return Samples{{"conv_nd_col2im", libdnn::ConvolutionNd::Source(k)}};
               }});
  // libdnn/pool, lrn
  f.push_back({"pool_forward", [](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : kAllDataTypes)
                   for (auto m : {libdnn::PoolMethod::kMax, libdnn::PoolMethod::kAverage})
                     s.push_back({libdnn::Pooling::ForwardKernelName(t, m),
                                  libdnn::Pooling::ForwardSource(k, t, m)});
                 return s;
               }});
  f.push_back({"pool_backward", [](const KernelTarget& k) {
                 Samples s;
                 for (auto m : {libdnn::PoolMethod::kMax, libdnn::PoolMethod::kAverage})
                   s.push_back({libdnn::Pooling::BackwardKernelName(m),
                                libdnn::Pooling::BackwardSource(k, m)});
                 return s;
               }});
  // Float types' forward kernels; fp32's program also carries the backward kernel.
  f.push_back({"pool_stochastic", [](const KernelTarget& k) {
                 return PerType(kFloats, k, libdnn::StochasticPooling::TrainKernelName,
                                libdnn::StochasticPooling::Source);
               }});
  f.push_back(
      {"lrn_forward", [](const KernelTarget& k) {
         Samples s;
         for (DataType t : kFloats)
           s.push_back({libdnn::Lrn::ForwardKernelName(t), libdnn::Lrn::ForwardSource(k, t)});
         return s;
       }});
  f.push_back(
      {"lrn_backward", [](const KernelTarget& k) {
         return Samples{{libdnn::Lrn::BackwardKernelName(), libdnn::Lrn::BackwardSource(k)}};
       }});
  // layers/layer_kernels: every data type each kernel has.
  f.push_back({"concat", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return LayerKernelName("concat", t); },
                     ConcatSource);
               }});
  // Crop, Tile (every type), Reduction (float types' reduce_; fp32 adds the backward kernels).
  f.push_back({"gather", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return LayerKernelName("gather", t); },
                     GatherSource);
               }});
  std::vector<DataType> unquantized;
  for (DataType t : kAllDataTypes)
    if (!IsQuantized(t)) unquantized.push_back(t);
  // layers/activation_kernels: every row of the family in one program per float type.
  f.push_back({"activation", [unquantized](const KernelTarget& k) {
                 return PerType(
                     unquantized, k, [](DataType t) { return ActivationKernelName("prelu", t); },
                     ActivationSource);
               }});
  f.push_back({"eltwise", [unquantized](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : unquantized)
                   for (const char* op : {"prod", "max"})
                     s.push_back({LayerKernelName(std::string("eltwise_") + op, t),
                                  EltwiseSource(k, op, t)});
                 return s;
               }});
  f.push_back({"channel_affine", [unquantized](const KernelTarget& k) {
                 Samples s;
                 for (DataType t : unquantized)
                   for (DataType pt : kFloats)
                     s.push_back({ChannelAffineKernelName(t, pt), ChannelAffineSource(k, t, pt)});
                 return s;
               }});
  auto layer = [&f, unquantized](const char* family, const char* kernel,
                                 std::string (*source)(const KernelTarget&, DataType)) {
    f.push_back({family, [unquantized, kernel, source](const KernelTarget& k) {
                   return PerType(
                       unquantized, k, [kernel](DataType t) { return LayerKernelName(kernel, t); },
                       source);
                 }});
  };
  layer("softmax", "softmax", SoftmaxSource);
  layer("lrn_within", "lrn_within", LrnWithinChannelSource);
  layer("dropout", "dropout", DropoutSource);
  layer("softmax_loss", "softmax_loss", SoftmaxLossSource);
  layer("accuracy", "accuracy", AccuracySource);
  layer("sigmoid_cross_entropy", "sigmoid_ce", SigmoidCrossEntropySource);
  layer("squared_difference", "sqdiff", SquaredDifferenceSource);
  layer("hinge_loss", "hinge", HingeLossSource);
  layer("multinomial_logistic_loss", "multinomial_logistic", MultinomialLogisticLossSource);
  layer("contrastive_loss", "contrastive", ContrastiveLossSource);
  layer("infogain_loss", "infogain", InfogainLossSource);
  layer("lstm_unit", "lstm_unit", LstmUnitSource);  // fp32 also carries the backward pass
  // net/moe_layer: gather / scatter-add per data type (fp32 also carries the training kernels).
  f.push_back({"moe", [](const KernelTarget& k) {
                 return PerType(
                     kAll, k, [](DataType t) { return MoeKernelName("gather", t); }, MoeSource);
               }});
  // layers/train_kernels: fp32 backward passes, reductions, solver updates.
  auto one = [&f](const char* family, const char* kernel,
                  std::string (*source)(const KernelTarget&)) {
    f.push_back({family, [kernel, source](const KernelTarget& k) {
                   return Samples{{kernel, source(k)}};
                 }});
  };
  one("relu_backward", "relu_backward", ReluBackwardSource);
  one("activation_backward", "prelu_backward", ActivationBackwardSource);
  one("softmax_backward", "softmax_backward", SoftmaxBackwardSource);
  one("softmax_loss_backward", "softmax_loss_backward", SoftmaxLossBackwardSource);
  f.push_back({"masked_mean", [](const KernelTarget& k) {
                 return PerType(kFloats, k, MaskedMeanKernelName, MaskedMeanSource);
               }});
  one("euclidean_backward", "euclidean_backward", EuclideanBackwardSource);
  one("sigmoid_cross_entropy_backward", "sigmoid_ce_backward", SigmoidCrossEntropyBackwardSource);
  one("hinge_loss_backward", "hinge_backward", HingeLossBackwardSource);
  one("multinomial_logistic_loss_backward", "multinomial_logistic_backward",
      MultinomialLogisticLossBackwardSource);
  one("contrastive_loss_backward", "contrastive_backward", ContrastiveLossBackwardSource);
  one("infogain_loss_backward", "infogain_backward", InfogainLossBackwardSource);
  one("concat_backward", "concat_backward", ConcatBackwardSource);
  one("lrn_within_backward", "lrn_within_backward", LrnWithinChannelBackwardSource);
  one("eltwise_max_backward", "max_select", EltwiseMaxBackwardSource);
  one("eltwise_prod_backward", "prod_quotient", EltwiseProdBackwardSource);
  one("channel_sum", "channel_sum", ChannelSumSource);
  one("batch_norm", "bn_backward", BatchNormSource);
  f.push_back({"batch_norm_fold", [](const KernelTarget& k) {
                 return PerType(kFloats, k, BatchNormFoldKernelName, BatchNormFoldSource);
               }});
  one("solver_common", "clip_scale", SolverCommonSource);
  f.push_back(
      {"solver_update", [](const KernelTarget& k) {
         Samples s;
         for (const char* rule : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"})
           s.push_back({SolverUpdateKernelName(rule), SolverUpdateSource(k, rule)});
         return s;
       }});
  return f;
}

/// At the end of every suite: each family this process generated a program of is registered.
class RegisteredFamiliesCheck : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& family : UnregisteredFamilies(KernelWriter::GeneratedFamilies()))
      ADD_FAILURE()
          << "kernel family \"" << family
          << "\" was generated but is not registered: add its CUDA enumerator to "
             "tests/testing/kernel_families.cc (docs/ARCHITECTURE.md, \"Kernel families\")";
  }
};

const bool kCheckRegistered = [] {
  ::testing::AddGlobalTestEnvironment(new RegisteredFamiliesCheck);
  return true;
}();

}  // namespace

const std::vector<KernelFamily>& KernelFamilies() {
  static const std::vector<KernelFamily> families = Build();
  return families;
}

const KernelFamily* FindKernelFamily(const std::string& name) {
  for (const KernelFamily& f : KernelFamilies())
    if (name == f.name) return &f;
  return nullptr;
}

bool IsTestFamily(const std::string& name) { return name.rfind("test_", 0) == 0; }

std::vector<std::string> UnregisteredFamilies(const std::vector<std::string>& families) {
  std::vector<std::string> missing;
  for (const std::string& family : families)
    if (!IsTestFamily(family) && !FindKernelFamily(family)) missing.push_back(family);
  return missing;
}

}  // namespace mpcaffe::testing_families
