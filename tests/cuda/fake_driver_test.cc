// tests/cuda/fake_driver_test.cc — runs the CUDA backend against an in-process fake driver
// (host memory as device memory, launches recorded and emulated in C++), so its argument
// marshalling, shared-memory layout, grid shapes, copies, errors and binary-store path are
// checked on machines without an NVIDIA GPU. Kernels are still compiled by the real NVRTC.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "device/device.h"
#include "device/program_store.h"

#if defined(MPCAFFE_HAVE_CUDA) && __has_include(<cuda.h>)
#include "device/cuda/driver_api.h"
#include "device/cuda/nvrtc.h"

namespace mpcaffe::cuda {
namespace {

// ----------------------------------------------------------------------------- the fake driver

struct FakeLaunch {
  std::string kernel;
  unsigned grid[3], block[3], shared;
  CUstream stream;
  std::vector<std::vector<unsigned char>> params;
};

struct FakeModule {
  std::string image;
};
struct FakeFunction {
  std::string name;
  std::vector<size_t> param_sizes;
  int max_dynamic_shared = 0;
};

struct FakeState {
  size_t memory_limit = 1 << 20;
  size_t allocated = 0;
  std::map<CUdeviceptr, size_t> allocations;
  int context_depth = 0;
  int pushes = 0;
  std::map<std::string, std::vector<size_t>> kernels;  // name -> parameter sizes
  std::vector<std::string> loaded_images;
  std::set<FakeFunction*> functions;
  std::vector<FakeLaunch> launches;
  std::function<void(const FakeLaunch&)> emulate;
  CUresult fail_launch = CUDA_SUCCESS;
  int streams = 0;  // alive
  int events = 0;   // alive
  int modules = 0;  // alive
  std::vector<CUstream> synchronized;
};

FakeState* g_fake = nullptr;

// The size of an ELF64 image from its header: the end of the later of its header tables.
size_t ElfSize(const unsigned char* p) {
  uint64_t phoff, shoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, p + 32, 8);
  std::memcpy(&shoff, p + 40, 8);
  std::memcpy(&phentsize, p + 54, 2);
  std::memcpy(&phnum, p + 56, 2);
  std::memcpy(&shentsize, p + 58, 2);
  std::memcpy(&shnum, p + 60, 2);
  return std::max<size_t>(phoff + size_t(phnum) * phentsize, shoff + size_t(shnum) * shentsize);
}

CUresult FakeInit(unsigned) { return CUDA_SUCCESS; }
CUresult FakeDriverVersion(int* v) {
  *v = 12040;
  return CUDA_SUCCESS;
}
CUresult FakeErrorName(CUresult r, const char** name) {
  static const std::map<int, const char*> names = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"}};
  auto it = names.find(r);
  if (it == names.end()) return CUDA_ERROR_INVALID_VALUE;
  *name = it->second;
  return CUDA_SUCCESS;
}
CUresult FakeDeviceCount(int* n) {
  *n = 2;
  return CUDA_SUCCESS;
}
CUresult FakeDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal > 1) return CUDA_ERROR_INVALID_VALUE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult FakeDeviceName(char* name, int length, CUdevice d) {
  std::snprintf(name, length, "Fake GPU %d", d);
  return CUDA_SUCCESS;
}
CUresult FakeTotalMem(size_t* bytes, CUdevice) {
  *bytes = g_fake->memory_limit;
  return CUDA_SUCCESS;
}
CUresult FakeAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 8;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = 48 * 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = 100 * 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      *v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 8;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult FakeRetain(CUcontext* c, CUdevice d) {
  *c = reinterpret_cast<CUcontext>(uintptr_t(0x1000 + d));
  return CUDA_SUCCESS;
}
CUresult FakeRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult FakePush(CUcontext) {
  ++g_fake->context_depth;
  ++g_fake->pushes;
  return CUDA_SUCCESS;
}
CUresult FakePop(CUcontext*) {
  --g_fake->context_depth;
  return CUDA_SUCCESS;
}
bool InContext() { return g_fake->context_depth > 0; }
CUresult FakeAlloc(CUdeviceptr* p, size_t bytes) {
  if (!InContext() || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_fake->allocated + bytes > g_fake->memory_limit) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(std::malloc(bytes));
  g_fake->allocations[*p] = bytes;
  g_fake->allocated += bytes;
  return CUDA_SUCCESS;
}
CUresult FakeFree(CUdeviceptr p) {
  auto it = g_fake->allocations.find(p);
  if (it == g_fake->allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  g_fake->allocated -= it->second;
  g_fake->allocations.erase(it);
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
// Device addresses must fall inside a live allocation, like the real driver checks.
bool Valid(CUdeviceptr p, size_t bytes) {
  auto it = g_fake->allocations.upper_bound(p);
  if (it == g_fake->allocations.begin()) return false;
  --it;
  return p + bytes <= it->first + it->second;
}
CUresult FakeHtoD(CUdeviceptr dst, const void* src, size_t n, CUstream) {
  if (!InContext() || !Valid(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult FakeDtoH(void* dst, CUdeviceptr src, size_t n, CUstream) {
  if (!InContext() || !Valid(src, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult FakeDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream) {
  if (!InContext() || !Valid(src, n) || !Valid(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult FakeMemset(CUdeviceptr dst, unsigned char v, size_t n, CUstream) {
  if (!InContext() || !Valid(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return CUDA_SUCCESS;
}
CUresult FakeModuleLoad(CUmodule* m, const void* image) {
  auto* p = static_cast<const unsigned char*>(image);
  std::string bytes;
  if (std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) == 0)
    bytes.assign(reinterpret_cast<const char*>(p), ElfSize(p));
  else if (std::strstr(static_cast<const char*>(image), ".entry"))
    bytes = static_cast<const char*>(image);  // PTX
  else
    return CUDA_ERROR_INVALID_IMAGE;
  g_fake->loaded_images.push_back(bytes);
  ++g_fake->modules;
  *m = reinterpret_cast<CUmodule>(new FakeModule{bytes});
  return CUDA_SUCCESS;
}
CUresult FakeModuleUnload(CUmodule m) {
  delete reinterpret_cast<FakeModule*>(m);
  --g_fake->modules;
  return CUDA_SUCCESS;
}
CUresult FakeGetFunction(CUfunction* f, CUmodule m, const char* name) {
  auto* module = reinterpret_cast<FakeModule*>(m);
  auto it = g_fake->kernels.find(name);
  if (module->image.find(name) == std::string::npos || it == g_fake->kernels.end())
    return CUDA_ERROR_NOT_FOUND;
  auto* function = new FakeFunction{name, it->second};
  g_fake->functions.insert(function);
  *f = reinterpret_cast<CUfunction>(function);
  return CUDA_SUCCESS;
}
CUresult FakeFuncAttribute(int* v, CUfunction_attribute a, CUfunction) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    *v = 512;
  else if (a == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
    *v = 0;
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult FakeFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || v > 100 * 1024)
    return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<FakeFunction*>(f)->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}
CUresult FakeParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  auto* function = reinterpret_cast<FakeFunction*>(f);
  if (index >= function->param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = 0;
  *size = function->param_sizes[index];
  return CUDA_SUCCESS;
}
CUresult FakeLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                          void** extra) {
  auto* function = reinterpret_cast<FakeFunction*>(f);
  if (!InContext() || extra) return CUDA_ERROR_INVALID_VALUE;
  if (g_fake->fail_launch != CUDA_SUCCESS) return g_fake->fail_launch;
  if (shared > 48 * 1024 && int(shared) > function->max_dynamic_shared)
    return CUDA_ERROR_INVALID_VALUE;
  FakeLaunch launch{function->name, {gx, gy, gz}, {bx, by, bz}, shared, stream, {}};
  for (size_t i = 0; i < function->param_sizes.size(); ++i) {
    auto* p = static_cast<unsigned char*>(params[i]);
    launch.params.emplace_back(p, p + function->param_sizes[i]);
  }
  g_fake->launches.push_back(launch);
  if (g_fake->emulate) g_fake->emulate(launch);
  return CUDA_SUCCESS;
}
CUresult FakeStreamCreate(CUstream* s, unsigned) {
  static uintptr_t next = 0x2000;
  *s = reinterpret_cast<CUstream>(next++);
  ++g_fake->streams;
  return CUDA_SUCCESS;
}
CUresult FakeStreamDestroy(CUstream) {
  --g_fake->streams;
  return CUDA_SUCCESS;
}
CUresult FakeStreamSync(CUstream s) {
  g_fake->synchronized.push_back(s);
  return CUDA_SUCCESS;
}
using Clock = std::chrono::steady_clock;
CUresult FakeEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(new Clock::time_point());
  ++g_fake->events;
  return CUDA_SUCCESS;
}
CUresult FakeEventDestroy(CUevent e) {
  delete reinterpret_cast<Clock::time_point*>(e);
  --g_fake->events;
  return CUDA_SUCCESS;
}
CUresult FakeEventRecord(CUevent e, CUstream) {
  *reinterpret_cast<Clock::time_point*>(e) = Clock::now();
  return CUDA_SUCCESS;
}
CUresult FakeEventSync(CUevent) { return CUDA_SUCCESS; }
CUresult FakeElapsed(float* ms, CUevent a, CUevent b) {
  *ms = std::chrono::duration<float, std::milli>(*reinterpret_cast<Clock::time_point*>(b) -
                                                 *reinterpret_cast<Clock::time_point*>(a))
            .count();
  return CUDA_SUCCESS;
}

DriverApi FakeApi() {
  DriverApi a;
  a.init = FakeInit;
  a.driver_get_version = FakeDriverVersion;
  a.get_error_name = FakeErrorName;
  a.device_get_count = FakeDeviceCount;
  a.device_get = FakeDeviceGet;
  a.device_get_name = FakeDeviceName;
  a.device_total_mem = FakeTotalMem;
  a.device_get_attribute = FakeAttribute;
  a.primary_ctx_retain = FakeRetain;
  a.primary_ctx_release = FakeRelease;
  a.ctx_push_current = FakePush;
  a.ctx_pop_current = FakePop;
  a.mem_alloc = FakeAlloc;
  a.mem_free = FakeFree;
  a.memcpy_htod_async = FakeHtoD;
  a.memcpy_dtoh_async = FakeDtoH;
  a.memcpy_dtod_async = FakeDtoD;
  a.memset_d8_async = FakeMemset;
  a.module_load_data = FakeModuleLoad;
  a.module_unload = FakeModuleUnload;
  a.module_get_function = FakeGetFunction;
  a.func_get_attribute = FakeFuncAttribute;
  a.func_set_attribute = FakeFuncSetAttribute;
  a.launch_kernel = FakeLaunchKernel;
  a.stream_create = FakeStreamCreate;
  a.stream_destroy = FakeStreamDestroy;
  a.stream_synchronize = FakeStreamSync;
  a.event_create = FakeEventCreate;
  a.event_destroy = FakeEventDestroy;
  a.event_record = FakeEventRecord;
  a.event_synchronize = FakeEventSync;
  a.event_elapsed_time = FakeElapsed;
  a.func_get_param_info = FakeParamInfo;
  return a;
}

template <typename T>
T ParamAs(const FakeLaunch& l, size_t i) {
  T v;
  EXPECT_EQ(l.params[i].size(), sizeof v);
  std::memcpy(&v, l.params[i].data(), sizeof v);
  return v;
}

// ----------------------------------------------------------------------------- kernels

const char* kAxpy = R"(extern "C" __global__ void axpy(float* y, const float* x, float a,
                                  unsigned int n) {
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    y[i] += a * x[i];
}
)";

// Two shared-memory blocks, each passed as a byte offset into the dynamic shared memory.
const char* kShared = R"(extern "C" __global__ void shared_two(float* y, unsigned int a_off,
                                        unsigned int b_off) {
  extern __shared__ __align__(16) unsigned char mpcaffe_shared[];
  float* a = (float*)(mpcaffe_shared + a_off);
  int* b = (int*)(mpcaffe_shared + b_off);
  a[threadIdx.x] = threadIdx.x;
  b[0] = 1;
  __syncthreads();
  y[threadIdx.x] = a[blockDim.x - 1 - threadIdx.x] + b[0];
}
)";

class StoreForTest : public ProgramBinaryStore {
 public:
  std::optional<std::string> Load(const ProgramKey& key) override {
    ++loads;
    last_key = key;
    auto it = binaries.find(key.source + "|" + key.arch + "|" + key.options);
    if (it == binaries.end()) return std::nullopt;
    return it->second;
  }
  void Save(const ProgramKey& key, const std::string& binary) override {
    binaries[key.source + "|" + key.arch + "|" + key.options] = binary;
    ++saves;
  }
  void Reject(const ProgramKey& key, const std::string& reason) override {
    binaries.erase(key.source + "|" + key.arch + "|" + key.options);
    rejections.push_back(reason);
  }
  void RecordCompile(double seconds) override { compile_seconds.push_back(seconds); }
  void RecordLoad(double seconds) override { load_seconds.push_back(seconds); }

  std::map<std::string, std::string> binaries;
  int loads = 0, saves = 0;
  ProgramKey last_key;
  std::vector<std::string> rejections;
  std::vector<double> compile_seconds, load_seconds;
};

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &state_;
    state_.kernels["axpy"] = {8, 8, 4, 4};
    state_.kernels["shared_two"] = {8, 4, 4};
    api_ = FakeApi();
    device_ = CreateCudaDevice(api_, 0);
  }
  void TearDown() override {
    SetProgramBinaryStore(nullptr);
    device_.reset();
    EXPECT_EQ(state_.allocated, 0u) << "device memory leaked";
    EXPECT_EQ(state_.events, 0) << "events leaked";
    EXPECT_EQ(state_.modules, 0) << "modules leaked";
    EXPECT_EQ(state_.streams, 0) << "streams leaked";
    EXPECT_EQ(state_.context_depth, 0) << "unbalanced context push/pop";
    for (FakeFunction* f : state_.functions) delete f;
    g_fake = nullptr;
  }

  FakeState state_;
  DriverApi api_;
  std::unique_ptr<Device> device_;
};

TEST_F(FakeCuda, DeviceInfoComesFromTheDriver) {
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.backend, Backend::kCuda);
  EXPECT_EQ(info.name, "Fake GPU 0");
  EXPECT_EQ(info.vendor, "NVIDIA");
  EXPECT_EQ(info.arch, "sm_80");
  EXPECT_EQ(info.platform_name, "CUDA");
  EXPECT_EQ(info.platform_version, "CUDA 12.4");
  EXPECT_NE(info.driver_version.find("CUDA 12.4"), std::string::npos);
  EXPECT_EQ(info.global_mem_bytes, 1u << 20);
  EXPECT_EQ(info.local_mem_bytes, 48u * 1024);
  EXPECT_EQ(info.max_work_group_size, 1024u);
  EXPECT_EQ(info.compute_units, 8);
  EXPECT_TRUE(info.is_gpu);
  EXPECT_TRUE(info.fp16);
  EXPECT_TRUE(info.int64);
  EXPECT_TRUE(info.dot_product);
}

TEST_F(FakeCuda, CopiesWithOffsetsRoundTrip) {
  auto a = device_->Alloc<float>(100);
  auto b = device_->Alloc<float>(100);
  EXPECT_EQ(device_->bytes_in_use(), 800u);
  std::vector<float> host(100);
  std::iota(host.begin(), host.end(), 0.0f);
  device_->Zero(a.mem.get(), 0, 400);
  device_->Write(a + 10, host.data(), 50);
  device_->Copy(a + 10, b + 20, 50);
  device_->Zero(b.mem.get(), 4 * 30, 4 * 5);  // elements 30..34
  std::vector<float> back(100, -1.0f);
  device_->Read(b + 20, back.data(), 50);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(back[i], (i >= 10 && i < 15) ? 0.0f : float(i)) << i;
  device_->Read(a, back.data(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST_F(FakeCuda, CopiesOutsideTheAllocationOrToAnotherDeviceThrow) {
  auto a = device_->Alloc<float>(10);
  std::vector<float> host(20);
  try {
    device_->Write(a + 5, host.data(), 6);
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the allocation of 40 bytes"), std::string::npos)
        << e.what();
  }
  std::unique_ptr<Device> other = CreateCudaDevice(api_, 1);
  auto b = other->Alloc<float>(10);
  EXPECT_THROW(device_->Copy(a, b, 10), DeviceError);
  std::unique_ptr<Queue> foreign_queue = other->CreateQueue();
  EXPECT_THROW(device_->Read(a, host.data(), 10, foreign_queue.get()), DeviceError);
}

TEST_F(FakeCuda, OutOfMemoryNamesDeviceRequestAndBytesInUse) {
  auto held = device_->Allocate(1000);
  try {
    device_->Allocate(2u << 20);
    FAIL();
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << what;
    EXPECT_NE(what.find("Fake GPU 0"), std::string::npos) << what;
    EXPECT_NE(what.find("requested 2097152 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("1000 bytes in use"), std::string::npos) << what;
  }
  EXPECT_EQ(device_->bytes_in_use(), 1000u);
  held.reset();
  EXPECT_EQ(device_->bytes_in_use(), 0u);
  EXPECT_EQ(device_->peak_bytes(), 1000u);
  auto empty = device_->Allocate(0);  // no driver allocation, still a valid object
  EXPECT_EQ(empty->bytes(), 0u);
}

TEST_F(FakeCuda, LaunchPassesPointersWithOffsetsAndValues) {
  auto program = device_->BuildProgram(kAxpy);
  ASSERT_EQ(state_.loaded_images.size(), 1u);
  EXPECT_EQ(state_.loaded_images[0].rfind("\x7f"
                                          "ELF",
                                          0),
            0u)
      << "sm_80 gets a cubin";
  // Emulate axpy on the host, from the parameters exactly as cuLaunchKernel received them.
  state_.emulate = [](const FakeLaunch& l) {
    auto* y = reinterpret_cast<float*>(ParamAs<CUdeviceptr>(l, 0));
    auto* x = reinterpret_cast<const float*>(ParamAs<CUdeviceptr>(l, 1));
    float a = ParamAs<float>(l, 2);
    unsigned n = ParamAs<unsigned>(l, 3);
    for (unsigned i = 0; i < n; ++i) y[i] += a * x[i];
  };
  const unsigned n = 1000;
  auto x = device_->Alloc<float>(n + 7);
  auto y = device_->Alloc<float>(n + 3);
  std::vector<float> hx(n + 7), hy(n + 3);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = 0.5f * i;
  for (size_t i = 0; i < hy.size(); ++i) hy[i] = 1.0f + i;
  device_->Write(x, hx.data(), hx.size());
  device_->Write(y, hy.data(), hy.size());

  Kernel k = program->GetKernel("axpy");
  Event done = k.Arg(y + 3).Arg(x + 7).Arg(2.0f).Arg(n - 3).Launch({n, 1, 1});
  ASSERT_EQ(state_.launches.size(), 1u);
  const FakeLaunch& l = state_.launches[0];
  // Each pointer is its allocation's base moved by the element offset in bytes.
  ASSERT_EQ(state_.allocations.count(ParamAs<CUdeviceptr>(l, 0) - 3 * 4), 1u);
  EXPECT_EQ(state_.allocations[ParamAs<CUdeviceptr>(l, 0) - 3 * 4], (n + 3) * 4);
  ASSERT_EQ(state_.allocations.count(ParamAs<CUdeviceptr>(l, 1) - 7 * 4), 1u);
  EXPECT_EQ(state_.allocations[ParamAs<CUdeviceptr>(l, 1) - 7 * 4], (n + 7) * 4);
  EXPECT_EQ(ParamAs<unsigned>(l, 3), n - 3);
  EXPECT_EQ(l.shared, 0u);
  // The device chose the block: a multiple of the warp, grid covering n.
  EXPECT_EQ(l.block[0] % 32, 0u);
  EXPECT_GE(size_t(l.grid[0]) * l.block[0], size_t(n));
  EXPECT_EQ(l.grid[1], 1u);
  EXPECT_EQ(l.block[1], 1u);
  EXPECT_GE(done.ElapsedMs(), 0.0);

  std::vector<float> out(n + 3);
  device_->Read(y, out.data(), out.size());
  for (unsigned i = 0; i < n + 3; ++i) {
    float want = hy[i] + (i >= 3 && i < n ? 2.0f * hx[i - 3 + 7] : 0.0f);
    ASSERT_EQ(out[i], want) << i;
  }
}

TEST_F(FakeCuda, GridIsTheRoundedUpGroupCountPerDimension) {
  auto program = device_->BuildProgram(kAxpy);
  auto y = device_->Alloc<float>(1);
  Kernel k = program->GetKernel("axpy");
  k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1000, 1, 1}, {128, 1, 1});
  k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({33, 5, 2}, {32, 4, 1});
  ASSERT_EQ(state_.launches.size(), 2u);
  const FakeLaunch& a = state_.launches[0];
  EXPECT_EQ(a.grid[0], 8u);
  EXPECT_EQ(a.block[0], 128u);
  const FakeLaunch& b = state_.launches[1];
  EXPECT_EQ(b.grid[0], 2u);
  EXPECT_EQ(b.grid[1], 2u);
  EXPECT_EQ(b.grid[2], 2u);
  EXPECT_EQ(b.block[0], 32u);
  EXPECT_EQ(b.block[1], 4u);
  EXPECT_EQ(b.block[2], 1u);
  // The fake kernel allows 512 threads per block.
  EXPECT_EQ(k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1024, 1, 1}, {32, 16, 1}).valid(), true);
  EXPECT_THROW(k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1024, 1, 1}, {1024, 1, 1}), DeviceError);
  EXPECT_THROW(k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1, 1, 128}, {1, 1, 128}), DeviceError);
}

TEST_F(FakeCuda, ArgumentCountAndSizesAreCheckedAgainstTheKernel) {
  auto program = device_->BuildProgram(kAxpy);
  auto y = device_->Alloc<float>(1);
  Kernel k = program->GetKernel("axpy");
  try {
    k.Arg(y).Arg(y).Arg(1.0f).Launch({1, 1, 1});
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("3 arguments given, the kernel takes 4"),
              std::string::npos)
        << e.what();
  }
  Kernel k2 = program->GetKernel("axpy");
  try {
    k2.Arg(y).Arg(y).Arg(1.0f).Arg(uint64_t{1}).Launch({1, 1, 1});
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 3: 8 bytes given, the kernel expects 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(state_.launches.empty());
}

TEST_F(FakeCuda, LocalBlocksBecomeAlignedOffsetsIntoDynamicSharedMemory) {
  auto program = device_->BuildProgram(kShared);
  auto y = device_->Alloc<float>(64);
  Kernel k = program->GetKernel("shared_two");
  k.Arg(y).Local(100).Local(8).Launch({64, 1, 1}, {64, 1, 1});
  ASSERT_EQ(state_.launches.size(), 1u);
  const FakeLaunch& l = state_.launches[0];
  EXPECT_EQ(ParamAs<uint32_t>(l, 1), 0u);
  EXPECT_EQ(ParamAs<uint32_t>(l, 2), 112u);
  EXPECT_EQ(l.shared, 128u);

  // Beyond 48 KiB the kernel opts in; beyond the device's opt-in limit the launch is refused.
  k.Arg(y).Local(40 * 1024).Local(20 * 1024).Launch({64, 1, 1}, {64, 1, 1});
  ASSERT_EQ(state_.launches.size(), 2u);
  EXPECT_EQ(state_.launches[1].shared, 60u * 1024);
  EXPECT_EQ(ParamAs<uint32_t>(state_.launches[1], 2), 40u * 1024);
  EXPECT_THROW(k.Arg(y).Local(80 * 1024).Local(40 * 1024).Launch({64, 1, 1}, {64, 1, 1}),
               DeviceError);
}

TEST_F(FakeCuda, QueuesAreStreams) {
  auto program = device_->BuildProgram(kAxpy);
  auto y = device_->Alloc<float>(1);
  std::unique_ptr<Queue> queue = device_->CreateQueue();
  Kernel k = program->GetKernel("axpy");
  k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1, 1, 1}, {1, 1, 1});
  k.Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1, 1, 1}, {1, 1, 1}, queue.get());
  ASSERT_EQ(state_.launches.size(), 2u);
  EXPECT_NE(state_.launches[0].stream, state_.launches[1].stream);
  state_.synchronized.clear();
  queue->Finish();
  ASSERT_EQ(state_.synchronized.size(), 1u);
  EXPECT_EQ(state_.synchronized[0], state_.launches[1].stream);
  device_->Finish();
  EXPECT_EQ(state_.synchronized.back(), state_.launches[0].stream);
}

TEST_F(FakeCuda, DriverErrorsNameTheCallAndTheError) {
  auto program = device_->BuildProgram(kAxpy);
  auto y = device_->Alloc<float>(1);
  state_.fail_launch = CUDA_ERROR_LAUNCH_FAILED;
  try {
    program->GetKernel("axpy").Arg(y).Arg(y).Arg(1.0f).Arg(1u).Launch({1, 1, 1});
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED", 0), 0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("kernel 'axpy'"), std::string::npos);
  }
  try {
    program->GetKernel("no_such_kernel");
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cuModuleGetFunction: CUDA_ERROR_NOT_FOUND", 0), 0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos);
  }
}

TEST_F(FakeCuda, BuildErrorsNameTheDevice) {
  try {
    device_->BuildProgram("extern \"C\" __global__ void k() { nope(); }\n", "-DX=1");
    FAIL();
  } catch (const BuildError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Fake GPU 0"), std::string::npos) << what;
    EXPECT_NE(what.find("-DX=1"), std::string::npos) << what;
    EXPECT_NE(what.find("nope"), std::string::npos) << what;
  }
}

TEST_F(FakeCuda, ProgramsGoThroughTheBinaryStore) {
  auto store = std::make_shared<StoreForTest>();
  SetProgramBinaryStore(store);
  const uint64_t compiles = GetNvrtcStats().compiles;

  auto first = device_->BuildProgram(kAxpy, "-DUNUSED=1");
  EXPECT_FALSE(first->from_cache());
  EXPECT_EQ(store->saves, 1);
  EXPECT_EQ(store->compile_seconds.size(), 1u);
  EXPECT_EQ(store->last_key.backend, "cuda");
  EXPECT_EQ(store->last_key.arch, "sm_80");
  EXPECT_EQ(store->last_key.device, "Fake GPU 0");
  EXPECT_EQ(store->last_key.options, "-DUNUSED=1");
  EXPECT_NE(store->last_key.platform.find("NVRTC " + NvrtcVersion()), std::string::npos);
  EXPECT_EQ(GetNvrtcStats().compiles, compiles + 1);

  auto second = device_->BuildProgram(kAxpy, "-DUNUSED=1");
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(store->load_seconds.size(), 1u);
  EXPECT_EQ(GetNvrtcStats().compiles, compiles + 1) << "a hit must not compile";
  EXPECT_EQ(state_.loaded_images[0], state_.loaded_images[1]);
  EXPECT_NO_THROW(second->GetKernel("axpy"));

  // A stored binary the driver refuses is rejected and rebuilt from source.
  store->binaries.begin()->second = "not a module";
  auto third = device_->BuildProgram(kAxpy, "-DUNUSED=1");
  EXPECT_FALSE(third->from_cache());
  ASSERT_EQ(store->rejections.size(), 1u);
  EXPECT_NE(store->rejections[0].find("CUDA_ERROR_INVALID_IMAGE"), std::string::npos);
  EXPECT_EQ(store->saves, 2);
  EXPECT_EQ(GetNvrtcStats().compiles, compiles + 2);
}

TEST_F(FakeCuda, FakeElfSizeMatchesRealCubins) {
  // Guards the fake itself: it must see the whole cubin NVRTC produced.
  NvrtcOutput out = CompileCuda(kAxpy, "sm_80");
  EXPECT_EQ(ElfSize(reinterpret_cast<const unsigned char*>(out.cubin.data())), out.cubin.size());
}

}  // namespace
}  // namespace mpcaffe::cuda

#elif defined(MPCAFFE_HAVE_CUDA)

TEST(FakeCuda, NeedsCudaHeaders) {
  GTEST_SKIP() << "cuda.h is not in the toolkit's include directories that tests/CMakeLists.txt "
                  "gives test_cuda (CUDAToolkit_INCLUDE_DIRS): the fake-driver tests need it";
}

#endif
