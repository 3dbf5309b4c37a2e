// tests/layers/elementwise_test.cc — every element-wise kernel, every data type, on the default
// device, against the plain C++ reference over random inputs at sizes 0, 1, 7, 1000, 2^20+3.
#include "codegen/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "layers/elementwise.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

const int kSizes[] = {0, 1, 7, 1000, (1 << 20) + 3};

/// Random storage for a type: reals in [-4, 4] (with a few specials for float types), raw
/// integers over the whole range for quantized types.
std::vector<uint8_t> RandomStorage(DataType t, int n, std::mt19937& rng) {
  std::vector<uint8_t> bytes(std::max<size_t>(1, n * SizeOf(t)));
  std::uniform_real_distribution<float> real(-4.0f, 4.0f);
  const auto& tr = TraitsOf(t);
  std::uniform_int_distribution<int64_t> q(tr.qmin, tr.qmax);
  for (int i = 0; i < n; ++i) {
    float v = real(rng);
    if (i % 97 == 5) v = 0.0f;
    switch (t) {
      case DataType::kFloat32: std::memcpy(&bytes[i * 4], &v, 4); break;
      case DataType::kFloat16: {
        uint16_t h = FloatToHalf(v);
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      }
      case DataType::kInt16Q: {
        uint16_t u = static_cast<uint16_t>(q(rng));
        std::memcpy(&bytes[i * 2], &u, 2);
        break;
      }
      case DataType::kInt8Q: bytes[i] = static_cast<uint8_t>(q(rng)); break;
    }
  }
  return bytes;
}

/// Compares device output with the reference: quantized bit-exact; fp32 within 1e-5
/// relative; fp16 within one half-precision step.
void ExpectMatch(DataType t, int n, const std::vector<uint8_t>& got,
                 const std::vector<uint8_t>& want, const std::string& what) {
  int mismatches = 0;
  for (int i = 0; i < n && mismatches < 5; ++i) {
    bool ok;
    std::string g, w;
    if (IsQuantized(t)) {
      int64_t a = t == DataType::kInt8Q ? got[i] : reinterpret_cast<const uint16_t*>(got.data())[i];
      int64_t b = t == DataType::kInt8Q ? want[i] : reinterpret_cast<const uint16_t*>(want.data())[i];
      ok = a == b;
      g = std::to_string(a), w = std::to_string(b);
    } else {
      float a, b;
      if (t == DataType::kFloat32) {
        a = reinterpret_cast<const float*>(got.data())[i];
        b = reinterpret_cast<const float*>(want.data())[i];
        ok = (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-5f * std::fabs(b) + 1e-30f;
      } else {
        uint16_t ha = reinterpret_cast<const uint16_t*>(got.data())[i];
        uint16_t hb = reinterpret_cast<const uint16_t*>(want.data())[i];
        a = HalfToFloat(ha), b = HalfToFloat(hb);
        ok = (std::isnan(a) && std::isnan(b)) || std::abs(int(ha) - int(hb)) <= 1;
      }
      g = std::to_string(a), w = std::to_string(b);
    }
    if (!ok) {
      ++mismatches;
      ADD_FAILURE() << what << " n=" << n << " element " << i << ": device " << g
                    << ", reference " << w;
    }
  }
}

class ElementwiseTest : public ::testing::TestWithParam<DataType> {
 protected:
  ElementwiseTest() : device_(DefaultDevice()), ops_(device_) {}
  std::shared_ptr<DeviceMemory> Upload(const std::vector<uint8_t>& host) {
    auto m = device_.Allocate(host.size());
    device_.CopyToDevice(host.data(), m.get(), 0, host.size());
    return m;
  }
  std::vector<uint8_t> Download(DeviceMemory& m) {
    std::vector<uint8_t> host(m.bytes());
    device_.CopyToHost(&m, 0, host.data(), host.size());
    return host;
  }
  Device& device_;
  ElementwiseOps ops_;
  std::mt19937 rng_{1234};
  // Quantization of the operands for quantized types (int16q gets a finer grid).
  Affine In(DataType t) const { return t == DataType::kInt8Q ? Affine{0.05f, 128} : Affine{0.0002f, 30000}; }
  Affine Out(DataType t) const { return t == DataType::kInt8Q ? Affine{0.03f, 10} : Affine{0.00015f, 1000}; }
};

TEST_P(ElementwiseTest, Relu) {
  const DataType t = GetParam();
  for (float slope : {0.0f, 0.125f}) {
    for (int n : kSizes) {
      auto xh = RandomStorage(t, n, rng_);
      auto x = Upload(xh);
      auto y = device_.Allocate(xh.size());
      ops_.Relu(t, n, *x, *y, slope, In(t), Out(t));
      std::vector<uint8_t> want(xh.size());
      reference::Relu(t, n, xh.data(), want.data(), slope, In(t), Out(t));
      ExpectMatch(t, n, Download(*y), want, std::string("relu slope ") + std::to_string(slope));
    }
  }
}

TEST_P(ElementwiseTest, Scale) {
  const DataType t = GetParam();
  for (float alpha : {0.75f, -2.5f}) {
    for (int n : kSizes) {
      auto xh = RandomStorage(t, n, rng_);
      auto x = Upload(xh);
      auto y = device_.Allocate(xh.size());
      ops_.Scale(t, n, alpha, *x, *y, In(t), Out(t));
      std::vector<uint8_t> want(xh.size());
      reference::Scale(t, n, alpha, xh.data(), want.data(), In(t), Out(t));
      ExpectMatch(t, n, Download(*y), want, "scale alpha " + std::to_string(alpha));
    }
  }
}

TEST_P(ElementwiseTest, Axpby) {
  const DataType t = GetParam();
  for (int n : kSizes) {
    auto xh = RandomStorage(t, n, rng_);
    auto yh = RandomStorage(t, n, rng_);
    auto x = Upload(xh);
    auto y = Upload(yh);
    ops_.Axpby(t, n, 1.5f, *x, -0.5f, *y, In(t), Out(t));
    std::vector<uint8_t> want = yh;
    reference::Axpby(t, n, 1.5f, xh.data(), -0.5f, want.data(), In(t), Out(t));
    ExpectMatch(t, n, Download(*y), want, "axpby");
  }
}

TEST_P(ElementwiseTest, ConvertToEveryType) {
  const DataType from = GetParam();
  for (DataType to : kAllDataTypes) {
    for (int n : kSizes) {
      auto xh = RandomStorage(from, n, rng_);
      auto x = Upload(xh);
      auto y = device_.Allocate(std::max<size_t>(1, n * SizeOf(to)));
      ops_.Convert(from, to, n, *x, *y, In(from), Out(to));
      std::vector<uint8_t> want(y->bytes());
      reference::Convert(from, to, n, xh.data(), want.data(), In(from), Out(to));
      ExpectMatch(to, n, Download(*y), want, std::string("convert ") + Name(from) + "->" + Name(to));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ElementwiseTest, ::testing::ValuesIn(kAllDataTypes),
                         [](const auto& info) { return std::string(Name(info.param)); });

TEST(Fp16Arith, HalfDevicesComputeInHalfUnlessSwitchedOff) {
  // On a device with cl_khr_fp16 (or CUDA sm_53+) fp16 kernels compute in half, as on a GPU
  // (the ElementwiseTest fp16 cases above then run native half against the reference);
  // MPCAFFE_FP16_ARITH=0 makes them compute in float on the same device, and still match.
  Device& dev = DefaultDevice();
  std::optional<ScopedSettings> env;
  env.emplace();
  (*env)->fp16_arith = "";
  const KernelTarget native = KernelTarget::Of(dev);
  EXPECT_EQ(native.fp16_arith, dev.info().fp16);
  (*env)->fp16_arith = "0";
  const KernelTarget in_float = KernelTarget::Of(dev);
  EXPECT_FALSE(in_float.fp16_arith);
  const std::string float_text = ReluSource(in_float, DataType::kFloat16);
  EXPECT_NE(float_text.find("typedef float Dtype_c;"), std::string::npos);
  // The float form runs and matches the reference on this device.
  {
    std::mt19937 rng(7);
    const int n = 1000;
    ElementwiseOps ops(dev);
    auto xh = RandomStorage(DataType::kFloat16, n, rng);
    auto x = dev.Allocate(xh.size()), y = dev.Allocate(xh.size());
    dev.CopyToDevice(xh.data(), x.get(), 0, xh.size());
    ops.Scale(DataType::kFloat16, n, 0.75f, *x, *y, {}, {});
    std::vector<uint8_t> want(xh.size()), got(xh.size());
    reference::Scale(DataType::kFloat16, n, 0.75f, xh.data(), want.data(), {}, {});
    dev.CopyToHost(y.get(), 0, got.data(), got.size());
    ExpectMatch(DataType::kFloat16, n, got, want, "fp16 scale in float");
  }
  env.reset();
  if (!dev.info().fp16)
    GTEST_SKIP() << dev.info().name << " has no half arithmetic (cl_khr_fp16): fp16 computes "
                 << "in float there, the native-half assertion does not apply";
  const std::string half_text = ReluSource(native, DataType::kFloat16);
  EXPECT_NE(half_text.find("typedef half Dtype_c;"), std::string::npos);
  EXPECT_NE(half_text.find("cl_khr_fp16 : enable"), std::string::npos);
}

TEST(ElementwiseReference, QuantizedReluNegativeSlopeIsRefused) {
  uint8_t x = 3, y = 0;
  EXPECT_THROW(reference::Relu(DataType::kInt8Q, 1, &x, &y, -0.1f, {}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace mpcaffe
