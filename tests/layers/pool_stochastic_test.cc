// tests/layers/pool_stochastic_test.cc — libdnn's stochastic pooling kernels (pool_stochastic.h)
// against the plain C++ references with the same uniform values: training samples and their
// indices bit-exact, the test-phase weighted average, fp32 backward bit-exact, in fp32 and fp16
// on overlapping, clipped and global windows; and the Pooling layer on them in fp16.
#include "libdnn/pool_stochastic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"
#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "tests/testing/net_support.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe {
namespace {

using Bytes = std::vector<uint8_t>;
using libdnn::BufferRef;
using libdnn::PoolDesc;

std::shared_ptr<DeviceMemory> Upload(Device& dev, const void* data, size_t bytes) {
  auto m = dev.Allocate(std::max<size_t>(bytes, 4));
  dev.CopyToDevice(data, m.get(), 0, bytes);
  return m;
}

Bytes Download(Device& dev, const std::shared_ptr<DeviceMemory>& m, size_t bytes) {
  Bytes b(bytes);
  dev.CopyToHost(m.get(), 0, b.data(), bytes);
  return b;
}

PoolDesc Desc(DataType t, int n, int c, int h, int w, int kh, int kw, int sh, int sw, bool global) {
  PoolDesc d;
  d.type = t, d.batch = n, d.channels = c, d.height = h, d.width = w;
  d.kernel_h = kh, d.kernel_w = kw, d.stride_h = sh, d.stride_w = sw, d.global = global;
  return d;
}

/// Non-negative inputs k/8, k in [0, 16] (exact in fp16), a quarter of them 0 so that some
/// windows are all zero.
Bytes Inputs(DataType t, size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> k(-4, 16);
  Bytes b(n * SizeOf(t));
  for (size_t i = 0; i < n; ++i) test_inputs::StoreReal(t, std::max(0, k(rng)) / 8.0f, b, i);
  return b;
}

float At(DataType t, const Bytes& b, size_t i) {
  if (t == DataType::kFloat32) {
    float v;
    std::memcpy(&v, b.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return HalfToFloat(h);
}

// Overlapping windows clipped at the edges (Caffe's ceil mode), disjoint windows, global.
std::vector<PoolDesc> Shapes(DataType t) {
  return {Desc(t, 2, 3, 7, 6, 3, 2, 2, 1, false), Desc(t, 1, 2, 5, 5, 2, 2, 2, 2, false),
          Desc(t, 2, 2, 3, 4, 0, 0, 1, 1, true)};
}

TEST(StochasticPoolKernels, ForwardMatchesReferenceWithTheSameUniformValues) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(7);
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    for (const PoolDesc& d : Shapes(t)) {
      SCOPED_TRACE(d.ToString());
      libdnn::StochasticPooling pool(dev, d);
      const size_t es = SizeOf(t), in = d.input_count(), out = d.output_count();
      const Bytes x = Inputs(t, in, rng);
      std::vector<float> u(out);
      std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
      for (float& v : u) v = uniform(rng);
      u[0] = 0.0f;         // every running sum reaches 0: the window's first element
      u[1] = 0.99999994f;  // the largest uniform value below 1: late in the window
      auto xm = Upload(dev, x.data(), x.size()), um = Upload(dev, u.data(), out * 4);
      auto ym = dev.Allocate(out * es), im = dev.Allocate(out * 4), tm = dev.Allocate(out * es);
      pool.ForwardTrain(BufferRef(xm.get(), 0), BufferRef(um.get(), 0), BufferRef(ym.get(), 0),
                        BufferRef(im.get(), 0));
      pool.ForwardTest(BufferRef(xm.get(), 0), BufferRef(tm.get(), 0));
      Bytes want_y(out * es), want_test(out * es);
      std::vector<int32_t> want_index(out);
      libdnn::StochasticPoolTrainReference(d, x.data(), u.data(), want_y.data(), want_index.data());
      libdnn::StochasticPoolTestReference(d, x.data(), want_test.data());
      EXPECT_EQ(Download(dev, ym, out * es), want_y) << Name(t) << " train output";
      const Bytes index = Download(dev, im, out * 4);
      EXPECT_EQ(std::memcmp(index.data(), want_index.data(), out * 4), 0) << Name(t) << " index";
      const Bytes test = Download(dev, tm, out * es);
      for (size_t o = 0; o < out; ++o) {
        const float w = At(t, want_test, o);
        EXPECT_NEAR(At(t, test, o), w, std::abs(w) * (t == DataType::kFloat32 ? 1e-6 : 1e-3))
            << Name(t) << " test output " << o;
      }
    }
  }
}

TEST(StochasticPoolKernels, BackwardRoutesToTheSampledIndexBitExact) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(11);
  for (const PoolDesc& d : Shapes(DataType::kFloat32)) {
    SCOPED_TRACE(d.ToString());
    libdnn::StochasticPooling pool(dev, d);
    const size_t in = d.input_count(), out = d.output_count();
    const Bytes x = Inputs(DataType::kFloat32, in, rng);
    std::vector<float> u(out), dy(out), y(out);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f), diff(-2.0f, 2.0f);
    for (size_t o = 0; o < out; ++o) u[o] = uniform(rng), dy[o] = diff(rng);
    std::vector<int32_t> index(out);
    libdnn::StochasticPoolTrainReference(d, x.data(), u.data(), y.data(), index.data());
    auto dym = Upload(dev, dy.data(), out * 4), im = Upload(dev, index.data(), out * 4);
    auto dxm = dev.Allocate(in * 4);
    pool.Backward(BufferRef(dym.get(), 0), BufferRef(im.get(), 0), BufferRef(dxm.get(), 0));
    std::vector<float> want(in);
    libdnn::StochasticPoolBackwardReference(d, dy.data(), index.data(), want.data());
    const Bytes got = Download(dev, dxm, in * 4);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), in * 4), 0);
  }
}

TEST(StochasticPoolKernels, RefusesPaddingQuantizedTypesAndFp16Backward) {
  Device& dev = DefaultDevice();
  PoolDesc d = Desc(DataType::kFloat32, 1, 1, 4, 4, 3, 3, 1, 1, false);
  d.pad_h = 1;
  EXPECT_THROW(libdnn::StochasticPooling(dev, d), Error);
  EXPECT_THROW(libdnn::StochasticPooling::Source(KernelTarget::Of(dev), DataType::kInt8Q), Error);
  libdnn::StochasticPooling half(dev, Desc(DataType::kFloat16, 1, 1, 4, 4, 2, 2, 2, 2, false));
  auto m = dev.Allocate(64);
  EXPECT_THROW(half.Backward(BufferRef(m.get(), 0), BufferRef(m.get(), 0), BufferRef(m.get(), 0)),
               Error);
}

// The layer in fp16: the test phase's weighted average of the fp32 layer, within fp16 rounding.
TEST(StochasticPoolKernels, Fp16LayerMatchesFp32Layer) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(3);
  const Bytes x = Inputs(DataType::kFloat32, 2 * 3 * 6 * 6, rng);
  std::vector<float> xf(x.size() / 4);
  std::memcpy(xf.data(), x.data(), x.size());
  std::vector<std::vector<float>> outputs;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    caffe::LayerParameter p = test_support::LayerText(
        R"(type: "Pooling" pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 })", t);
    p.set_phase(caffe::TEST);
    auto layer = CreateLayer(p, dev);
    Blob bottom(dev, t, {2, 3, 6, 6}, "x"), top(dev, t, {}, "y");
    std::vector<Blob*> b{&bottom}, tp{&top};
    bottom.FromFloat(xf);
    layer->SetUp(b, tp);
    layer->Forward(b, tp);
    outputs.push_back(top.ToFloat());
  }
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t i = 0; i < outputs[0].size(); ++i)
    EXPECT_NEAR(outputs[1][i], outputs[0][i], 1e-3 * std::abs(outputs[0][i])) << i;
}

}  // namespace
}  // namespace mpcaffe
