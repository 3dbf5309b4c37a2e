// device/device.h — the backend-neutral device API: devices, memory, programs, kernels,
// queues and events. OpenCL and CUDA implement it in device/opencl and device/cuda.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/error.h"

namespace mpcaffe {

enum class Backend { kOpenCL, kCuda };

/// "opencl" or "cuda".
const char* BackendName(Backend backend);

/// What a device is and can do, as reported by its driver.
struct DeviceInfo {
  Backend backend = Backend::kOpenCL;
  std::string name;
  std::string vendor;
  std::string driver_version;
  std::string platform_name;     // OpenCL platform name; "CUDA" for CUDA devices
  std::string platform_version;  // OpenCL platform version; CUDA driver API version
  /// Short lowercase name of the implementation: "pocl", "intel", "oclgrind", "nvidia", "amd",
  /// "apple", "cuda" — else the platform name's first word, lowercased. A device selector.
  std::string implementation;
  std::string arch;              // CUDA "sm_80"; OpenCL device version string
  /// The instruction set the runtime's compiler was told to target through its environment
  /// (Intel's CPU runtime: CL_CONFIG_CPU_TARGET_ARCH, e.g. "core-avx2"; MPCAFFE_ISA=avx2 sets
  /// it), empty for the runtime's own choice. Part of the program cache's and the tuning table's
  /// device keys: the device's name is the same at every level, its binaries and timings are not.
  std::string compile_target;
  bool is_gpu = false;
  uint64_t global_mem_bytes = 0;
  uint64_t local_mem_bytes = 0;
  size_t max_work_group_size = 0;
  int compute_units = 0;
  bool fp16 = false;         // half-precision arithmetic in kernels (cl_khr_fp16, CUDA sm_53+)
  bool int64 = false;        // 64-bit integers in kernels
  // 4-way int8 dot product: CUDA sm_61+ dp4a; cl_khr_integer_dot_product with packed 4×8-bit
  // inputs on an OpenCL 3.x device
  bool dot_product = false;
  /// The byte alignment a view of an allocation (Device::SubMemory) must start at: OpenCL's
  /// CL_DEVICE_MEM_BASE_ADDR_ALIGN (in bytes), 256 on CUDA.
  size_t sub_memory_align = 256;
  /// The device computes on the host's memory (OpenCL CL_DEVICE_HOST_UNIFIED_MEMORY, or a CPU
  /// device): mapping an allocation (HostView) gives its own bytes, no copy.
  bool host_unified_memory = false;
  /// The compiler gets a signed comparison (<, <=, >, >=) of a 64-bit integer with a constant
  /// wrong when it can see the integer was widened from a 32-bit one: Mesa 22.3's rusticl on
  /// llvmpipe makes `(long)i < 3` false for every i (the OpenCL C relational operators give 1
  /// when the relation holds, and int → long keeps the value). Kernels then widen such values
  /// in a form the compiler does not see through (KernelTarget::long_compare_of_int_broken).
  bool long_compare_of_int_broken = false;
  /// `fma()` is a correctly rounded routine the compiler inlines rather than one instruction:
  /// OpenCL requires fma() to round once whether or not the device fuses (CL_FP_FMA unset in
  /// CL_DEVICE_SINGLE_FP_CONFIG), and Mesa's rusticl on llvmpipe then takes libclc's software
  /// routine, whose code makes creating a kernel of a few dozen vector multiply-adds take
  /// minutes and running it far slower than a multiply and an add. Kernels then multiply-add with
  /// `mad()`, whose rounding the OpenCL C standard leaves to the implementation
  /// (KernelTarget::fma_in_software, the writer's $fma word).
  bool fma_in_software = false;
  /// Asking the driver for a program's binary makes it compile more than a launch needs, while
  /// a persistent cache of its own already keeps what the launches compiled (PoCL: a generic
  /// work-group function for every kernel plus each listed local size for every kernel, 4× the
  /// cold compile of a convolution test). Device::BuildProgram then stores a binary only at the
  /// second build of its text (MPCAFFE_BINARIES=always stores it at the first).
  bool binary_costs_compiles = false;
  /// The compiler runs the work-items of a work-group in the lanes of SIMD vectors and splits a
  /// kernel's own vector types into scalars, as GPU compilers do, although the device is a CPU:
  /// Mesa's llvmpipe (NIR scalarizes; each value is a vector of 8 invocations on 256-bit
  /// registers, and a work-group runs on one thread). A work-group of one work-item with float8
  /// vectors then fills one lane in 8 and spills, so libdnn takes the GPU defaults (work-groups of
  /// scalar lanes) where this is set (UsesLaneDefaults).
  bool work_items_in_simd_lanes = false;
  /// Loads whose address differs between the lanes of a work-group cost far more than loads of
  /// one address for every lane (llvmpipe: a checked 64 MiB copy runs at 0.26 GB/s against
  /// 5-8 on PoCL on the same CPU, tests/device/bandwidth_test.cc). The direct convolution then
  /// takes tiles of one work-item per group, whose vector loads are one address for every lane,
  /// although the device otherwise takes lane defaults (DefaultConvConfig).
  bool lane_loads_expensive = false;
  /// The compiler takes vectors of more than 16 lanes (Clang's ext_vector_type(32), which the
  /// portable form of the 512-bit pair product uses; OpenCL C's own vectors stop at 16). Mesa
  /// 22.3's rusticl aborts the process on one ("LLVM ERROR: Unsupported vector type with 32
  /// elements"), so its texts leave that form out (KernelTarget::vectors_beyond_16_lanes).
  bool vectors_beyond_16_lanes = true;
  /// The compiler makes KernelHelper::kBytePairProduct16's byte pair products one instruction
  /// (vpmaddubsw: PoCL, whose Clang takes the x86 built-ins). Intel's CPU runtime compiles for a
  /// SPIR target and runs the portable form, so 4-bit weights save memory there but no
  /// multiplies: libdnn then keeps them where weights dominate the bytes (DefaultGemmConfig).
  bool byte_pair_products = true;
  /// The runtime splits 512-bit vector work into 256-bit halves even at the AVX-512 level
  /// (Intel's CPU runtime), so 16-float vectors are not whole registers there
  /// (TargetProfile::sixteen_lane_registers).
  bool wide_tiles_slow_at_256_bits = false;
  /// Whole forward passes measured slower than on the machine's other CPU runtime: Intel's CPU
  /// runtime against PoCL on the zoo nets (the same convolution kernel texts run slower there),
  /// int8 at the AVX-512 level (fp32 there where fp32_passes_slow_at_avx512 says so), fp32 at
  /// AVX2 (both compilers capped there), where its int8 passes were the faster ones
  /// (SlowNetPasses). The profile rule ranks such a device
  /// after the others of its class (DevicesByProfile); its native fp16 still ranks first for a
  /// net that computes in fp16.
  bool net_passes_slow = false;
  /// ... and at AVX2 too, for the nets without int8 layers: Intel's CPU runtime on an Intel CPU
  /// (Xeon, both compilers capped at AVX2). On AMD CPUs Intel's runtime ran those passes faster
  /// than PoCL (an AVX2-only EPYC: ResNet-50 fp32 93.7 against 124.8 ms; a Zen 4 EPYC capped at
  /// AVX2: ResNet-50, MobileNet v1 and AlexNet faster in 8 of 9 alternating runs), so there it
  /// ranks first at AVX2 (docs/BENCHMARKS.md, "Default configurations").
  bool net_passes_slow_at_avx2 = false;
  /// ... and at AVX-512 for the nets without int8 layers too: Intel's CPU runtime on an AMD CPU.
  /// On an Intel Xeon (AVX-512 VNNI, no AMX) its fp32 passes, with the 1×1 layers' tile of two
  /// 16-pixel vectors, ran faster than PoCL's on 6 of the 7 zoo nets (ResNet-50 36 against 40-50
  /// ms; AlexNet 18.5 against 17.3), so there it ranks first for fp32 nets; on AMD's Zen 4 the
  /// AVX-512 order measured before that tile stays (docs/BENCHMARKS.md, "Default
  /// configurations").
  bool fp32_passes_slow_at_avx512 = false;
  /// A stride-2 row of 16 byte columns (one unaligned move of 16 16-bit words, their low bytes
  /// converted to float: libdnn's int8 row form) runs slower than 8 columns from a 16-byte load
  /// and its even lanes: Intel's CPU runtime; PoCL's runs the 16 faster. libdnn reads it as
  /// TargetProfile::strided_byte_rows_slow.
  bool strided_byte_rows_slow = false;
  /// A work-group's reduction in local memory runs no faster than one work-item walking the
  /// whole row: PoCL's CPU device runs each region between barriers as a loop over the
  /// work-items, which its compiler leaves scalar where the work-item's own loop is innermost
  /// (a softmax of 21841 channels: 0.23 ms by a group of 64, 0.17 by one work-item; Intel's
  /// runtime, which packs work-items into vector lanes, 0.08 against 0.76).
  /// TargetProfile::group_reductions reads it.
  bool group_reductions_slow = false;
  /// The compiler runs AVX-512 VNNI's byte quad products (vpdpbusd) in a helper function that
  /// carries the target attribute (KernelHelper::kByteQuadProduct16's MP_QUAD_FN): PoCL on a host
  /// CPU with avx512vnni (host CPUID). PoCL 3.1's LLVM 15 targets skylake-avx512 on Zen 4 and
  /// takes no -mavx512vnni, but compiles `__attribute__((target("avx512vnni")))` on a function
  /// that is not inlined; the same attribute on code inlined into the work-group function aborts
  /// the process ("LLVM ERROR: Cannot select ... X86ISD::VPDPBUSD"). Intel's runtime compiles
  /// for SPIR (no x86 built-ins), rusticl scalarizes: false there.
  bool byte_quad_products_in_helper = false;
  /// The same compiler also runs AMX's byte tile products (tdpbusd on 16 × 64-byte tiles) in a
  /// helper function with the target attribute (KernelHelper::kByteTileProduct's MP_TILE_FN):
  /// byte_quad_products_in_helper on a host CPU whose AMX tiles this process may use
  /// (HostAmxTilesUsable). Intel's runtime compiles no x86 built-ins: false there.
  bool byte_tile_products_in_helper = false;
  /// The kernel compiler takes Clang's __builtin_prefetch in OpenCL C and emits the CPU's
  /// prefetch instruction (KernelTarget::software_prefetch): PoCL's and Intel's CPU devices,
  /// which compile the text to machine code with Clang. rusticl goes through SPIR-V, whose
  /// translator rejects llvm.prefetch ("SPIRVWriter ... llvm.prefetch"): false there.
  bool software_prefetch = false;
  /// The most work-groups a launch may have along its third dimension (CUDA's gridDim.z:
  /// 65535); 0 where the device sets no limit below size_t's (OpenCL).
  size_t max_groups_dim2 = 0;
  std::vector<std::string> extensions;
};

/// Whether `device`'s compiler runs AVX-512 VNNI's byte quad products in a helper function
/// (DeviceInfo::byte_quad_products_in_helper) and MPCAFFE_ISA leaves this CPU's level as it is
/// (avx2 or generic turn the VNNI form off, as they turn off the 512-bit pair products).
bool ByteQuadsInHelper(const DeviceInfo& device);
/// Whether `device` runs AMX's byte tile products in a helper function
/// (DeviceInfo::byte_tile_products_in_helper), MPCAFFE_ISA leaving this CPU's level as it is.
bool ByteTilesInHelper(const DeviceInfo& device);

/// Whether kernels on this device get the defaults of a device whose compiler maps work-items to
/// SIMD lanes (GPUs, and CPU devices with work_items_in_simd_lanes) rather than those of an
/// OpenCL CPU runtime that runs a work-item per thread with the kernel's own vectors.
inline bool UsesLaneDefaults(const DeviceInfo& device) {
  return device.is_gpu || device.work_items_in_simd_lanes;
}

/// Whether kernels get the defaults of an OpenCL CPU runtime (a work-item per thread, computing
/// in the kernel's own vectors): an OpenCL device without UsesLaneDefaults.
inline bool UsesCpuVectorDefaults(const DeviceInfo& device) {
  return device.backend == Backend::kOpenCL && !UsesLaneDefaults(device);
}

/// Whether the kernels' vectors are structs of scalar lanes rather than the compiler's vector
/// types (CUDA: KernelWriter::AddVector's structs), so that scalar tiles are worth timing beside
/// vector ones and work-groups of lanes are the schedule whatever is_gpu says.
inline bool VectorsAreLaneStructs(const DeviceInfo& device) {
  return device.backend == Backend::kCuda;
}

/// Whether the tuner times the int8 pair-product and 4-bit byte-pair tiles: on an OpenCL CPU
/// runtime (vpmaddwd, vpmaddubsw) and where vectors are lane structs (the helpers' portable
/// arithmetic), not on an OpenCL GPU, whose defaults are scalar lanes.
inline bool TimesPairProductTiles(const DeviceInfo& device) {
  return VectorsAreLaneStructs(device) || !UsesLaneDefaults(device);
}

/// MPCAFFE_MAX_DEVICE_BYTES as a number of bytes (0 when unset); throws DeviceError when it
/// is not a plain decimal number.
uint64_t ByteLimitFromEnvironment();

class Device;

/// One device allocation. Its lifetime is counted in its device's byte counters — unless it is
/// a view of part of another allocation (Device::SubMemory), which counts nothing and keeps its
/// parent alive.
class DeviceMemory {
 public:
  DeviceMemory(Device* device, size_t bytes);
  /// A view of `bytes` bytes of `parent` (not counted).
  DeviceMemory(Device* device, size_t bytes, std::shared_ptr<DeviceMemory> parent);
  virtual ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  Device* device() const { return device_; }
  size_t bytes() const { return bytes_; }
  /// The allocation this one is a view of, or null.
  const std::shared_ptr<DeviceMemory>& parent() const { return parent_; }

 private:
  Device* device_;
  size_t bytes_;
  std::shared_ptr<DeviceMemory> parent_;
};

/// A typed device pointer: an allocation plus an element offset. On OpenCL a kernel receives
/// it as buffer + offset; on CUDA as the base address moved by the offset.
template <typename T>
struct vptr {
  std::shared_ptr<DeviceMemory> mem;
  size_t offset = 0;  // in elements of T

  vptr() = default;
  vptr(std::shared_ptr<DeviceMemory> m, size_t off = 0) : mem(std::move(m)), offset(off) {}
  explicit operator bool() const { return mem != nullptr; }
  vptr operator+(size_t n) const { return vptr(mem, offset + n); }
  /// Elements from the offset to the end of the allocation.
  size_t size() const { return mem ? mem->bytes() / sizeof(T) - offset : 0; }
  size_t byte_offset() const { return offset * sizeof(T); }
};

/// A completed or pending unit of device work. Elapsed time comes from the device's
/// profiling clock.
class Event {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void Wait() = 0;
    virtual double ElapsedMs() = 0;
  };
  Event() = default;
  explicit Event(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  void Wait() const;
  /// Device time between start and end of the work, in milliseconds (waits for it).
  double ElapsedMs() const;
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

/// An in-order command queue (OpenCL) or stream (CUDA).
class Queue {
 public:
  virtual ~Queue() = default;
  /// Blocks until all work submitted to this queue has finished.
  virtual void Finish() = 0;
};

using Dim3 = std::array<size_t, 3>;

/// A compiled kernel with its arguments. Arguments are set in declaration order; a pointer
/// argument is one call whatever the backend spells it as.
class Kernel {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void SetValue(size_t index, const void* value, size_t bytes) = 0;
    virtual void SetPointer(size_t index, DeviceMemory* mem, size_t byte_offset,
                            size_t element_size) = 0;
    virtual void SetLocal(size_t index, size_t bytes) = 0;
    virtual Event Launch(const Dim3& global, const Dim3& local, Queue* queue) = 0;
    /// The work-group size the device prefers as a multiple, and the largest it allows.
    virtual size_t PreferredMultiple() = 0;
    virtual size_t MaxWorkGroupSize() = 0;
  };

  Kernel() = default;
  Kernel(std::string name, std::shared_ptr<Impl> impl, Device* device)
      : name_(std::move(name)), impl_(std::move(impl)), device_(device) {}

  const std::string& name() const { return name_; }
  Device* device() const { return device_; }

  Kernel& Arg(int32_t v) { return Value(&v, sizeof v); }
  Kernel& Arg(uint32_t v) { return Value(&v, sizeof v); }
  Kernel& Arg(int64_t v) { return Value(&v, sizeof v); }
  Kernel& Arg(uint64_t v) { return Value(&v, sizeof v); }
  Kernel& Arg(float v) { return Value(&v, sizeof v); }
  template <typename T>
  Kernel& Arg(const vptr<T>& p) {
    impl_->SetPointer(next_arg_++, p.mem.get(), p.byte_offset(), sizeof(T));
    return *this;
  }
  /// An untyped buffer argument: `byte_offset` into `mem`, elements of `element_size` bytes.
  Kernel& ArgBuffer(DeviceMemory* mem, size_t byte_offset, size_t element_size) {
    impl_->SetPointer(next_arg_++, mem, byte_offset, element_size);
    return *this;
  }
  /// A local (OpenCL) / shared (CUDA) memory argument of `bytes` bytes.
  Kernel& Local(size_t bytes) {
    impl_->SetLocal(next_arg_++, bytes);
    return *this;
  }

  /// Launches over `global` work-items (rounded up to a multiple of `local`). A zero local
  /// size lets the device choose (see Device::LaunchShape). Kernels bound-check their
  /// indices or use the writer's grid-stride loop. Resets the argument position.
  Event Launch(Dim3 global, Dim3 local = {0, 0, 0}, Queue* queue = nullptr);
  /// One-dimensional launch for a grid-stride kernel over `n` items: work-groups of
  /// kLaunch1DLocalSize (so cached binaries can be specialized for it), their number capped.
  Event Launch1D(size_t n, Queue* queue = nullptr);

 private:
  Kernel& Value(const void* v, size_t bytes) {
    impl_->SetValue(next_arg_++, v, bytes);
    return *this;
  }
  std::string name_;
  std::shared_ptr<Impl> impl_;
  Device* device_ = nullptr;
  size_t next_arg_ = 0;
};

/// Hints that help a backend prepare (and cache) a program: the local sizes its kernels will
/// be launched with.
struct ProgramHints {
  std::vector<Dim3> local_sizes;
  /// The hints of a program whose kernels are launched with Kernel::Launch1D.
  static ProgramHints OneDimensional();
};

/// The work-group size Kernel::Launch1D uses (capped by the kernel's maximum).
inline constexpr size_t kLaunch1DLocalSize = 64;

/// Compiled program text for one device.
class Program {
 public:
  virtual ~Program() = default;
  /// A kernel by name; throws DeviceError naming the kernel and the program if absent.
  virtual Kernel GetKernel(const std::string& name) = 0;
  const std::string& source() const { return source_; }
  const std::string& options() const { return options_; }
  /// True when the program came from a stored binary rather than a compile from source.
  bool from_cache() const { return from_cache_; }

 protected:
  std::string source_;
  std::string options_;
  bool from_cache_ = false;
};

/// A compute device of either backend.
/// Everything that can make a binary invalid for another build. A store keys on all of it.
struct ProgramKey {
  std::string backend;           // "opencl" | "cuda"
  std::string platform;          // platform name and version
  std::string device;            // device name
  std::string driver;            // driver version
  std::string arch;              // CUDA architecture ("sm_80"); OpenCL: DeviceInfo::compile_target
  std::string options;           // build options
  std::string source;            // kernel text
};

class Device {
 public:
  virtual ~Device() = default;

  /// Position in DeviceList().
  int index() const { return index_; }
  const DeviceInfo& info() const { return info_; }
  Backend backend() const { return info_.backend; }
  /// "index: backend name" for messages.
  std::string Describe() const;

  /// Allocates `bytes` of device memory; throws OutOfMemoryError naming the device, the
  /// request and the bytes in use when the device cannot.
  virtual std::shared_ptr<DeviceMemory> Allocate(size_t bytes) = 0;
  template <typename T>
  vptr<T> Alloc(size_t count) {
    return vptr<T>(Allocate(count * sizeof(T)));
  }
  /// Bytes [offset, offset + bytes) of `parent` as an allocation of their own: kernels, copies and
  /// fills take it like any other, and write the parent's bytes (a producer writing straight
  /// into its slice of a Concat's output). Null when the device cannot place a buffer at
  /// `offset`: OpenCL sub-buffers must start at a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN;
  /// CUDA views start at multiples of 256 bytes (cuMemAlloc's alignment, which vectorised
  /// kernels may assume). Throws DeviceError when the range lies outside `parent`.
  virtual std::shared_ptr<DeviceMemory> SubMemory(const std::shared_ptr<DeviceMemory>& parent,
                                                  size_t offset, size_t bytes) {
    return nullptr;
  }

  /// Blocking copies; offsets and sizes in bytes.
  virtual void CopyToDevice(const void* host, DeviceMemory* dst, size_t dst_offset, size_t bytes,
                            Queue* queue = nullptr) = 0;
  virtual void CopyToHost(const DeviceMemory* src, size_t src_offset, void* host, size_t bytes,
                          Queue* queue = nullptr) = 0;
  /// Device-to-device copy, asynchronous on the queue.
  virtual void CopyOnDevice(const DeviceMemory* src, size_t src_offset, DeviceMemory* dst,
                            size_t dst_offset, size_t bytes, Queue* queue = nullptr) = 0;
  /// Sets `bytes` bytes to zero, asynchronous on the queue.
  virtual void Zero(DeviceMemory* dst, size_t offset, size_t bytes, Queue* queue = nullptr) = 0;

  /// Maps bytes [offset, offset + bytes) of `mem` into host memory once the queue's earlier work
  /// is done (blocking), for reading or for overwriting (the caller writes every byte; the old
  /// contents need not be read), or returns null when the backend does not map. Unmap (on the
  /// same queue) ends the mapping before the device uses the memory again. Use HostView.
  virtual void* Map(DeviceMemory* mem, size_t offset, size_t bytes, bool overwrite,
                    Queue* queue = nullptr) {
    return nullptr;
  }
  virtual void Unmap(DeviceMemory* mem, void* host, Queue* queue = nullptr) {}

  template <typename T>
  void Write(const vptr<T>& dst, const T* host, size_t count, Queue* queue = nullptr) {
    if (count) CopyToDevice(host, dst.mem.get(), dst.byte_offset(), count * sizeof(T), queue);
  }
  template <typename T>
  void Read(const vptr<T>& src, T* host, size_t count, Queue* queue = nullptr) {
    if (count) CopyToHost(src.mem.get(), src.byte_offset(), host, count * sizeof(T), queue);
  }
  template <typename T>
  void Copy(const vptr<T>& src, const vptr<T>& dst, size_t count, Queue* queue = nullptr) {
    if (count)
      CopyOnDevice(src.mem.get(), src.byte_offset(), dst.mem.get(), dst.byte_offset(),
                   count * sizeof(T), queue);
  }

  /// Builds `source` with `options`: the one load-or-compile-then-save of every backend.
  /// With a program binary store set (GetProgramBinaryStore), a stored binary for this
  /// device's key (BinaryKey) is loaded when the driver accepts it (else rejected from the
  /// store), otherwise the source is compiled and its binary saved. A compile failure throws
  /// BuildError with the device, options, driver log and the numbered source lines around
  /// the first error.
  std::shared_ptr<Program> BuildProgram(const std::string& source, const std::string& options = "",
                                        const ProgramHints& hints = {});

  /// BuildProgram once per (source, options) for the life of the device: the process-wide
  /// entry point for generated kernels (the binary store sits behind BuildProgram).
  std::shared_ptr<Program> GetProgram(const std::string& source, const std::string& options = "",
                                      const ProgramHints& hints = {});

  virtual Queue& default_queue() = 0;
  virtual std::unique_ptr<Queue> CreateQueue() = 0;
  /// The queue a QueueScope on this thread routes work to, or nullptr (the default queue).
  /// Every call that takes `Queue* queue = nullptr` resolves nullptr through it.
  Queue* scoped_queue() const;
  /// The queue work goes to when a call names none: scoped_queue(), else the default queue.
  Queue& current_queue() { return scoped_queue() ? *scoped_queue() : default_queue(); }
  /// Blocks until the current queue's work has finished.
  void Finish() { current_queue().Finish(); }

  /// Local size the device picks for a kernel when the caller gives none (1-D: the kernel's
  /// preferred multiple scaled up to a moderate group; other dimensions 1).
  Dim3 LaunchShape(Kernel::Impl& kernel, const Dim3& global) const;

  /// Most bytes the device may hold at once: the driver's global memory size, lowered by the
  /// artificial limit (MPCAFFE_MAX_DEVICE_BYTES, read when the device is created, or
  /// set_byte_limit()). Allocations beyond it throw OutOfMemoryError before the driver is asked,
  /// and Blob refuses shapes that could never fit.
  uint64_t max_bytes() const;
  /// The artificial per-device limit in bytes (0: none, only the driver's size applies).
  uint64_t byte_limit() const { return byte_limit_.load(); }
  void set_byte_limit(uint64_t bytes) { byte_limit_.store(bytes); }

  /// Bytes currently allocated on the device, and the most held at once since ResetPeak().
  uint64_t bytes_in_use() const { return bytes_in_use_.load(); }
  uint64_t peak_bytes() const { return peak_bytes_.load(); }
  void ResetPeak() { peak_bytes_.store(bytes_in_use_.load()); }

 protected:
  friend class DeviceMemory;
  friend void RegisterDevice(std::unique_ptr<Device> device);
  void CountAlloc(size_t bytes);
  void CountFree(size_t bytes);

  // The backend's part of BuildProgram.
  /// A freshly compiled program, the binary to store (empty when the driver gives none or
  /// `want_binary` was false) and the compile seconds.
  struct Compiled {
    std::shared_ptr<Program> program;
    std::string binary;
    double seconds = 0;
  };
  /// Everything that decides what a stored binary of (source, options) was built by and for.
  virtual ProgramKey BinaryKey(const std::string& source, const std::string& options) const = 0;
  /// The program of a stored binary, or null with the driver's reason in `why`.
  virtual std::shared_ptr<Program> LoadBinary(const std::string& binary, const std::string& source,
                                              const std::string& options, std::string* why) = 0;
  /// Compiles from source (throwing BuildError on failure).
  virtual Compiled Compile(const std::string& source, const std::string& options,
                           const ProgramHints& hints, bool want_binary) = 0;

  DeviceInfo info_;
  int index_ = -1;

 private:
  std::mutex programs_mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Program>> programs_;
  std::atomic<uint64_t> byte_limit_{ByteLimitFromEnvironment()};
  std::atomic<uint64_t> bytes_in_use_{0};
  std::atomic<uint64_t> peak_bytes_{0};
};

/// Host access to bytes [offset, offset + bytes) of a device allocation while the view lives.
/// On a device that computes on host memory (DeviceInfo::host_unified_memory) the view maps the
/// allocation itself: no copy and no second array (AlexNet's 61 M weights are written once, in
/// place). Elsewhere it is an uninitialised host array, read from the device for kRead, copied
/// to the device when the view ends for kOverwrite. kOverwrite's caller writes every byte (the
/// old contents are not read). The device must not use the range until the view ends.
class HostView {
 public:
  enum class Access { kRead, kOverwrite };
  HostView(Device& device, DeviceMemory* mem, size_t offset, size_t bytes, Access access);
  /// Ends the view (Release); an error then is thrown unless an exception is in flight.
  ~HostView() noexcept(false);
  HostView(const HostView&) = delete;
  HostView& operator=(const HostView&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  /// Whether the view is the allocation's own memory (mapped) rather than a host copy.
  bool mapped() const { return mapped_; }
  /// Ends the view now: unmaps, or copies the host array to the device (kOverwrite).
  void Release();

 private:
  Device* device_;
  DeviceMemory* mem_;
  Queue* queue_;
  size_t offset_, bytes_;
  Access access_;
  void* data_ = nullptr;
  bool mapped_ = false;
  std::unique_ptr<uint8_t[]> staging_;
};

/// While alive, this thread's work on `device` that names no queue (kernel launches, copies,
/// fills, BLAS calls, Device::Finish) goes to `queue` instead of the default queue. Scopes nest;
/// other threads are not affected. The MOE layer runs each expert's net on a queue of its own
/// this way, so the device can overlap them; the caller orders queues with Finish.
class QueueScope {
 public:
  QueueScope(Device& device, Queue* queue);
  ~QueueScope();
  QueueScope(const QueueScope&) = delete;
  QueueScope& operator=(const QueueScope&) = delete;

 private:
  const Device* device_;
  Queue* previous_;
};

/// Process-wide counts of device work since the process started (every device): kernel
/// launches (Kernel::Launch) and host synchronisations — a Finish of a queue, a wait for an
/// event, a blocking copy to or from the host. `mpcaffe time` reports them per forward pass.
struct DeviceCounters {
  uint64_t launches = 0;
  uint64_t host_syncs = 0;
};
DeviceCounters GetDeviceCounters();
/// Backends call it at each host synchronisation (see DeviceCounters).
void CountHostSync();

/// Every device of every backend, enumerated once: OpenCL platforms in order of their names
/// (the ICD loader's order follows the directory, which differs between machines), then CUDA.
const std::vector<Device*>& DeviceList();

/// The low-precision types a net computes in, as far as they decide its default device.
struct NetTypes {
  bool fp16 = false;  // a layer computes in fp16
  bool int8 = false;  // a layer computes in int8 (8-bit activations)
  /// A process's default device serves nets of every type (pycaffe's Net, `bench net`): ranked
  /// as for a net that computes in fp16 and int8.
  static NetTypes Any() { return {true, true}; }
};
/// The devices in the order the default-device rule prefers them when neither a selector nor a
/// record of measured passes decides (the profile rule): GPUs, then CPU devices, then CPU
/// devices whose lane loads are expensive (llvmpipe: a pass there takes tens of times longer
/// than on the other runtimes of the same CPU, docs/BENCHMARKS.md); within a class, for a net
/// that computes in fp16, devices with native fp16 first, then for a net that computes in int8,
/// devices whose int8 kernels multiply in byte quads (ByteQuadsInHelper), then devices without
/// DeviceInfo::net_passes_slow. Ties keep DeviceList's order.
std::vector<Device*> DevicesByProfile(NetTypes types = {});
/// DevicesByProfile's key of one device: lower comes first.
int ProfileRank(const DeviceInfo& device, NetTypes types);
/// Whether `device`'s passes of a net computing in `types` count as slow in the profile rule:
/// DeviceInfo::net_passes_slow for nets with int8 layers at the AVX-512 level in use, and for
/// nets without them where the device's fp32_passes_slow_at_avx512 (at AVX-512) or
/// net_passes_slow_at_avx2 (at AVX2) says so (where each was measured).
bool SlowNetPasses(const DeviceInfo& device, NetTypes types);
/// The device MPCAFFE_DEVICE names (see FindDevice), else in an MPI job the device of the
/// process's rank on its node (rank modulo the GPUs, or modulo all devices when there is no
/// GPU), else DevicesByProfile(NetTypes::Any())'s first. Throws DeviceError (with install
/// advice) when there is none, or when MPCAFFE_DEVICE matches no device.
Device& DefaultDevice();
/// Whether DefaultDevice is the user's choice (MPCAFFE_DEVICE) or an MPI rank's, which a
/// choice by measured passes (net/device_choice.h) must not override.
bool DefaultDeviceIsAssigned();
/// Device by index; throws DeviceError listing the valid range.
Device& GetDevice(int index);
/// The first device a selector names, or nullptr: a decimal index; an implementation name
/// ("pocl", "intel", "cuda", ...; DeviceInfo::implementation); "gpu" / "cpu"; else a
/// case-insensitive part of "<platform name> <device name>" ("Intel(R) OpenCL", "EPYC").
Device* FindDevice(const std::string& selector);
/// FindDevice, or a DeviceError that names the selector and lists the devices present.
Device& SelectDevice(const std::string& selector);
/// The selector's device where one is given ("--device" flags), else DefaultDevice().
inline Device& DeviceOrDefault(const std::string& selector) {
  return selector.empty() ? DefaultDevice() : SelectDevice(selector);
}
/// What the registered devices are, one "<index>: <backend> <name> (<implementation>)" a line.
std::string DeviceListText();

/// One line per backend saying what it found or why it contributes no devices.
std::vector<std::string> BackendReports();

/// When MPCAFFE_DUMP_KERNELS=<dir> is set, writes `source` to <dir>/<hash>.<cl|cu> (with the
/// options in a first-line comment) and returns the path; otherwise returns "". Backends call
/// it for every program they build.
std::string DumpKernelIfAsked(Backend backend, const std::string& source,
                              const std::string& options);

/// When MPCAFFE_COMPILE_LOG=<file> is set, appends one tab-separated line per program event:
/// "<event> <backend> <target> <hash> <end time> <seconds> <pid> <first kernel name>" (the end
/// time in seconds since the epoch, the duration in seconds), where event is
/// "compile" (the driver or NVRTC compiled the text), "compile-unstored" (compiled, its binary
/// left for the next build: DeviceInfo::binary_costs_compiles), "load" (a stored binary) or
/// "fail" (the text did not compile), target the device or NVRTC architecture, and hash a
/// 64-bit hash of target, options and text. `make test` gives each CTest entry its own file and
/// scripts/test-budget.py counts them (programs compiled, cache hits, a text compiled twice).
void LogProgramEvent(const char* event, const char* backend, const std::string& target,
                     const std::string& source, const std::string& options, double seconds);

/// Backend registration (used by device/opencl and device/cuda during enumeration).
void RegisterDevice(std::unique_ptr<Device> device);

}  // namespace mpcaffe
