// tests/net/nested_test.cc — what the Net knows of layers without naming them: nested
// NetParameters found by type, the data-type rules each layer type registers, and the layer
// groups registered before any Net is built (no device needed).
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "layers/layer_registry.h"
#include "net/net.h"

namespace mpcaffe {
namespace {

caffe::LayerParameter ParseLayer(const std::string& text) {
  caffe::LayerParameter p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p));
  return p;
}

TEST(NestedNets, FoundByTypeInFieldOrder) {
  caffe::LayerParameter moe = ParseLayer(R"(name: "moe" type: "MOE"
    moe_param { expert_net { name: "e0" } gating_net { name: "g" } expert_net { name: "e1" } })");
  const std::vector<caffe::NetParameter*> nets = NestedNetParameters(&moe);
  ASSERT_EQ(nets.size(), 3u);
  EXPECT_EQ(nets[0], moe.mutable_moe_param()->mutable_gating_net());
  EXPECT_EQ(nets[1]->name(), "e0");
  EXPECT_EQ(nets[2]->name(), "e1");
  caffe::LayerParameter relu =
      ParseLayer(R"(name: "r" type: "ReLU" relu_param { negative_slope: 0 })");
  EXPECT_TRUE(NestedNetParameters(&relu).empty());
}

TEST(NestedNets, WithDataTypeReachesThem) {
  caffe::NetParameter net;
  *net.add_layer() = ParseLayer(R"(name: "moe" type: "MOE"
    moe_param { gating_net { layer { name: "g" type: "Softmax" } } expert_net { layer { name: "e" type: "ReLU" } } })");
  const caffe::NetParameter half = WithDataType(net, DataType::kFloat16);
  const auto& mp = half.layer(0).moe_param();
  EXPECT_EQ(mp.gating_net().layer(0).compute_data_type(), caffe::CAFFE_HALF);
  EXPECT_EQ(mp.expert_net(0).layer(0).top_data_type(), caffe::CAFFE_HALF);
}

TEST(LayerTypingTable, ConvertersSourcesAndRegularLayers) {
  EXPECT_TRUE(TypingOf("Quantizer").reads_bottom_type);
  EXPECT_TRUE(TypingOf("Quantizer").writes_top_type);
  EXPECT_FALSE(TypingOf("Input").reads_bottom_type);
  EXPECT_TRUE(TypingOf("Input").writes_top_type);
  EXPECT_TRUE(TypingOf("Data").writes_top_type);
  EXPECT_TRUE(TypingOf("MOE").reads_bottom_type);
  EXPECT_EQ(TypingOf("MOE").fp32_tops_from, 1);
  EXPECT_FALSE(TypingOf("ReLU").writes_top_type);
  EXPECT_EQ(TypingOf("ReLU").fp32_tops_from, -1);
  EXPECT_FALSE(TypingOf("NoSuchType").writes_top_type);
}

TEST(LayerTypingTable, EveryGroupRegisteredBeforeAnyNet) {
  const std::vector<std::string> types = LayerTypes();
  for (const char* t : {"MOE", "Noise", "DummyData", "Silence", "ReLU", "Input"})
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
}

}  // namespace
}  // namespace mpcaffe
