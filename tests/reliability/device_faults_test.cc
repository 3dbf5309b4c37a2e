// tests/reliability/device_faults_test.cc — device faults: out-of-memory (through the per-device
// byte limit behind MPCAFFE_MAX_DEVICE_BYTES) names the request and the device and leaves nets
// usable; oversized or overflowing blob shapes are refused before anything is allocated; kernel
// launch errors name the kernel.
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "layers/blob.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

/// Sets the device's byte limit for one scope and restores the previous one.
class ByteLimit {
 public:
  explicit ByteLimit(uint64_t bytes) : previous_(Dev().byte_limit()) { Dev().set_byte_limit(bytes); }
  ~ByteLimit() { Dev().set_byte_limit(previous_); }

 private:
  uint64_t previous_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OutOfMemory, AllocationBeyondTheLimitNamesBytesAndDevice) {
  const uint64_t before = Dev().bytes_in_use();
  ByteLimit limit(before + (1u << 20));
  auto ok = Dev().Allocate(512 << 10);
  try {
    Dev().Allocate(600 << 10);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(Contains(m, "requested 614400 bytes")) << m;
    EXPECT_TRUE(Contains(m, Dev().Describe())) << m;
    EXPECT_TRUE(Contains(m, "MPCAFFE_MAX_DEVICE_BYTES")) << m;
  }
  // The refused request left the counter alone; the memory still there can be used.
  EXPECT_EQ(Dev().bytes_in_use(), before + (512 << 10));
  ok.reset();
  EXPECT_EQ(Dev().bytes_in_use(), before);
  EXPECT_NO_THROW(Dev().Allocate(600 << 10));
}

TEST(OutOfMemory, MoreThanTheDeviceHasIsRefusedWithoutAnArtificialLimit) {
  ByteLimit none(0);
  ASSERT_GT(Dev().info().global_mem_bytes, 0u);
  EXPECT_EQ(Dev().max_bytes(), Dev().info().global_mem_bytes);
  const uint64_t before = Dev().bytes_in_use();
  try {
    Dev().Allocate(Dev().info().global_mem_bytes + 1);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(Contains(e.what(), std::to_string(Dev().info().global_mem_bytes + 1))) << e.what();
    EXPECT_TRUE(Contains(e.what(), "global memory")) << e.what();
  }
  EXPECT_EQ(Dev().bytes_in_use(), before);
}

TEST(OutOfMemory, EnvironmentLimitMustBeANumber) {
  ScopedSettings env;
  env->max_device_bytes = "12k";
  EXPECT_THROW(ByteLimitFromEnvironment(), DeviceError);
  env->max_device_bytes = "4096";
  EXPECT_EQ(ByteLimitFromEnvironment(), 4096u);
  env->max_device_bytes = "";
  EXPECT_EQ(ByteLimitFromEnvironment(), 0u);
}

TEST(BlobShape, OverflowingProductIsRefusedNamingTheBlob) {
  Blob blob(Dev(), DataType::kFloat32, {2, 3}, "huge");
  const uint64_t before = Dev().bytes_in_use();
  try {
    blob.Reshape({INT_MAX, INT_MAX, INT_MAX, INT_MAX});
    FAIL() << "expected BlobError";
  } catch (const BlobError& e) {
    EXPECT_TRUE(Contains(e.what(), "'huge'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "(overflow)")) << e.what();
  }
  EXPECT_EQ(blob.shape(), (std::vector<int>{2, 3}));  // unchanged
  EXPECT_EQ(Dev().bytes_in_use(), before);
}

TEST(BlobShape, ShapeBeyondDeviceMemoryIsRefusedBeforeAllocating) {
  ByteLimit limit(Dev().bytes_in_use() + (4u << 20));
  Blob blob(Dev(), DataType::kFloat32, {4}, "activations");
  const uint64_t before = Dev().bytes_in_use();
  try {
    blob.Reshape({1024, 1024, 2});  // 8 MiB of fp32 > 4 MiB
    FAIL() << "expected BlobError";
  } catch (const BlobError& e) {
    EXPECT_TRUE(Contains(e.what(), "'activations'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "8388608 bytes")) << e.what();
    EXPECT_TRUE(Contains(e.what(), Dev().Describe())) << e.what();
  }
  EXPECT_EQ(blob.count(), 4);
  EXPECT_EQ(Dev().bytes_in_use(), before);
  blob.Reshape({1024, 512});  // 2 MiB fits
  EXPECT_NO_THROW(blob.mutable_device_data());
}

caffe::NetParameter NetFromText(const std::string& text) {
  caffe::NetParameter p;
  ParseProtoFromText(text, "<reliability>", &p);
  return p;
}

const char* kTinyNet = R"(
name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 256 } } }
layer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc"
        inner_product_param { num_output: 256 weight_filler { type: "gaussian" std: 0.1 }
                              bias_filler { type: "constant" value: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "fc" top: "fc" }
)";

TEST(NetFaults, NetStaysUsableAfterOutOfMemory) {
  Net net(NetFromText(kTinyNet), Dev());
  std::vector<float> input(2 * 256);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 17) / 17.0f - 0.3f;
  net.blob("data").FromFloat(input);
  net.Forward();
  const std::vector<float> expected = net.blob("fc").ToFloat();

  ByteLimit limit(Dev().bytes_in_use() + (6u << 20));
  // A batch of 8 MiB blobs: refused at Reshape (naming the blob) when the limit cannot hold
  // one, else out of memory at Forward.
  try {
    net.blob("data").Reshape({8192, 256});
    net.Reshape();
    net.Forward();
    FAIL() << "expected an error";
  } catch (const BlobError& e) {
    EXPECT_TRUE(Contains(e.what(), "8388608 bytes")) << e.what();
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(Contains(e.what(), Dev().Describe())) << e.what();
  }
  // A batch whose blobs fit one by one but not together: out of memory at Forward.
  net.blob("data").Reshape({4096, 256});  // 4 MiB input + 4 MiB output > 6 MiB
  net.Reshape();
  try {
    net.Forward();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_TRUE(Contains(e.what(), "requested 4194304 bytes")) << e.what();
    EXPECT_TRUE(Contains(e.what(), Dev().Describe())) << e.what();
  }
  // Back to the small batch: the same result as before.
  net.blob("data").Reshape({2, 256});
  net.Reshape();
  net.blob("data").FromFloat(input);
  net.Forward();
  EXPECT_EQ(net.blob("fc").ToFloat(), expected);
}

TEST(NetFaults, NetDefinitionTooLargeNamesTheLayer) {
  ByteLimit limit(Dev().bytes_in_use() + (16u << 20));
  try {
    Net net(NetFromText(R"(
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 256 } } }
layer { name: "wide" type: "InnerProduct" bottom: "data" top: "wide"
        inner_product_param { num_output: 100000 } })"),
            Dev());
    FAIL() << "expected BlobError";
  } catch (const BlobError& e) {
    EXPECT_TRUE(Contains(e.what(), "layer 'wide' (InnerProduct)")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "102400000 bytes")) << e.what();
  }
  try {
    Net net(NetFromText(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 65536 dim: 65536 dim: 65536 } } })"),
            Dev());
    FAIL() << "expected BlobError";
  } catch (const BlobError& e) {
    EXPECT_TRUE(Contains(e.what(), "layer 'in' (Input)")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "'x'")) << e.what();
  }
  try {
    Net net(NetFromText(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 4294967297 } } })"),
            Dev());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "4294967297")) << e.what();
  }
}

TEST(KernelFaults, LaunchErrorNamesTheKernel) {
  KernelWriter w(KernelTarget::Of(Dev()), "test_device_faults");
  w.Kernel("reliability_fill").Value("int", "n").Out("float", "y").Body(
      "  $loop(i, n) y[i] = 1.0f;\n");
  Kernel k = Dev().GetProgram(w.Source(), "", ProgramHints::OneDimensional())->GetKernel(
      "reliability_fill");
  auto y = Dev().Alloc<float>(64);
  const size_t too_large = Dev().info().max_work_group_size * 2 + 1;
  try {
    k.Arg(int32_t{64}).Arg(y).Launch({too_large, 1, 1}, {too_large, 1, 1});
    Dev().Finish();
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_TRUE(Contains(e.what(), "reliability_fill")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "clEnqueueNDRangeKernel")) << e.what();
  }
  // The kernel and the device stay usable.
  k.Arg(int32_t{64}).Arg(y).Launch1D(64);
  std::vector<float> out(64);
  Dev().Read(y, out.data(), out.size());
  EXPECT_EQ(out, std::vector<float>(64, 1.0f));
}

}  // namespace
}  // namespace mpcaffe
