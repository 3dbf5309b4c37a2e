// tests/layers/layers_test.cc — Blob, the registry, and the errors every layer gives (the layers
// themselves: layers_structural_test.cc, layers_libdnn_test.cc, layers_loss_test.cc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "layers/blob.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "proto/model_io.h"
#include "tests/layers/layer_harness.h"
#include "tests/testing/net_support.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

using namespace layer_harness;  // NOLINT: the shared harness of the layer tests

// ---- Blob -----------------------------------------------------------------------------------

TEST(Blob, ReshapeFollowsCaffeRules) {
  Blob b(Dev(), DataType::kFloat32, {2, 3, 4}, "b");
  EXPECT_EQ(b.count(), 24);
  EXPECT_EQ(b.count(1), 12);
  EXPECT_EQ(b.shape(-1), 4);
  EXPECT_EQ(b.num(), 2);
  EXPECT_EQ(b.channels(), 3);
  EXPECT_EQ(b.height(), 4);
  EXPECT_EQ(b.width(), 1);
  EXPECT_EQ(b.shape_string(), "2 3 4 (24)");
  b.mutable_host_data();  // memory in use (never-used memory follows the shape down too)
  const size_t cap = b.capacity_bytes();
  b.Reshape({2, 2});  // smaller: memory kept
  EXPECT_EQ(b.capacity_bytes(), cap);
  b.Reshape({10, 10});  // larger: grows
  EXPECT_EQ(b.capacity_bytes(), 400u);
  EXPECT_THROW(b.Reshape({2, -1}), BlobError);
  EXPECT_THROW(b.shape(5), BlobError);
  try {
    b.Reshape({1 << 16, 1 << 16});
    FAIL();
  } catch (const BlobError& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
}

TEST(Blob, HostAndDeviceStayInSync) {
  for (DataType t : kAllDataTypes) {
    Blob b(Dev(), t, {5, 7}, "b");
    std::vector<float> v(35);
    for (int i = 0; i < 35; ++i) v[i] = IsQuantized(t) ? i * 3 : 0.25f * i - 2;
    b.FromFloat(v);
    EXPECT_EQ(b.device_bytes(), 0u) << "no device copy before device use";
    b.device_data();
    EXPECT_GE(b.device_bytes(), b.bytes());
    // Device-side write: zero the memory, then the host view must follow.
    Dev().Zero(b.mutable_device_data(), 0, b.bytes());
    for (float x : b.ToFloat()) ASSERT_EQ(x, 0.0f);
    b.FromFloat(v);  // host newest again
    std::vector<uint8_t> back(b.bytes());
    Dev().CopyToHost(b.device_data(), 0, back.data(), b.bytes());
    EXPECT_EQ(0, std::memcmp(back.data(), b.host_data(), b.bytes())) << Name(t);
  }
}

// OverwriteData writes the device side through a view and makes no host copy; ReadData reads
// the newest side without making one; the host side follows on request, in its old array.
TEST(Blob, OverwriteAndReadThroughViewsKeepNoHostCopy) {
  Blob b(Dev(), DataType::kFloat32, {3, 1000}, "b");
  b.FromFloat(std::vector<float>(3000, 1.0f));  // a host copy that the overwrite makes stale
  const void* host_array = b.host_data();
  const uint64_t version = b.data_version();
  {
    std::unique_ptr<HostView> view = b.OverwriteData();
    ASSERT_EQ(view->bytes(), b.bytes());
    auto* p = static_cast<float*>(view->data());
    for (int i = 0; i < 3000; ++i) p[i] = 0.5f * i;
  }
  EXPECT_GT(b.data_version(), version);
  {
    std::unique_ptr<HostView> view;
    const auto* p = static_cast<const float*>(b.ReadData(&view));
    ASSERT_NE(view, nullptr);  // the device side is the newest
    for (int i = 0; i < 3000; ++i) ASSERT_EQ(p[i], 0.5f * i) << i;
  }
  std::vector<float> device(3000);
  Dev().CopyToHost(b.device_data(), 0, device.data(), b.bytes());
  EXPECT_EQ(device[2999], 0.5f * 2999);
  // The host array of before is refreshed in place (pointers into it, e.g. NumPy views, stay
  // valid).
  EXPECT_EQ(b.ToFloat()[1234], 0.5f * 1234);
  EXPECT_EQ(b.host_data(), host_array);
  Blob fresh(Dev(), DataType::kFloat32, {3, 1000}, "fresh");  // never on the host: none made
  { std::memset(fresh.OverwriteData()->data(), 0, fresh.bytes()); }
  EXPECT_EQ(fresh.host_bytes(), 0u);
  std::unique_ptr<HostView> none;
  EXPECT_EQ(b.ReadData(&none), b.host_data());  // in sync: the host side, no view
  EXPECT_EQ(none, nullptr);
}

TEST(Registry, UnknownTypeNamesLayerAndListsKnownTypes) {
  caffe::LayerParameter p;
  p.set_name("mystery");
  p.set_type("Frobnicate");
  try {
    CreateLayer(p, Dev());
    FAIL();
  } catch (const LayerError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mystery"), std::string::npos) << m;
    EXPECT_NE(m.find("Frobnicate"), std::string::npos) << m;
    EXPECT_NE(m.find("Convolution"), std::string::npos) << m;
    EXPECT_NE(m.find("ReLU"), std::string::npos) << m;
  }
  for (const char* t : {"Input", "Data", "ImageData", "InnerProduct", "Convolution", "Pooling", "ReLU", "Sigmoid",
                        "TanH", "LRN", "Dropout", "Softmax", "SoftmaxWithLoss", "EuclideanLoss",
                        "Accuracy", "Concat", "Split", "Flatten", "Reshape", "Eltwise", "BatchNorm",
                        "Scale", "Quantizer"}) {
    const auto types = LayerTypes();
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
  }
}

// Parameter: its blob of parameter_param.shape (zeros, or the model's values) as its top.
TEST(Layers, ParameterFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r =
        Make(Param("type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }", t), {}, 1);
    EXPECT_EQ(r.top[0]->shape(), (std::vector<int>{2, 3}));
    r.Forward();
    ExpectMatch(t, r.top[0]->ToFloat(), std::vector<float>(6, 0.0f), "Parameter zeros");
    const std::vector<float> v = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 0.125f};
    r.layer->blobs()[0]->FromFloat(v);
    r.Forward();
    ExpectMatch(t, r.top[0]->ToFloat(), v, "Parameter values");
  }
  EXPECT_NE(
      LossRefusal("name: 'h' type: 'Parameter'", {}).find("'h' (Parameter): parameter_param.shape"),
      std::string::npos);
}

TEST(Layers, ErrorsNameTheLayer) {
  auto p = Param("name: 'act' type: 'Sigmoid'", DataType::kInt8Q);
  try {
    Make(p, {{2, 2}}, 1);
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'act'"), std::string::npos) << e.what();
  }
  auto q = Param("name: 'r' type: 'ReLU'", DataType::kInt8Q);  // no ranges: a clear error
  LayerRun r = Make(q, {{2, 2}}, 1);
  try {
    r.Forward();
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("calibrate"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe
