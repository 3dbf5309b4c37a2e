// tests/testing/kernel_families.cc — the kernel-family registry (kernel_families.h) and the
// end-of-suite check that every family a suite generated is registered.
//
// libdnn's families come from the library's own registry (libdnn/kernel_families.cc: a row
// there). To register a family of codegen/, quant/, layers/ or net/: one entry below,
// {"<family>", <lambda returning its samples>}, with a sample per data type (and per distinct
// code path).
#include "tests/testing/kernel_families.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

#include "codegen/elementwise.h"
#include "layers/activation_kernels.h"
#include "layers/layer_kernels.h"
#include "layers/loss_kernels.h"
#include "layers/train_kernels.h"
#include "libdnn/kernel_families.h"
#include "net/moe_layer.h"
#include "quant/quantizer.h"

namespace mpcaffe::testing_families {

namespace {

using Samples = std::vector<Sample>;

using libdnn::PerTypeSamples;
const std::vector<DataType>& kAll = libdnn::AllTypes();
const std::vector<DataType>& kFloats = libdnn::FloatTypes();

std::vector<KernelFamily> Build() {
  std::vector<KernelFamily> f;
  // codegen/elementwise
  f.push_back({"relu", [](const KernelTarget& k) {
                 return PerTypeSamples(
                     kAll, k, [](DataType t) { return ElementwiseKernelName("relu", t); },
                     ReluSource);
               }});
  f.push_back({"scale", [](const KernelTarget& k) {
                 return PerTypeSamples(
                     kAll, k, [](DataType t) { return ElementwiseKernelName("scale", t); },
                     ScaleSource);
               }});
  f.push_back({"axpby", [](const KernelTarget& k) {
                 return PerTypeSamples(
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
                 return PerTypeSamples(kAll, k, quant::PseudoKernelName, quant::PseudoSource);
               }});
  f.push_back({"observe_range", [](const KernelTarget& k) {
                 return Samples{{quant::kObserveRangeKernel, quant::ObserveRangeSource(k)}};
               }});
  // libdnn: its own registry's families (libdnn/kernel_families.h), in its order.
  for (const libdnn::KernelFamilyEntry& entry : libdnn::KernelFamilyRegistry())
    f.push_back({entry.name, entry.samples});
  // layers/layer_kernels: every data type each kernel has.
  f.push_back({"concat", [](const KernelTarget& k) {
                 return PerTypeSamples(
                     kAll, k, [](DataType t) { return LayerKernelName("concat", t); },
                     ConcatSource);
               }});
  // Crop, Tile (every type), Reduction (float types' reduce_; fp32 adds the backward kernels).
  f.push_back({"gather", [](const KernelTarget& k) {
                 return PerTypeSamples(
                     kAll, k, [](DataType t) { return LayerKernelName("gather", t); },
                     GatherSource);
               }});
  std::vector<DataType> unquantized;
  for (DataType t : kAllDataTypes)
    if (!IsQuantized(t)) unquantized.push_back(t);
  // layers/activation_kernels: every row of the family in one program per float type.
  f.push_back({"activation", [unquantized](const KernelTarget& k) {
                 return PerTypeSamples(
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
                 // Quantized data, float factors (a BatchNorm or Scale in an int8 net).
                 for (DataType t : kAllDataTypes)
                   if (IsQuantized(t))
                     s.push_back({ChannelAffineKernelName(t, DataType::kFloat32),
                                  ChannelAffineSource(k, t, DataType::kFloat32)});
                 return s;
               }});
  auto layer = [&f, unquantized](const char* family, const char* kernel,
                                 std::string (*source)(const KernelTarget&, DataType)) {
    f.push_back({family, [unquantized, kernel, source](const KernelTarget& k) {
                   return PerTypeSamples(
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
                 return PerTypeSamples(
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
                 return PerTypeSamples(kFloats, k, MaskedMeanKernelName, MaskedMeanSource);
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
                 return PerTypeSamples(kFloats, k, BatchNormFoldKernelName, BatchNormFoldSource);
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
