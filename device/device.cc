// device/device.cc — backend-neutral parts of the device layer: the device list, memory
// counters, launch-shape choice and the program binary store hook.
#include "device/device.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <cstring>
#include <fcntl.h>
#include <initializer_list>
#include <sys/stat.h>
#include <unistd.h>

#include "device/backends.h"
#include "device/host_isa.h"
#include "device/program_store.h"
#include "device/settings.h"

namespace mpcaffe {

const char* BackendName(Backend backend) {
  return backend == Backend::kOpenCL ? "opencl" : "cuda";
}

namespace {

struct Registry {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<Device*> view;
  std::vector<std::string> reports;
};

Registry& TheRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry;  // intentionally never destroyed: drivers outlive static dtors
    return r;
  }();
  return *registry;
}

std::once_flag enumerate_once;

void EnumerateAll() {
  std::call_once(enumerate_once, [] {
    Registry& r = TheRegistry();
    r.reports.push_back(EnumerateOpenCL());
    r.reports.push_back(EnumerateCuda());
  });
}

std::mutex store_mutex;
std::shared_ptr<ProgramBinaryStore> the_store;

}  // namespace

void RegisterDevice(std::unique_ptr<Device> device) {
  Registry& r = TheRegistry();
  device->index_ = static_cast<int>(r.devices.size());
  r.view.push_back(device.get());
  r.devices.push_back(std::move(device));
}

const std::vector<Device*>& DeviceList() {
  EnumerateAll();
  return TheRegistry().view;
}

std::vector<std::string> BackendReports() {
  EnumerateAll();
  return TheRegistry().reports;
}

static std::string NoDeviceAdvice() {
  std::ostringstream os;
  os << "no compute device found.\n";
  for (const auto& line : BackendReports()) os << "  " << line << "\n";
  os << "Install an OpenCL driver, e.g. on Debian/Ubuntu: apt-get install pocl-opencl-icd "
        "(CPU) — or a GPU vendor's OpenCL/CUDA driver.";
  return os.str();
}

Device& GetDevice(int index) {
  const auto& list = DeviceList();
  if (list.empty()) throw DeviceError(NoDeviceAdvice());
  if (index < 0 || index >= static_cast<int>(list.size()))
    throw DeviceError("device index " + std::to_string(index) + " out of range: " +
                      std::to_string(list.size()) + " device(s), indices 0.." +
                      std::to_string(list.size() - 1));
  return *list[index];
}

static std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string DeviceListText() {
  std::ostringstream os;
  for (Device* d : DeviceList())
    os << "  " << d->Describe() << " (" << d->info().implementation << ")\n";
  return os.str();
}

Device* FindDevice(const std::string& selector) {
  const auto& list = DeviceList();
  if (selector.empty()) return nullptr;
  if (selector.find_first_not_of("0123456789") == std::string::npos) {
    const long index = std::strtol(selector.c_str(), nullptr, 10);
    return index < static_cast<long>(list.size()) ? list[index] : nullptr;
  }
  const std::string want = Lower(selector);
  for (Device* d : list)
    if (d->info().implementation == want) return d;
  if (want == "gpu" || want == "cpu")
    for (Device* d : list)
      if (d->info().is_gpu == (want == "gpu")) return d;
  for (Device* d : list)
    if (Lower(d->info().platform_name + " " + d->info().name).find(want) != std::string::npos)
      return d;
  return nullptr;
}

Device& SelectDevice(const std::string& selector) {
  const auto& list = DeviceList();
  if (list.empty()) throw DeviceError(NoDeviceAdvice());
  if (Device* d = FindDevice(selector)) return *d;
  throw DeviceError("no device matches '" + selector +
                    "' (an index, an implementation name such as pocl or intel, gpu/cpu, or part "
                    "of the platform and device name); devices present:\n" + DeviceListText());
}

Device& DefaultDevice() {
  const auto& list = DeviceList();
  if (list.empty()) throw DeviceError(NoDeviceAdvice());
  if (const std::string& env = GetSettings().device; !env.empty()) {
    try {
      return SelectDevice(env);
    } catch (const DeviceError& e) {
      throw DeviceError(std::string("MPCAFFE_DEVICE: ") + e.what());
    }
  }
  // One device per rank of an MPI job (by the rank on this node): the GPUs when there are
  // any, else every device, rank modulo their number.
  if (const std::string& local = GetSettings().mpi_local_rank; !local.empty()) {
    std::vector<Device*> pool;
    for (Device* d : list)
      if (d->info().is_gpu) pool.push_back(d);
    if (pool.empty()) pool = list;
    const long rank = std::strtol(local.c_str(), nullptr, 10);
    return *pool[static_cast<size_t>(std::max(0L, rank)) % pool.size()];
  }
  return *DevicesByProfile(NetTypes::Any()).front();
}

bool DefaultDeviceIsAssigned() {
  return !GetSettings().device.empty() || !GetSettings().mpi_local_rank.empty();
}

bool ByteQuadsInHelper(const DeviceInfo& device) {
  return device.byte_quad_products_in_helper && ActiveHostIsa() == CpuHostIsa();
}

bool ByteTilesInHelper(const DeviceInfo& device) {
  return device.byte_tile_products_in_helper && ByteQuadsInHelper(device);
}

bool SlowNetPasses(const DeviceInfo& device, NetTypes types) {
  // int8 nets at the AVX-512 level; nets without int8 layers where the device says so for the
  // level (at AVX-512 fp32 passes ran faster on Intel's runtime on an Intel CPU, slower on AMD's;
  // at AVX2 int8 nets ran faster on Intel's runtime, fp32 nets level or slower on an Intel CPU
  // and faster on AMD's: docs/BENCHMARKS.md).
  if (!device.net_passes_slow) return false;
  if (ActiveHostIsa() >= HostIsa::kAvx512) return types.int8 || device.fp32_passes_slow_at_avx512;
  return device.net_passes_slow_at_avx2 && !types.int8;
}

int ProfileRank(const DeviceInfo& device, NetTypes types) {
  const int device_class = device.is_gpu ? 0 : device.lane_loads_expensive ? 2 : 1;
  const int no_fp16 = types.fp16 && !device.fp16 ? 1 : 0;
  // The int8 convolutions of a device whose compiler runs VNNI's byte quads take four byte
  // products per 32-bit lane where the others take two 16-bit ones.
  const int no_byte_quads = types.int8 && !ByteQuadsInHelper(device) ? 1 : 0;
  const int slow_passes = SlowNetPasses(device, types) ? 1 : 0;
  return 8 * device_class + 4 * no_fp16 + 2 * no_byte_quads + slow_passes;
}

std::vector<Device*> DevicesByProfile(NetTypes types) {
  std::vector<Device*> order = DeviceList();
  std::stable_sort(order.begin(), order.end(), [types](const Device* a, const Device* b) {
    return ProfileRank(a->info(), types) < ProfileRank(b->info(), types);
  });
  return order;
}

std::string Device::Describe() const {
  return std::to_string(index_) + ": " + BackendName(info_.backend) + " " + info_.name;
}

DeviceMemory::DeviceMemory(Device* device, size_t bytes) : device_(device), bytes_(bytes) {
  device_->CountAlloc(bytes_);
}

DeviceMemory::DeviceMemory(Device* device, size_t bytes, std::shared_ptr<DeviceMemory> parent)
    : device_(device), bytes_(bytes), parent_(std::move(parent)) {}

DeviceMemory::~DeviceMemory() {
  if (!parent_) device_->CountFree(bytes_);
}

uint64_t ByteLimitFromEnvironment() {
  const std::string& text = GetSettings().max_device_bytes;
  if (text.empty()) return 0;
  const char* v = text.c_str();
  char* end = nullptr;
  errno = 0;
  const unsigned long long limit = std::strtoull(v, &end, 10);
  if (*end != '\0' || errno == ERANGE || *v == '-')
    throw DeviceError(std::string("MPCAFFE_MAX_DEVICE_BYTES='") + v +
                      "' is not a number of bytes");
  return limit;
}

uint64_t Device::max_bytes() const {
  const uint64_t limit = byte_limit_.load();
  const uint64_t total = info_.global_mem_bytes;
  if (limit && total) return std::min(limit, total);
  return limit ? limit : total;
}

void Device::CountAlloc(size_t bytes) {
  // Refuses before the driver is asked: a failed request leaves the counters untouched.
  const uint64_t limit = max_bytes();
  uint64_t in_use = bytes_in_use_.load();
  do {
    if (limit && (bytes > limit || in_use > limit - bytes)) {
      const uint64_t artificial = byte_limit_.load();
      throw OutOfMemoryError(
          "out of memory on device " + Describe() + ": requested " + std::to_string(bytes) +
          " bytes with " + std::to_string(in_use) + " in use, limit " + std::to_string(limit) +
          (artificial && artificial == limit
               ? " (MPCAFFE_MAX_DEVICE_BYTES=" + std::to_string(artificial) + ")"
               : " (the device's global memory)"));
    }
  } while (!bytes_in_use_.compare_exchange_weak(in_use, in_use + bytes));
  const uint64_t now = in_use + bytes;
  uint64_t peak = peak_bytes_.load();
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
}

void Device::CountFree(size_t bytes) { bytes_in_use_.fetch_sub(bytes); }

Dim3 Device::LaunchShape(Kernel::Impl& kernel, const Dim3& global) const {
  const size_t multiple = std::max<size_t>(1, kernel.PreferredMultiple());
  const size_t max_group = std::max<size_t>(1, kernel.MaxWorkGroupSize());
  Dim3 local = {1, 1, 1};
  if (global[1] <= 1 && global[2] <= 1) {
    // 1-D: a few multiples of the preferred size, never more than the work needs.
    size_t want = std::min<size_t>(max_group, std::max<size_t>(multiple, 64));
    while (want > multiple && want / 2 >= global[0]) want /= 2;
    local[0] = std::max<size_t>(1, std::min(want, max_group));
  } else {
    local[0] = std::min(multiple, max_group);
    local[1] = std::max<size_t>(1, std::min<size_t>(max_group / local[0], 8));
  }
  return local;
}

void Event::Wait() const {
  if (impl_) impl_->Wait();
}

double Event::ElapsedMs() const { return impl_ ? impl_->ElapsedMs() : 0.0; }

namespace {
// Per thread: the queue a QueueScope set for a device (few devices, so a short list).
thread_local std::vector<std::pair<const Device*, Queue*>> scoped_queues;

Queue** ScopedSlot(const Device* device) {
  for (auto& [d, q] : scoped_queues)
    if (d == device) return &q;
  return nullptr;
}
}  // namespace

Queue* Device::scoped_queue() const {
  Queue** slot = ScopedSlot(this);
  return slot ? *slot : nullptr;
}

HostView::HostView(Device& device, DeviceMemory* mem, size_t offset, size_t bytes, Access access)
    : device_(&device),
      mem_(mem),
      queue_(&device.current_queue()),
      offset_(offset),
      bytes_(bytes),
      access_(access) {
  if (offset + bytes > mem->bytes() || offset + bytes < offset)
    throw DeviceError("HostView: bytes [" + std::to_string(offset) + ", " +
                      std::to_string(offset + bytes) + ") outside a buffer of " +
                      std::to_string(mem->bytes()) + " bytes on " + device.Describe());
  if (bytes == 0) return;
  if (device.info().host_unified_memory) {
    data_ = device.Map(mem, offset, bytes, access == Access::kOverwrite, queue_);
    mapped_ = data_ != nullptr;
  }
  if (mapped_) return;
  staging_.reset(new uint8_t[bytes]);  // uninitialised: read into or overwritten
  data_ = staging_.get();
  if (access == Access::kRead) device.CopyToHost(mem, offset, data_, bytes, queue_);
}

HostView::~HostView() noexcept(false) {
  if (std::uncaught_exceptions() == 0) {
    Release();
    return;
  }
  try {
    Release();
  } catch (const std::exception&) {
    // Another error is already on its way; this one would only hide it.
  }
}

void HostView::Release() {
  if (!data_) return;
  void* data = data_;
  data_ = nullptr;
  if (mapped_) {
    device_->Unmap(mem_, data, queue_);
  } else if (access_ == Access::kOverwrite) {
    device_->CopyToDevice(data, mem_, offset_, bytes_, queue_);
  }
  staging_.reset();
}

QueueScope::QueueScope(Device& device, Queue* queue) : device_(&device) {
  Queue** slot = ScopedSlot(device_);
  if (!slot) {
    scoped_queues.emplace_back(device_, nullptr);
    slot = &scoped_queues.back().second;
  }
  previous_ = *slot;
  *slot = queue;
}

QueueScope::~QueueScope() {
  if (Queue** slot = ScopedSlot(device_)) *slot = previous_;
}

namespace {
std::atomic<uint64_t> g_launches{0}, g_host_syncs{0};
}  // namespace

DeviceCounters GetDeviceCounters() {
  DeviceCounters c;
  c.launches = g_launches.load(std::memory_order_relaxed);
  c.host_syncs = g_host_syncs.load(std::memory_order_relaxed);
  return c;
}

void CountHostSync() { g_host_syncs.fetch_add(1, std::memory_order_relaxed); }

Event Kernel::Launch(Dim3 global, Dim3 local, Queue* queue) {
  next_arg_ = 0;
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (!queue && device_) queue = device_->scoped_queue();
  for (auto& g : global) g = std::max<size_t>(g, 1);
  if (local[0] == 0) local = device_->LaunchShape(*impl_, global);
  for (int d = 0; d < 3; ++d) {
    local[d] = std::max<size_t>(local[d], 1);
    global[d] = (global[d] + local[d] - 1) / local[d] * local[d];
  }
  return impl_->Launch(global, local, queue);
}

Event Kernel::Launch1D(size_t n, Queue* queue) {
  const size_t local = std::max<size_t>(1, std::min(kLaunch1DLocalSize, impl_->MaxWorkGroupSize()));
  // A grid-stride loop covers the rest. The cap keeps launches under 65 536 work-items: PoCL
  // builds (and the kernel cache stores) its small-grid variant only, and few iterations per
  // work-item let it spread and vectorize the work (AlexNet's relu1 on PoCL: 3.4 ms with 64
  // groups, 0.3 ms with 1023).
  const size_t max_groups = std::max<size_t>(1, 65535 / local);
  const size_t groups = std::min(max_groups, (std::max<size_t>(n, 1) + local - 1) / local);
  return Launch({groups * local, 1, 1}, {local, 1, 1}, queue);
}

/// MPCAFFE_BINARIES: "always" or "auto" (also unset); anything else is a mistake to name.
static bool StoresEveryBinary() {
  const std::string& value = GetSettings().binaries;
  if (value.empty() || value == "auto") return false;
  if (value == "always") return true;
  throw DeviceError("MPCAFFE_BINARIES='" + value + "': expected 'auto' or 'always'");
}

std::shared_ptr<Program> Device::BuildProgram(const std::string& source, const std::string& options,
                                             const ProgramHints& hints) {
  DumpKernelIfAsked(info_.backend, source, options);
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const char* backend = BackendName(info_.backend);
  const std::shared_ptr<ProgramBinaryStore> store = GetProgramBinaryStore();
  const std::optional<ProgramKey> key =
      store ? std::optional<ProgramKey>(BinaryKey(source, options)) : std::nullopt;
  if (store) {
    if (std::optional<std::string> binary = store->Load(*key)) {
      std::string why;
      if (std::shared_ptr<Program> program = LoadBinary(*binary, source, options, &why)) {
        store->RecordLoad(seconds());
        LogProgramEvent("load", backend, Describe(), source, options, seconds());
        return program;
      }
      store->Reject(*key, why);
    }
  }
  // Where a binary costs the driver compiles of its own, store it once the text is built again.
  const bool want_binary =
      store && (StoresEveryBinary() || !info_.binary_costs_compiles || store->WasBuilt(*key));
  Compiled compiled;
  try {
    compiled = Compile(source, options, hints, want_binary);
  } catch (const BuildError&) {
    LogProgramEvent("fail", backend, Describe(), source, options, seconds());
    throw;
  }
  if (store) {
    store->RecordCompile(compiled.seconds);
    if (!compiled.binary.empty())
      store->Save(*key, compiled.binary);
    else if (!want_binary)
      store->NoteBuilt(*key);
  }
  // Logged once the binary is stored: a later build of the same text in this run is a load.
  LogProgramEvent(store && !want_binary ? "compile-unstored" : "compile", backend, Describe(),
                  source, options, seconds());
  return compiled.program;
}

std::shared_ptr<Program> Device::GetProgram(const std::string& source, const std::string& options,
                                            const ProgramHints& hints) {
  std::lock_guard<std::mutex> lock(programs_mutex_);
  auto& slot = programs_[{options, source}];
  if (!slot) slot = BuildProgram(source, options, hints);
  return slot;
}

ProgramHints ProgramHints::OneDimensional() { return ProgramHints{{{kLaunch1DLocalSize, 1, 1}}}; }

std::string DumpKernelIfAsked(Backend backend, const std::string& source,
                              const std::string& options) {
  const std::string& dir_setting = GetSettings().dump_kernels;
  if (dir_setting.empty()) return "";
  const char* dir = dir_setting.c_str();
  ::mkdir(dir, 0755);
  // FNV-1a over options and text: stable across builds, distinct per program.
  uint64_t h = 1469598103934665603ull;
  for (const std::string* part : {&options, &source})
    for (unsigned char c : *part) h = (h ^ c) * 1099511628211ull;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
  const std::string path = std::string(dir) + "/" + name +
                           (backend == Backend::kOpenCL ? ".cl" : ".cu");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "// build options: " << (options.empty() ? "(none)" : options) << "\n" << source;
  if (!out) {
    std::fprintf(stderr, "mpcaffe: warning: MPCAFFE_DUMP_KERNELS: cannot write %s\n", path.c_str());
    return "";
  }
  return path;
}

namespace {

/// FNV-1a over the parts: stable across builds and processes, distinct per program.
uint64_t ProgramHash(std::initializer_list<const std::string*> parts) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string* part : parts) {
    for (unsigned char c : *part) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator, so ("ab", "c") differs from ("a", "bc")
  }
  return h;
}

/// The name of the first kernel the text defines ("?" when none is found): enough to tell a
/// reader of the compile log which family a program belongs to.
std::string FirstKernelName(const std::string& source) {
  // The qualifier, then attributes (vec_type_hint, reqd_work_group_size) up to "void ".
  for (const char* marker : {"__kernel ", "kernel void ", "__global__ "}) {
    size_t at = source.find(marker);
    if (at == std::string::npos) continue;
    at = source.find("void ", at);
    if (at == std::string::npos) continue;
    at += std::strlen("void ");
    size_t end = at;
    while (end < source.size() && (std::isalnum(static_cast<unsigned char>(source[end])) ||
                                   source[end] == '_'))
      ++end;
    if (end > at) return source.substr(at, end - at);
  }
  return "?";
}

}  // namespace

void LogProgramEvent(const char* event, const char* backend, const std::string& target,
                     const std::string& source, const std::string& options, double seconds) {
  const std::string& path = GetSettings().compile_log;
  if (path.empty()) return;
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  char line[512];
  const int n = std::snprintf(
      line, sizeof line, "%s\t%s\t%s\t%016llx\t%.3f\t%.4f\t%ld\t%s\n", event, backend,
      target.c_str(), static_cast<unsigned long long>(ProgramHash({&target, &options, &source})),
      now, seconds, static_cast<long>(::getpid()), FirstKernelName(source).c_str());
  if (n <= 0) return;
  // One write(2) of a line with O_APPEND: lines of concurrent processes (MPI ranks, the cache
  // tests' workers) never interleave.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const size_t len = std::min(static_cast<size_t>(n), sizeof line - 1);
  if (::write(fd, line, len) != static_cast<ssize_t>(len)) {
    // A compile log that cannot be written loses counts, never a result.
  }
  ::close(fd);
}

void SetProgramBinaryStore(std::shared_ptr<ProgramBinaryStore> store) {
  std::lock_guard<std::mutex> lock(store_mutex);
  the_store = std::move(store);
}

std::shared_ptr<ProgramBinaryStore> GetProgramBinaryStore() {
  std::lock_guard<std::mutex> lock(store_mutex);
  return the_store;
}

}  // namespace mpcaffe
