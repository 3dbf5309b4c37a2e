// tests/device/device_test.cc — the device layer on the default device: enumeration, memory
// counters, copies with offsets, launches, local memory, atomics, events, and error messages.
#include <gtest/gtest.h>
#include <sched.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/backends.h"
#include "device/device.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

TEST(DeviceList, HasADefaultDeviceWithInfo) {
  ASSERT_FALSE(DeviceList().empty()) << "no device; backends say: " << BackendReports()[0];
  Device& d = DefaultDevice();
  EXPECT_FALSE(d.info().name.empty());
  EXPECT_FALSE(d.info().driver_version.empty());
  EXPECT_GT(d.info().global_mem_bytes, 0u);
  EXPECT_GT(d.info().compute_units, 0);
  EXPECT_EQ(&GetDevice(d.index()), &d);
  EXPECT_THROW(GetDevice(static_cast<int>(DeviceList().size())), DeviceError);
  EXPECT_EQ(BackendReports().size(), 2u);  // one line per backend
}


// PoCL's workers are pinned one per CPU (POCL_AFFINITY=1) only where the process may run on
// CPUs 0 … n − 1, n > 1, and no MPI job runs several ranks on the node: asked on a thread whose
// CPUs are set to each case.
TEST(DeviceList, PinsPoclWorkersOnlyWhereTheProcessOwnsTheFirstCpus) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2 || !CPU_ISSET(0, &all) || !CPU_ISSET(1, &all))
    GTEST_SKIP() << "needs CPUs 0 and 1";
  auto on = [](std::vector<int> cpus) {
    bool result = false;
    std::thread t([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
      result = PoclWorkersMayBePinned();
    });
    t.join();
    return result;
  };
  EXPECT_TRUE(on({0, 1}));
  EXPECT_FALSE(on({1}));  // one CPU: nothing to spread
  EXPECT_FALSE(on({0}));
  if (CPU_COUNT(&all) > 2 && CPU_ISSET(2, &all)) EXPECT_FALSE(on({1, 2}));  // not from CPU 0
  const char* old = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const std::string kept = old ? old : "";
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_FALSE(on({0, 1}));  // two ranks on the node
  if (old) setenv("OMPI_COMM_WORLD_LOCAL_SIZE", kept.c_str(), 1);
  else unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(DeviceList, SelectorsNameDevicesByIndexImplementationKindAndName) {
  const auto& list = DeviceList();
  ASSERT_FALSE(list.empty());
  for (Device* d : list) {
    const DeviceInfo& info = d->info();
    ASSERT_FALSE(info.implementation.empty()) << d->Describe();
    EXPECT_EQ(FindDevice(std::to_string(d->index())), d);
    // The implementation's name finds the first device of that implementation.
    Device* by_impl = FindDevice(info.implementation);
    ASSERT_NE(by_impl, nullptr);
    EXPECT_EQ(by_impl->info().implementation, info.implementation);
    EXPECT_LE(by_impl->index(), d->index());
    // Case-insensitive parts of the platform and device name.
    std::string upper = info.name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    ASSERT_NE(FindDevice(upper), nullptr);
    EXPECT_EQ(FindDevice(upper)->info().name, info.name);
    EXPECT_EQ(FindDevice(info.is_gpu ? "gpu" : "cpu")->info().is_gpu, info.is_gpu);
  }
  EXPECT_EQ(FindDevice(std::to_string(list.size())), nullptr);
  EXPECT_EQ(FindDevice("no-such-device-anywhere"), nullptr);
  try {
    SelectDevice("no-such-device-anywhere");
    FAIL() << "SelectDevice accepted a selector that names no device";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no-such-device-anywhere"), std::string::npos) << what;
    EXPECT_NE(what.find(list.front()->Describe()), std::string::npos) << what;  // lists devices
  }
  // OpenCL platforms come in the order of their names, whatever the ICD loader's order.
  for (size_t i = 1; i < list.size(); ++i)
    if (list[i - 1]->backend() == Backend::kOpenCL && list[i]->backend() == Backend::kOpenCL) {
      EXPECT_LE(list[i - 1]->info().platform_name, list[i]->info().platform_name);
    }
}
TEST(DeviceMemory, CountsCurrentAndPeakBytes) {
  Device& d = DefaultDevice();
  const uint64_t before = d.bytes_in_use();
  d.ResetPeak();
  {
    auto a = d.Alloc<float>(1000);
    auto b = d.Alloc<uint8_t>(500);
    EXPECT_EQ(d.bytes_in_use(), before + 4500);
    EXPECT_EQ(a.size(), 1000u);
    EXPECT_EQ((a + 10).size(), 990u);
  }
  EXPECT_EQ(d.bytes_in_use(), before);
  EXPECT_EQ(d.peak_bytes(), before + 4500);
}

TEST(DeviceMemory, CopiesHonourOffsets) {
  Device& d = DefaultDevice();
  std::vector<int32_t> host(100);
  std::iota(host.begin(), host.end(), 0);
  auto a = d.Alloc<int32_t>(100);
  auto b = d.Alloc<int32_t>(100);
  d.Zero(a.mem.get(), 0, a.mem->bytes());
  d.Zero(b.mem.get(), 0, b.mem->bytes());
  d.Write(a + 10, host.data(), 50);                // a[10..60) = 0..50
  d.Copy(a + 20, b + 5, 30);                       // b[5..35) = a[20..50) = 10..40
  std::vector<int32_t> out(100, -1);
  d.Read(b, out.data(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i], (i >= 5 && i < 35) ? i + 5 : 0) << i;
  std::vector<int32_t> tail(3);
  d.Read(a + 57, tail.data(), 3);
  EXPECT_EQ(tail, (std::vector<int32_t>{47, 48, 49}));
}

// A HostView reads the device's bytes and an overwrite reaches the device (with offsets); on a
// device that computes on host memory it is the allocation itself (mapped, no copy).
TEST(DeviceMemory, HostViewReadsAndOverwritesTheAllocation) {
  Device& d = DefaultDevice();
  std::vector<int32_t> host(100);
  std::iota(host.begin(), host.end(), 0);
  auto a = d.Alloc<int32_t>(100);
  d.Write(a, host.data(), 100);
  {
    HostView view(d, a.mem.get(), 40, 40, HostView::Access::kRead);  // elements 10..20
    EXPECT_EQ(view.mapped(), d.info().host_unified_memory) << d.Describe();
    const auto* p = static_cast<const int32_t*>(view.data());
    for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], 10 + i);
  }
  {
    HostView view(d, a.mem.get(), 80, 20, HostView::Access::kOverwrite);  // elements 20..25
    auto* p = static_cast<int32_t*>(view.data());
    for (int i = 0; i < 5; ++i) p[i] = -1 - i;
  }
  auto b = d.Alloc<int32_t>(100);
  d.Copy(a, b, 100);  // a device copy sees the overwrite
  std::vector<int32_t> out(100);
  d.Read(b, out.data(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i], i >= 20 && i < 25 ? 19 - i : i) << i;
  HostView empty(d, a.mem.get(), 400, 0, HostView::Access::kRead);
  EXPECT_EQ(empty.data(), nullptr);
  try {
    HostView outside(d, a.mem.get(), 396, 8, HostView::Access::kOverwrite);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("outside a buffer of 400 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceMemory, OutOfRangeCopyIsAnError) {
  Device& d = DefaultDevice();
  auto a = d.Alloc<float>(10);
  std::vector<float> host(20);
  try {
    d.Write(a + 5, host.data(), 10);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("outside a buffer of 40 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceMemory, ImpossibleAllocationNamesTheRequest) {
  Device& d = DefaultDevice();
  const uint64_t before = d.bytes_in_use();
  try {
    d.Allocate(size_t{1} << 50);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("requested 1125899906842624 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(d.bytes_in_use(), before);  // nothing counted for the failed request
}

/// A work-group sum through local memory and a barrier, then atomics into one global total.
std::string ReductionSource(const KernelTarget& target) {
  KernelWriter w(target, "test_device");
  w.UseHelper(KernelHelper::kAtomicAddF32);
  w.Kernel("group_sum")
      .Value("int", "n").In("float", "x").Out("float", "group_sums").Out("float", "total")
      .Out("int", "count").LocalPtr("float", "scratch")
      .Body(R"(  const int lid = $local_id(0);
  const int gid = $global_id(0);
  scratch[lid] = gid < n ? x[gid] : 0.0f;
  $barrier;
  for (int stride = $local_size(0) / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] += scratch[lid + stride];
    $barrier;
  }
  if (lid == 0) {
    group_sums[$group_id(0)] = scratch[0];
    mp_atomic_add_f32(total, scratch[0]);
    $atomic_add_i32(count, 1);
  }
)");
  return w.Source();
}

TEST(Kernel, LocalMemoryBarrierAndAtomics) {
  Device& d = DefaultDevice();
  auto program = d.BuildProgram(ReductionSource(KernelTarget::Of(d)));
  Kernel k = program->GetKernel("group_sum");
  const int n = 1000, local = 64, groups = (n + local - 1) / local;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 13);
  auto x = d.Alloc<float>(n);
  auto sums = d.Alloc<float>(groups);
  auto total = d.Alloc<float>(1);
  auto count = d.Alloc<int32_t>(1);
  d.Write(x, host.data(), n);
  d.Zero(total.mem.get(), 0, 4);
  d.Zero(count.mem.get(), 0, 4);
  Event e = k.Arg(int32_t{n}).Arg(x).Arg(sums).Arg(total).Arg(count).Local(local * sizeof(float))
                .Launch({static_cast<size_t>(n), 1, 1}, {local, 1, 1});
  EXPECT_GE(e.ElapsedMs(), 0.0);
  std::vector<float> got(groups);
  d.Read(sums, got.data(), groups);
  for (int g = 0; g < groups; ++g) {
    float want = 0;
    for (int i = g * local; i < std::min(n, (g + 1) * local); ++i) want += host[i];
    EXPECT_EQ(got[g], want) << "group " << g;
  }
  float t = 0;
  int32_t c = 0;
  d.Read(total, &t, 1);
  d.Read(count, &c, 1);
  EXPECT_EQ(t, std::accumulate(host.begin(), host.end(), 0.0f));
  EXPECT_EQ(c, groups);
}

// KernelHelper::kByteVectorStore: every width of both types at every offset in a 16-element
// line (work-item i writes its four vectors i elements into its own 64-element slot), and
// nothing written around them.
TEST(Kernel, ByteVectorStoresReachAnyAlignment) {
  Device& d = DefaultDevice();
  if (d.backend() != Backend::kOpenCL)
    GTEST_SKIP() << "byte-vector stores are OpenCL's (CUDA's vectors store lane by lane)";
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.UseHelper(KernelHelper::kByteVectorStore);
  std::string body = "  const int i = $global_id(0);\n";
  for (int n : {2, 4, 8, 16}) {
    // Lane l of uchar<n> holds x[l], of ushort<n> x[l] · 257; at slot offsets 0, 8, 16, 32.
    const std::string N = std::to_string(n), at = std::to_string(n == 2 ? 0 : 2 * n);
    body += "  MP_STORE_UCHAR" + N + "(vload" + N + "(0, x), y8 + i * 64 + " + at + " + i);\n";
    body += "  MP_STORE_USHORT" + N + "(convert_ushort" + N + "(vload" + N +
            "(0, x)) * (ushort)257, y16 + i * 64 + " + at + " + i);\n";
  }
  w.Kernel("byte_stores").In("uchar", "x").Out("uchar", "y8").Out("ushort", "y16").Body(body);
  auto program = d.BuildProgram(w.Source());
  const int items = 16, slot = 64;
  std::vector<uint8_t> x(16);
  for (int l = 0; l < 16; ++l) x[l] = uint8_t(200 + l * 3);
  auto xb = d.Alloc<uint8_t>(16);
  auto y8 = d.Alloc<uint8_t>(items * slot);
  auto y16 = d.Alloc<uint16_t>(items * slot);
  d.Write(xb, x.data(), 16);
  d.Zero(y8.mem.get(), 0, items * slot);
  d.Zero(y16.mem.get(), 0, items * slot * 2);
  program->GetKernel("byte_stores").Arg(xb).Arg(y8).Arg(y16).Launch({items, 1, 1}, {1, 1, 1});
  std::vector<uint8_t> got8(items * slot);
  std::vector<uint16_t> got16(items * slot);
  d.Read(y8, got8.data(), items * slot);
  d.Read(y16, got16.data(), items * slot);
  for (int i = 0; i < items; ++i) {
    std::vector<uint8_t> want8(slot, 0);
    std::vector<uint16_t> want16(slot, 0);
    for (int n : {2, 4, 8, 16})
      for (int l = 0; l < n; ++l) {
        const int at = (n == 2 ? 0 : 2 * n) + i + l;  // below 32 + 15 + 16 < slot
        want8[at] = x[l], want16[at] = uint16_t(x[l] * 257);
      }
    for (int k = 0; k < slot; ++k) {
      ASSERT_EQ(got8[i * slot + k], want8[k]) << "item " << i << " byte " << k;
      ASSERT_EQ(got16[i * slot + k], want16[k]) << "item " << i << " element " << k;
    }
  }
}

TEST(Kernel, DeviceChoosesALocalSizeWhenNoneIsGiven) {
  Device& d = DefaultDevice();
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("iota2d").Value("int", "w").Value("int", "h").Out("int", "y").Body(R"(  int c = $global_id(0), r = $global_id(1);
  if (c < w && r < h) y[r * w + c] = r * 1000 + c;
)");
  Kernel k = d.BuildProgram(w.Source())->GetKernel("iota2d");
  const int W = 37, H = 11;
  auto y = d.Alloc<int32_t>(W * H);
  k.Arg(int32_t{W}).Arg(int32_t{H}).Arg(y).Launch({W, H, 1});
  std::vector<int32_t> out(W * H);
  d.Read(y, out.data(), out.size());
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < W; ++c) ASSERT_EQ(out[r * W + c], r * 1000 + c);
}

/// QueueScope routes this thread's queue-less work to another queue: nesting restores the
/// outer queue, other threads keep the default, and launches, fills and copies made in the scope
/// complete on that queue.
TEST(Queue, ScopeRoutesThisThreadsWorkToAnotherQueue) {
  Device& d = DefaultDevice();
  auto q1 = d.CreateQueue(), q2 = d.CreateQueue();
  EXPECT_EQ(d.scoped_queue(), nullptr);
  EXPECT_EQ(&d.current_queue(), &d.default_queue());
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("add_index").Value("int", "n").Out("int", "y").Body(R"(  $loop(i, n) { y[i] += (int)i; }
)");
  Kernel k = d.BuildProgram(w.Source(), "", ProgramHints::OneDimensional())->GetKernel("add_index");
  const int n = 1000;
  auto y = d.Alloc<int32_t>(n);
  std::vector<int32_t> ones(n, 1), out(n);
  {
    QueueScope outer(d, q1.get());
    EXPECT_EQ(d.scoped_queue(), q1.get());
    {
      QueueScope inner(d, q2.get());
      EXPECT_EQ(&d.current_queue(), q2.get());
      bool other_thread_default = false;
      std::thread([&] { other_thread_default = d.scoped_queue() == nullptr; }).join();
      EXPECT_TRUE(other_thread_default);
    }
    EXPECT_EQ(d.scoped_queue(), q1.get());
    d.Write(y, ones.data(), n);
    k.Arg(int32_t{n}).Arg(y).Launch1D(n);
    d.Finish();  // the scope's queue
    d.Read(y, out.data(), n);
  }
  EXPECT_EQ(d.scoped_queue(), nullptr);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 1 + i);
}

TEST(Kernel, MissingArgumentsNameTheKernel) {
  Device& d = DefaultDevice();
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("two_args").Value("int", "n").Out("float", "y").Body("  if ($global_id(0) < n) y[0] = 1.0f;\n");
  Kernel k = d.BuildProgram(w.Source())->GetKernel("two_args");
  try {
    k.Arg(int32_t{1}).Launch({1, 1, 1});
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("two_args"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d.BuildProgram(w.Source())->GetKernel("no_such_kernel"), DeviceError);
}

TEST(Program, BuildFailureShowsDeviceOptionsLogAndSourceLines) {
  Device& d = DefaultDevice();
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("broken").Out("float", "y").Body("  y[0] = undeclared_name + 1.0f;\n");
  const std::string source = w.Source();
  try {
    d.BuildProgram(source, "-DMARKER=1");
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << m;
    EXPECT_NE(m.find(d.info().name), std::string::npos) << m;
    EXPECT_NE(m.find("-DMARKER=1"), std::string::npos) << m;
    EXPECT_NE(m.find("undeclared_name"), std::string::npos) << m;
    EXPECT_NE(m.find(">>"), std::string::npos) << "no marked source line in: " << m;
    EXPECT_FALSE(e.log().empty());
  }
}

TEST(Program, DumpKernelsWritesEveryGeneratedText) {
  const auto dir = std::filesystem::temp_directory_path() / ("mpcaffe_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    ScopedSettings env;
    env->dump_kernels = dir.string();
    Device& d = DefaultDevice();
    KernelWriter w(KernelTarget::Of(d), "test_device");
    w.Kernel("dumped_kernel").Out("float", "y").Body("  y[0] = 2.0f;\n");
    d.BuildProgram(w.Source(), "-DDUMP_TEST");
  }
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("dumped_kernel"), std::string::npos);
    EXPECT_NE(text.find("-DDUMP_TEST"), std::string::npos);
    ++files;
  }
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mpcaffe
