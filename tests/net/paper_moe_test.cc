// tests/net/paper_moe_test.cc — the paper's ImageNet-MOE nets (CaffeNet with a layer of 16
// experts, models/paper_examples/imagenet_caffenet_moe) in all four dtypes: whole nets, so in the
// net suite (the layer itself: tests/layers/moe_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device/settings.h"
#include "net/moe_layer.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

std::string SharedDir() { return mpcaffe::test_support::SharedDir().string(); }

/// Gaussian fillers → constants (std; InnerProduct std/100 so all-positive sums stay within
/// fp16), in the layers and in nested nets: drawing the 16 experts' 74 M random weights
/// dominated the test's time. Shapes, types and the graph stay the paper's.
void ConstantFillers(caffe::NetParameter* net) {
  auto fix = [](caffe::FillerParameter* f, float scale) {
    if (f->type() != "gaussian") return;
    const float v = f->std() * scale;
    f->Clear();
    f->set_type("constant");
    f->set_value(v);
  };
  for (auto& l : *net->mutable_layer()) {
    if (l.has_convolution_param()) {
      fix(l.mutable_convolution_param()->mutable_weight_filler(), 1.0f);
      fix(l.mutable_convolution_param()->mutable_bias_filler(), 1.0f);
    }
    if (l.has_inner_product_param()) {  // smaller: all-positive sums must stay within fp16
      fix(l.mutable_inner_product_param()->mutable_weight_filler(), 0.01f);
      fix(l.mutable_inner_product_param()->mutable_bias_filler(), 0.01f);
    }
    if (l.has_moe_param()) {
      ConstantFillers(l.mutable_moe_param()->mutable_gating_net());
      for (auto& e : *l.mutable_moe_param()->mutable_expert_net()) ConstantFillers(&e);
    }
  }
}

/// net_{float,half,int16,int8}_1.prototxt build and run forward with synthetic data (quantized
/// ones calibrated on their fp32 variant); fc8 is finite and the MOE layer picked 4 experts.
TEST(Moe, PaperImagenetMoeNetsForwardInAllFourDtypes) {
  for (const char* variant : {"float", "half", "int16", "int8"}) {
    SCOPED_TRACE(variant);
    const std::string path =
        SharedDir() + "/models/paper_examples/imagenet_caffenet_moe/net_" + variant + "_1.prototxt";
    caffe::NetParameter p = ReadNetParameterText(path);
    ConstantFillers(&p);
    NetOptions o;
    o.synthetic_data = true;
    Net net(p, Dev(), o);
    if (!net.QuantizersWithoutRange().empty()) CalibrateWithFloatVariant(net, p, o);
    net.Forward();
    MoeLayer& moe = dynamic_cast<MoeLayer&>(net.layer("moe"));
    EXPECT_EQ(moe.num_experts(), 16);
    int selected = 0;
    for (int c : moe.counts()) selected += c;
    EXPECT_EQ(selected, 4);
    const std::vector<float> y = test_support::RealValues(net, "fc8");
    ASSERT_EQ(y.size(), 1000u);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace mpcaffe
