// tests/proto/upgrade_test.cc — old Caffe formats (V0 and V1 layers, net inputs, data-layer
// transformation fields, BatchNorm specs, solver_type) upgrade to the current format as in BVLC.
#include "proto/upgrade.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "proto/model_io.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

fs::path SharedDir() { return mpcaffe::test_support::SharedDir(); }

caffe::NetParameter ParseNet(const std::string& text) {
  caffe::NetParameter net;
  ParseProtoFromText(text, "<test>", &net);
  return net;
}

caffe::NetParameter Upgraded(const std::string& text) {
  caffe::NetParameter net = ParseNet(text);
  UpgradeNetAsNeeded("<test>", &net);
  return net;
}

std::string Diff(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  std::string report;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  return differencer.Compare(a, b) ? "" : report;
}

template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const ModelFileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ModelFileError";
  return "";
}

// BVLC's examples/mnist/lenet_train_test.prototxt as it was written in 2014 (V1 `layers`, enum
// types, blobs_lr, scale in data_param).
const char kLeNetV1[] = R"(
name: "LeNet"
layers {
  name: "mnist"
  type: DATA
  top: "data"
  top: "label"
  data_param {
    source: "examples/mnist/mnist_train_lmdb"
    backend: LMDB
    batch_size: 64
    scale: 0.00390625
  }
  include: { phase: TRAIN }
}
layers {
  name: "mnist"
  type: DATA
  top: "data"
  top: "label"
  data_param {
    source: "examples/mnist/mnist_test_lmdb"
    backend: LMDB
    batch_size: 100
    scale: 0.00390625
  }
  include: { phase: TEST }
}
layers {
  name: "conv1"
  type: CONVOLUTION
  bottom: "data"
  top: "conv1"
  blobs_lr: 1
  blobs_lr: 2
  convolution_param {
    num_output: 20
    kernel_size: 5
    stride: 1
    weight_filler { type: "xavier" }
    bias_filler { type: "constant" }
  }
}
layers {
  name: "pool1"
  type: POOLING
  bottom: "conv1"
  top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
layers {
  name: "conv2"
  type: CONVOLUTION
  bottom: "pool1"
  top: "conv2"
  blobs_lr: 1
  blobs_lr: 2
  convolution_param {
    num_output: 50
    kernel_size: 5
    stride: 1
    weight_filler { type: "xavier" }
    bias_filler { type: "constant" }
  }
}
layers {
  name: "pool2"
  type: POOLING
  bottom: "conv2"
  top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
layers {
  name: "ip1"
  type: INNER_PRODUCT
  bottom: "pool2"
  top: "ip1"
  blobs_lr: 1
  blobs_lr: 2
  inner_product_param {
    num_output: 500
    weight_filler { type: "xavier" }
    bias_filler { type: "constant" }
  }
}
layers {
  name: "relu1"
  type: RELU
  bottom: "ip1"
  top: "ip1"
}
layers {
  name: "ip2"
  type: INNER_PRODUCT
  bottom: "ip1"
  top: "ip2"
  blobs_lr: 1
  blobs_lr: 2
  inner_product_param {
    num_output: 10
    weight_filler { type: "xavier" }
    bias_filler { type: "constant" }
  }
}
layers {
  name: "accuracy"
  type: ACCURACY
  bottom: "ip2"
  bottom: "label"
  top: "accuracy"
  include: { phase: TEST }
}
layers {
  name: "loss"
  type: SOFTMAX_LOSS
  bottom: "ip2"
  bottom: "label"
  top: "loss"
}
)";

TEST(Upgrade, V1LeNetMatchesModernLeNet) {
  caffe::NetParameter v1 = ParseNet(kLeNetV1);
  ASSERT_TRUE(NetNeedsUpgrade(v1));
  EXPECT_TRUE(UpgradeNetAsNeeded("lenet_v1", &v1));
  EXPECT_FALSE(NetNeedsUpgrade(v1));
  const caffe::NetParameter modern =
      ReadNetParameterText(SharedDir() / "models/bvlc/mnist/lenet_train_test.prototxt");
  EXPECT_EQ(Diff(modern, v1), "");
  // Upgrading again changes nothing.
  caffe::NetParameter again = v1;
  EXPECT_FALSE(UpgradeNetAsNeeded("lenet_v1", &again));
  EXPECT_EQ(Diff(v1, again), "");
}

TEST(Upgrade, V1ParamSpecsBlobsAndOtherFields) {
  caffe::NetParameter net = Upgraded(R"(
    layers {
      name: "c" type: CONVOLUTION bottom: "x" top: "y"
      param: "shared_w" param: "shared_b"
      blob_share_mode: PERMISSIVE
      blobs_lr: 0.5 weight_decay: 3 weight_decay: 0
      loss_weight: 2
      exclude { stage: "deploy" }
      blobs { num: 1 channels: 1 height: 1 width: 2 data: 1 data: 2 }
      convolution_param { num_output: 4 kernel_size: 3 }
    }
    layers { name: "s" type: SOFTMAX_LOSS bottom: "y" bottom: "l" top: "loss"
             loss_param { ignore_label: 255 } }
    layers { name: "a" type: ABSVAL bottom: "y" top: "z" }
    layers { name: "d" type: DECONVOLUTION bottom: "z" top: "w" }
  )");
  ASSERT_EQ(net.layer_size(), 4);
  const caffe::LayerParameter& c = net.layer(0);
  EXPECT_EQ(c.type(), "Convolution");
  ASSERT_EQ(c.param_size(), 2);
  EXPECT_EQ(c.param(0).name(), "shared_w");
  EXPECT_EQ(c.param(0).share_mode(), caffe::ParamSpec::PERMISSIVE);
  EXPECT_EQ(c.param(0).lr_mult(), 0.5f);
  EXPECT_EQ(c.param(0).decay_mult(), 3.f);
  EXPECT_EQ(c.param(1).name(), "shared_b");
  EXPECT_FALSE(c.param(1).has_lr_mult());
  EXPECT_EQ(c.param(1).decay_mult(), 0.f);
  ASSERT_EQ(c.loss_weight_size(), 1);
  EXPECT_EQ(c.exclude(0).stage(0), "deploy");
  ASSERT_EQ(c.blobs_size(), 1);
  EXPECT_EQ(c.blobs(0).data(1), 2.f);
  EXPECT_EQ(c.convolution_param().num_output(), 4u);
  EXPECT_EQ(net.layer(1).type(), "SoftmaxWithLoss");
  EXPECT_EQ(net.layer(1).loss_param().ignore_label(), 255);
  EXPECT_EQ(net.layer(2).type(), "AbsVal");
  EXPECT_EQ(net.layer(3).type(), "Deconvolution");
}

TEST(Upgrade, EveryV1TypeHasAName) {
  const auto* type_enum = caffe::V1LayerParameter::LayerType_descriptor();
  for (int i = 0; i < type_enum->value_count(); ++i) {
    auto type = static_cast<caffe::V1LayerParameter::LayerType>(type_enum->value(i)->number());
    if (type == caffe::V1LayerParameter::NONE) {
      EXPECT_EQ(V1LayerTypeName(type), "");
    } else {
      EXPECT_FALSE(V1LayerTypeName(type).empty()) << type_enum->value(i)->name();
    }
  }
}

TEST(Upgrade, V0NetWithPaddingLayer) {
  caffe::NetParameter net = Upgraded(R"(
    name: "v0"
    input: "data"
    input_dim: 10 input_dim: 3 input_dim: 32 input_dim: 32
    layers { layer { name: "pad1" type: "padding" pad: 2 } bottom: "data" top: "pad1" }
    layers {
      layer { name: "conv1" type: "conv" num_output: 16 kernelsize: 5 stride: 1 biasterm: false
              weight_filler { type: "gaussian" std: 0.01 } blobs_lr: 1 weight_decay: 1 }
      bottom: "pad1" top: "conv1"
    }
    layers { layer { name: "pool1" type: "pool" pool: AVE kernelsize: 3 stride: 2 }
             bottom: "conv1" top: "pool1" }
    layers { layer { name: "norm1" type: "lrn" local_size: 3 alpha: 5e-05 beta: 0.75 }
             bottom: "pool1" top: "norm1" }
    layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.25 }
             bottom: "norm1" top: "norm1" }
    layers { layer { name: "ip" type: "innerproduct" num_output: 10 }
             bottom: "norm1" top: "ip" }
    layers { layer { name: "prob" type: "softmax" } bottom: "ip" top: "prob" }
  )");
  EXPECT_EQ(net.layers_size(), 0);
  ASSERT_EQ(net.layer_size(), 7);  // Input + 6 (padding folded away)
  EXPECT_EQ(net.layer(0).type(), "Input");
  EXPECT_EQ(net.layer(0).top(0), "data");
  const caffe::LayerParameter& conv = net.layer(1);
  EXPECT_EQ(conv.type(), "Convolution");
  EXPECT_EQ(conv.bottom(0), "data");
  const caffe::ConvolutionParameter& cp = conv.convolution_param();
  EXPECT_EQ(cp.num_output(), 16u);
  ASSERT_EQ(cp.pad_size(), 1);
  EXPECT_EQ(cp.pad(0), 2u);
  EXPECT_EQ(cp.kernel_size(0), 5u);
  EXPECT_FALSE(cp.bias_term());
  EXPECT_EQ(cp.weight_filler().type(), "gaussian");
  EXPECT_EQ(conv.param(0).lr_mult(), 1.f);
  EXPECT_FALSE(conv.has_pooling_param());
  EXPECT_FALSE(conv.has_inner_product_param());
  const caffe::PoolingParameter& pp = net.layer(2).pooling_param();
  EXPECT_EQ(pp.pool(), caffe::PoolingParameter::AVE);
  EXPECT_EQ(pp.kernel_size(), 3u);
  EXPECT_EQ(pp.stride(), 2u);
  EXPECT_EQ(net.layer(3).type(), "LRN");
  EXPECT_EQ(net.layer(3).lrn_param().local_size(), 3u);
  EXPECT_EQ(net.layer(4).dropout_param().dropout_ratio(), 0.25f);
  EXPECT_EQ(net.layer(5).inner_product_param().num_output(), 10u);
  EXPECT_EQ(net.layer(6).type(), "Softmax");
}

TEST(Upgrade, V0DataLayerFieldsEndInTransformParam) {
  caffe::NetParameter net = Upgraded(R"(
    layers { layer { name: "d" type: "data" source: "db" batchsize: 32 meanfile: "m.binaryproto"
                     cropsize: 227 mirror: true scale: 0.5 rand_skip: 3 }
             top: "data" top: "label" }
  )");
  ASSERT_EQ(net.layer_size(), 1);
  const caffe::LayerParameter& d = net.layer(0);
  EXPECT_EQ(d.type(), "Data");
  EXPECT_EQ(d.data_param().source(), "db");
  EXPECT_EQ(d.data_param().batch_size(), 32u);
  EXPECT_EQ(d.data_param().rand_skip(), 3u);
  EXPECT_FALSE(d.data_param().has_mean_file());
  EXPECT_FALSE(d.data_param().has_crop_size());
  EXPECT_EQ(d.transform_param().mean_file(), "m.binaryproto");
  EXPECT_EQ(d.transform_param().crop_size(), 227u);
  EXPECT_TRUE(d.transform_param().mirror());
  EXPECT_EQ(d.transform_param().scale(), 0.5f);
}

TEST(Upgrade, V0ErrorsNameTheLayer) {
  std::string what = ErrorOf([] {
    Upgraded(R"(layers { layer { name: "r" type: "relu" num_output: 3 } bottom: "a" top: "b" })");
  });
  EXPECT_NE(what.find("'r'"), std::string::npos) << what;
  EXPECT_NE(what.find("num_output"), std::string::npos) << what;
  what = ErrorOf([] { Upgraded(R"(layers { layer { name: "q" type: "warp" } })"); });
  EXPECT_NE(what.find("unknown V0 layer type 'warp'"), std::string::npos) << what;
  what = ErrorOf([] {
    Upgraded(R"(
      layers { layer { name: "p" type: "padding" pad: 1 } bottom: "a" top: "pa" }
      layers { layer { name: "r" type: "relu" } bottom: "pa" top: "b" })");
  });
  EXPECT_NE(what.find("padding"), std::string::npos) << what;
}

TEST(Upgrade, InputDimAndInputShapeBecomeInputLayer) {
  caffe::NetParameter dims = Upgraded(R"(
    input: "data" input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8
    input: "label" input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
  )");
  caffe::NetParameter shapes = Upgraded(R"(
    input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
    input: "label" input_shape { dim: 1 dim: 1 dim: 1 dim: 1 }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
  )");
  caffe::NetParameter expected = ParseNet(R"(
    layer { name: "input" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 dim: 1 dim: 1 dim: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
  )");
  EXPECT_EQ(Diff(expected, dims), "");
  EXPECT_EQ(Diff(expected, shapes), "");

  // Inputs without shape (old caffemodels) are simply dropped.
  caffe::NetParameter bare = Upgraded(R"(input: "data" layer { name: "ip" type: "InnerProduct" })");
  EXPECT_EQ(bare.input_size(), 0);
  ASSERT_EQ(bare.layer_size(), 1);
  EXPECT_EQ(bare.layer(0).name(), "ip");

  std::string what = ErrorOf([] { Upgraded(R"(input: "data" input_dim: 1 input_dim: 3)"); });
  EXPECT_NE(what.find("four per input"), std::string::npos) << what;
}

TEST(Upgrade, BothLayerAndLayersIsAnError) {
  std::string what = ErrorOf(
      [] { Upgraded(R"(layer { name: "a" type: "ReLU" } layers { name: "b" type: RELU })"); });
  EXPECT_NE(what.find("<test>"), std::string::npos) << what;
  EXPECT_NE(what.find("'layer'"), std::string::npos) << what;
}

TEST(Upgrade, ModernDataLayerTransformFieldsAndConflicts) {
  caffe::NetParameter net = Upgraded(R"(
    layer { name: "img" type: "ImageData" top: "d" top: "l"
            image_data_param { source: "list.txt" mirror: true crop_size: 10 } }
  )");
  EXPECT_TRUE(net.layer(0).transform_param().mirror());
  EXPECT_EQ(net.layer(0).transform_param().crop_size(), 10u);
  EXPECT_FALSE(net.layer(0).image_data_param().has_mirror());
  std::string what = ErrorOf([] {
    Upgraded(R"(layer { name: "dd" type: "Data" data_param { scale: 2 }
                        transform_param { scale: 3 } })");
  });
  EXPECT_NE(what.find("'dd'"), std::string::npos) << what;
  EXPECT_NE(what.find("scale"), std::string::npos) << what;
}

TEST(Upgrade, BatchNormParamSpecsFrozen) {
  caffe::NetParameter net = Upgraded(R"(
    layer { name: "bn" type: "BatchNorm" param { lr_mult: 1 } param { lr_mult: 1 }
            param { lr_mult: 1 decay_mult: 1 } }
    layer { name: "sc" type: "Scale" param { lr_mult: 1 } param { lr_mult: 1 } }
  )");
  ASSERT_EQ(net.layer(0).param_size(), 3);
  for (const caffe::ParamSpec& spec : net.layer(0).param()) {
    EXPECT_EQ(spec.lr_mult(), 0.f);
    EXPECT_EQ(spec.decay_mult(), 0.f);
  }
  EXPECT_EQ(net.layer(1).param(0).lr_mult(), 1.f);
  EXPECT_FALSE(NetNeedsUpgrade(net));
}

TEST(Upgrade, NestedMoeNetsAreUpgraded) {
  caffe::NetParameter net = Upgraded(R"(
    layer { name: "moe" type: "MOE"
      moe_param {
        gating_net { input: "x" input_dim: 1 input_dim: 2 input_dim: 3 input_dim: 4 }
        expert_net { layers { name: "e" type: RELU bottom: "x" top: "y" } }
      } }
  )");
  const caffe::MOEParameter& moe = net.layer(0).moe_param();
  ASSERT_EQ(moe.gating_net().layer_size(), 1);
  EXPECT_EQ(moe.gating_net().layer(0).type(), "Input");
  ASSERT_EQ(moe.expert_net(0).layer_size(), 1);
  EXPECT_EQ(moe.expert_net(0).layer(0).type(), "ReLU");
}

TEST(Upgrade, SolverTypeEnumBecomesString) {
  const std::pair<const char*, const char*> cases[] = {
      {"SGD", "SGD"},         {"NESTEROV", "Nesterov"}, {"ADAGRAD", "AdaGrad"},
      {"RMSPROP", "RMSProp"}, {"ADADELTA", "AdaDelta"}, {"ADAM", "Adam"}};
  for (const auto& [old_name, new_name] : cases) {
    caffe::SolverParameter solver;
    ParseProtoFromText(std::string("base_lr: 0.1 solver_type: ") + old_name, "<solver>", &solver);
    EXPECT_TRUE(SolverNeedsUpgrade(solver));
    EXPECT_TRUE(UpgradeSolverAsNeeded("<solver>", &solver));
    EXPECT_EQ(solver.type(), new_name);
    EXPECT_FALSE(solver.has_solver_type());
    EXPECT_FALSE(SolverNeedsUpgrade(solver));
  }
  caffe::SolverParameter both;
  ParseProtoFromText("solver_type: ADAM type: \"SGD\"", "<solver>", &both);
  std::string what = ErrorOf([&] { UpgradeSolverAsNeeded("my_solver.prototxt", &both); });
  EXPECT_NE(what.find("my_solver.prototxt"), std::string::npos) << what;

  caffe::SolverParameter inline_net;
  ParseProtoFromText("net_param { layers { name: \"r\" type: RELU } }", "<solver>", &inline_net);
  EXPECT_TRUE(UpgradeSolverAsNeeded("<solver>", &inline_net));
  EXPECT_EQ(inline_net.net_param().layer(0).type(), "ReLU");
}

}  // namespace
}  // namespace mpcaffe
