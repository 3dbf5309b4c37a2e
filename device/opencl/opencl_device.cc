// device/opencl/opencl_device.cc — the OpenCL backend: every platform's devices, buffers with
// offsets, programs (through the binary store), kernels, queues and profiled events.
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "device/backends.h"
#include "device/device.h"
#include "device/host_isa.h"
#include "device/opencl/cl_errors.h"
#include "device/opencl/opencl_interop.h"
#include "device/program_store.h"

namespace mpcaffe {
namespace {

using opencl::Check;
using opencl::ClErrorName;

/// A string property through a clGet*Info function (size query, then fetch).
template <typename Id, typename Info, typename Getter>
std::string InfoString(Getter get, Id id, Info what) {
  size_t size = 0;
  if (get(id, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  get(id, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceString(cl_device_id id, cl_device_info what) {
  return InfoString(clGetDeviceInfo, id, what);
}

std::string PlatformString(cl_platform_id id, cl_platform_info what) {
  return InfoString(clGetPlatformInfo, id, what);
}

template <typename T>
T DeviceValue(cl_device_id id, cl_device_info what) {
  T value{};
  clGetDeviceInfo(id, what, sizeof value, &value, nullptr);
  return value;
}

class OpenCLQueue : public Queue {
 public:
  OpenCLQueue(cl_context context, cl_device_id device) {
    cl_int err = CL_SUCCESS;
    queue_ = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);
    Check(err, "clCreateCommandQueue");
  }
  ~OpenCLQueue() override {
    clFinish(queue_);
    clReleaseCommandQueue(queue_);
  }
  void Finish() override {
    CountHostSync();
    Check(clFinish(queue_), "clFinish");
  }
  cl_command_queue get() const { return queue_; }

 private:
  cl_command_queue queue_ = nullptr;
};

class OpenCLEvent : public Event::Impl {
 public:
  explicit OpenCLEvent(cl_event event) : event_(event) {}
  ~OpenCLEvent() override { clReleaseEvent(event_); }
  void Wait() override {
    CountHostSync();
    Check(clWaitForEvents(1, &event_), "clWaitForEvents");
  }
  double ElapsedMs() override {
    Wait();
    cl_ulong start = 0, end = 0;
    Check(clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_START, sizeof start, &start,
                                  nullptr),
          "clGetEventProfilingInfo");
    Check(clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo");
    return static_cast<double>(end - start) * 1e-6;
  }

 private:
  cl_event event_;
};

class OpenCLMemory : public DeviceMemory {
 public:
  OpenCLMemory(Device* device, cl_context context, size_t bytes) : DeviceMemory(device, bytes) {
    cl_int err = CL_SUCCESS;
    // A zero-byte request still yields a valid (1-byte) buffer so kernels can take it.
    mem_ = clCreateBuffer(context, CL_MEM_READ_WRITE, bytes ? bytes : 1, nullptr, &err);
    if (err != CL_SUCCESS)
      Check(err, "clCreateBuffer",
            "requested " + std::to_string(bytes) + " bytes on device " + device->Describe() +
                " with " + std::to_string(device->bytes_in_use() - bytes) + " bytes in use");
  }
  /// A sub-buffer (owned: `sub` is released with this object) of `parent`.
  OpenCLMemory(Device* device, cl_mem sub, size_t bytes, std::shared_ptr<DeviceMemory> parent)
      : DeviceMemory(device, bytes, std::move(parent)), mem_(sub) {}
  ~OpenCLMemory() override { clReleaseMemObject(mem_); }
  cl_mem get() const { return mem_; }

 private:
  cl_mem mem_ = nullptr;
};

cl_mem MemOf(const DeviceMemory* m) {
  return static_cast<const OpenCLMemory*>(m)->get();
}

class OpenCLKernel : public Kernel::Impl {
 public:
  OpenCLKernel(cl_kernel kernel, cl_command_queue default_queue, cl_device_id device,
               std::shared_ptr<void> program_keepalive)
      : kernel_(kernel),
        default_queue_(default_queue),
        device_(device),
        program_(std::move(program_keepalive)) {
    clGetKernelInfo(kernel_, CL_KERNEL_NUM_ARGS, sizeof num_args_, &num_args_, nullptr);
  }
  ~OpenCLKernel() override { clReleaseKernel(kernel_); }

  void SetValue(size_t index, const void* value, size_t bytes) override {
    Set(index, bytes, value);
  }
  void SetPointer(size_t index, DeviceMemory* mem, size_t byte_offset,
                  size_t element_size) override {
    // A pointer argument is (buffer, element offset) in the generated OpenCL signature.
    cl_mem buffer = MemOf(mem);
    cl_ulong offset = byte_offset / element_size;
    Set(index, sizeof buffer, &buffer);
    Set(index, sizeof offset, &offset, /*second_half=*/true);
  }
  void SetLocal(size_t index, size_t bytes) override { Set(index, bytes, nullptr); }

  Event Launch(const Dim3& global, const Dim3& local, Queue* queue) override {
    if (physical_ != num_args_) {
      std::string message = "kernel " + Name() + " takes " + std::to_string(num_args_) +
                            " OpenCL arguments, " + std::to_string(physical_) + " were set";
      physical_ = 0;
      throw DeviceError("clEnqueueNDRangeKernel: " + message);
    }
    physical_ = 0;
    cl_command_queue q = queue ? static_cast<OpenCLQueue*>(queue)->get() : default_queue_;
    cl_event event = nullptr;
    // The message only on failure: its kernel name is a runtime query, and a pass of a small
    // net is bound by its launches' host time.
    const cl_int err = clEnqueueNDRangeKernel(q, kernel_, 3, nullptr, global.data(), local.data(),
                                              0, nullptr, &event);
    if (err != CL_SUCCESS)
      Check(err, "clEnqueueNDRangeKernel",
            "kernel " + Name() + ", global " + Shape(global) + ", local " + Shape(local));
    return Event(std::make_shared<OpenCLEvent>(event));
  }
  size_t PreferredMultiple() override {
    size_t m = 1;
    clGetKernelWorkGroupInfo(kernel_, device_, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                             sizeof m, &m, nullptr);
    return m;
  }
  size_t MaxWorkGroupSize() override {
    size_t m = 1;
    clGetKernelWorkGroupInfo(kernel_, device_, CL_KERNEL_WORK_GROUP_SIZE, sizeof m, &m, nullptr);
    return m;
  }

 private:
  void Set(size_t logical, size_t bytes, const void* value, bool second_half = false) {
    if (logical == 0 && !second_half) physical_ = 0;
    cl_int err = clSetKernelArg(kernel_, physical_, bytes, value);
    if (err != CL_SUCCESS) {
      std::string where = "kernel " + Name() + ", argument " + std::to_string(logical) +
                          " (OpenCL index " + std::to_string(physical_) + ")";
      physical_ = 0;
      Check(err, "clSetKernelArg", where);
    }
    ++physical_;
  }
  std::string Name() const {
    char name[256] = {0};
    clGetKernelInfo(kernel_, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, nullptr);
    return name;
  }
  static std::string Shape(const Dim3& d) {
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
  }

  cl_kernel kernel_;
  cl_command_queue default_queue_;
  cl_device_id device_;
  std::shared_ptr<void> program_;
  cl_uint num_args_ = 0;
  cl_uint physical_ = 0;
};

class OpenCLDevice;

class OpenCLProgram : public Program {
 public:
  OpenCLProgram(OpenCLDevice* device, cl_program program, std::string source, std::string options,
                bool from_cache);
  Kernel GetKernel(const std::string& name) override;

 private:
  OpenCLDevice* device_;
  std::shared_ptr<_cl_program> program_;
};

/// PoCL compiles each (kernel, local size) at first launch; a binary fetched with these
/// specializations listed loads without compiling (docs/BENCHMARKS.md, "PoCL"). PoCL 3.1
/// builds one family per binary — small-grid or not, as the first entry says — and uses the
/// small-grid variant for every launch under 65536 work-items per dimension, which is what
/// Kernel::Launch1D issues; so only "-goffs0-smallgrid" entries are listed. Wider launches
/// compile once at their first use.
std::string PoclSpecializations(const ProgramHints& hints) {
  std::string list;
  for (const Dim3& l : hints.local_sizes) {
    if (!list.empty()) list += ",";
    list += std::to_string(l[0]) + "-" + std::to_string(l[1]) + "-" + std::to_string(l[2]) +
            "-goffs0-smallgrid";
  }
  return list;
}

/// The short name of an OpenCL implementation (DeviceInfo::implementation), from what its
/// platform says of itself.
std::string ImplementationName(const std::string& name, const std::string& vendor,
                               const std::string& version) {
  const std::string all = name + " " + vendor + " " + version;
  auto has = [&](const char* word) { return all.find(word) != std::string::npos; };
  if (has("Portable Computing Language") || has("PoCL") || has("pocl")) return "pocl";
  if (has("Oclgrind")) return "oclgrind";
  if (has("NVIDIA")) return "nvidia";
  if (has("Intel")) return "intel";
  if (has("AMD") || has("Advanced Micro Devices")) return "amd";
  if (has("Apple")) return "apple";
  if (has("rusticl")) return "rusticl";
  std::string first = name.substr(0, name.find(' '));
  for (char& c : first) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return first.empty() ? "opencl" : first;
}

// POCL_BINARY_SPECIALIZE_WG is process-wide state: set under this lock, read by PoCL inside
// the same clGetProgramInfo call on this thread. (glibc's setenv is not safe against a
// concurrent getenv elsewhere; PoCL reads it only while fetching binaries.)
std::mutex pocl_env_mutex;

class OpenCLDevice : public Device {
 public:
  OpenCLDevice(cl_platform_id platform, cl_device_id device) : device_(device) {
    info_.backend = Backend::kOpenCL;
    info_.name = DeviceString(device, CL_DEVICE_NAME);
    info_.vendor = DeviceString(device, CL_DEVICE_VENDOR);
    info_.driver_version = DeviceString(device, CL_DRIVER_VERSION);
    info_.platform_name = PlatformString(platform, CL_PLATFORM_NAME);
    info_.platform_version = PlatformString(platform, CL_PLATFORM_VERSION);
    info_.arch = DeviceString(device, CL_DEVICE_VERSION);
    info_.implementation = ImplementationName(info_.platform_name,
                                              PlatformString(platform, CL_PLATFORM_VENDOR),
                                              info_.platform_version);
    info_.is_gpu = (DeviceValue<cl_device_type>(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
    info_.global_mem_bytes = DeviceValue<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
    info_.local_mem_bytes = DeviceValue<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
    info_.max_work_group_size = DeviceValue<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    info_.compute_units = static_cast<int>(DeviceValue<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
    info_.sub_memory_align =
        std::max<size_t>(DeviceValue<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8, 1);
    // Deprecated since OpenCL 2.0 but still answered; a CPU device computes on host memory
    // whatever it says.
    info_.host_unified_memory =
        DeviceValue<cl_bool>(device, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE ||
        (DeviceValue<cl_device_type>(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0;
    std::istringstream ext(DeviceString(device, CL_DEVICE_EXTENSIONS));
    for (std::string e; ext >> e;) info_.extensions.push_back(e);
    auto has = [&](const char* name) {
      for (const auto& e : info_.extensions)
        if (e == name) return true;
      return false;
    };
    info_.fp16 = has("cl_khr_fp16");
    // OpenCL 1.2+ full-profile devices have 64-bit integers; embedded profile needs the ext.
    info_.int64 = DeviceString(device, CL_DEVICE_PROFILE) == "FULL_PROFILE" || has("cles_khr_int64");
    // The packed 4×8-bit built-ins (dot_4x8packed_*) exist in OpenCL C 3.0 only, behind the
    // extension's capability bit for packed inputs.
    if (has("cl_khr_integer_dot_product") && info_.arch.rfind("OpenCL 3.", 0) == 0) {
      cl_bitfield caps = 0;
      if (clGetDeviceInfo(device, CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR, sizeof caps,
                          &caps, nullptr) == CL_SUCCESS)
        info_.dot_product = (caps & CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_PACKED_KHR) != 0;
    }

    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                     reinterpret_cast<cl_context_properties>(platform), 0};
    context_ = clCreateContext(props, 1, &device, nullptr, nullptr, &err);
    Check(err, "clCreateContext", info_.name);
    queue_ = std::make_unique<OpenCLQueue>(context_, device_);
    is_pocl_ = info_.platform_name.find("Portable Computing Language") != std::string::npos;
    // Measured on Mesa 22.3.6 (Debian 12's mesa-opencl-icd), the only rusticl at hand: every
    // rusticl device is assumed to share the compiler's fault until a later Mesa is measured
    // (tests/device/widened_compare_test.cc says when a flagged device compiles it correctly).
    info_.long_compare_of_int_broken = info_.implementation == "rusticl";
    // Intel's CPU runtime leaves CL_FP_FMA unset too, but compiles fma() to the CPU's own
    // instruction (its kernels build in well under a second); rusticl inlines libclc's routine.
    info_.fma_in_software =
        info_.implementation == "rusticl" &&
        (DeviceValue<cl_device_fp_config>(device, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_FMA) == 0;
    // Every rusticl device compiles through NIR, which scalarizes vector types; llvmpipe then runs
    // each work-item in a lane of a 256-bit vector (a GPU-type rusticl device: is_gpu already).
    info_.work_items_in_simd_lanes = info_.implementation == "rusticl";
    info_.lane_loads_expensive = info_.implementation == "rusticl" && !info_.is_gpu;
    info_.vectors_beyond_16_lanes = info_.implementation != "rusticl";
    info_.byte_pair_products = info_.implementation != "intel";  // see DeviceInfo
    info_.wide_tiles_slow_at_256_bits = info_.implementation == "intel" && !info_.is_gpu;
    // Intel's runtime reads its target once, at its initialization: so does this.
    const char* intel_target = std::getenv("CL_CONFIG_CPU_TARGET_ARCH");
    if (info_.implementation == "intel" && intel_target) info_.compile_target = intel_target;
    info_.strided_byte_rows_slow = info_.implementation == "intel" && !info_.is_gpu;
    info_.group_reductions_slow = info_.implementation == "pocl" && !info_.is_gpu;
    info_.net_passes_slow = info_.implementation == "intel" && !info_.is_gpu;
    info_.net_passes_slow_at_avx2 = info_.net_passes_slow && !CpuIsAmd();
    info_.fp32_passes_slow_at_avx512 = info_.net_passes_slow && CpuIsAmd();
    info_.byte_quad_products_in_helper =  // see DeviceInfo: PoCL's CPU device is this host
        info_.implementation == "pocl" && !info_.is_gpu &&
        (DeviceValue<cl_device_type>(device, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0 &&
        CpuHasAvx512Vnni();
    info_.byte_tile_products_in_helper =
        info_.byte_quad_products_in_helper && HostAmxTilesUsable();
    info_.software_prefetch =
        (info_.implementation == "pocl" || info_.implementation == "intel") && !info_.is_gpu;
    // PoCL's binary holds a generic work-group function of every kernel (and each listed
    // specialization), compiled when asked for; its own cache keeps what launches compiled.
    const char* pocl_cache = std::getenv("POCL_KERNEL_CACHE");
    info_.binary_costs_compiles = is_pocl_ && !(pocl_cache && std::string(pocl_cache) == "0");
  }
  ~OpenCLDevice() override {
    queue_.reset();
    clReleaseContext(context_);
  }

  std::shared_ptr<DeviceMemory> Allocate(size_t bytes) override {
    return std::make_shared<OpenCLMemory>(this, context_, bytes);
  }

  std::shared_ptr<DeviceMemory> SubMemory(const std::shared_ptr<DeviceMemory>& parent,
                                          size_t offset, size_t bytes) override {
    if (!parent || offset + bytes > parent->bytes() || bytes == 0)
      throw DeviceError("SubMemory: bytes [" + std::to_string(offset) + ", " +
                        std::to_string(offset + bytes) + ") outside an allocation of " +
                        std::to_string(parent ? parent->bytes() : 0) + " bytes");
    // clCreateSubBuffer refuses an origin that is not a multiple of the base address alignment
    // (CL_MISALIGNED_SUB_BUFFER_OFFSET), and a sub-buffer of a sub-buffer.
    if (offset % info_.sub_memory_align != 0 || parent->parent()) return nullptr;
    cl_buffer_region region{offset, bytes};
    cl_int err = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(MemOf(parent.get()), CL_MEM_READ_WRITE,
                                   CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    if (err == CL_MISALIGNED_SUB_BUFFER_OFFSET) return nullptr;
    Check(err, "clCreateSubBuffer",
          std::to_string(bytes) + " bytes at offset " + std::to_string(offset));
    return std::make_shared<OpenCLMemory>(this, sub, bytes, parent);
  }

  void CopyToDevice(const void* host, DeviceMemory* dst, size_t dst_offset, size_t bytes,
                    Queue* queue) override {
    if (!bytes) return;
    CheckRange(dst, dst_offset, bytes, "CopyToDevice");
    CountHostSync();  // blocking write
    Check(clEnqueueWriteBuffer(Q(queue), MemOf(dst), CL_TRUE, dst_offset, bytes, host, 0,
                               nullptr, nullptr),
          "clEnqueueWriteBuffer");
  }
  void CopyToHost(const DeviceMemory* src, size_t src_offset, void* host, size_t bytes,
                  Queue* queue) override {
    if (!bytes) return;
    CheckRange(src, src_offset, bytes, "CopyToHost");
    CountHostSync();  // blocking read
    Check(clEnqueueReadBuffer(Q(queue), MemOf(src), CL_TRUE, src_offset, bytes, host, 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
  }
  void CopyOnDevice(const DeviceMemory* src, size_t src_offset, DeviceMemory* dst,
                    size_t dst_offset, size_t bytes, Queue* queue) override {
    if (!bytes) return;
    CheckRange(src, src_offset, bytes, "CopyOnDevice (source)");
    CheckRange(dst, dst_offset, bytes, "CopyOnDevice (destination)");
    Check(clEnqueueCopyBuffer(Q(queue), MemOf(src), MemOf(dst), src_offset, dst_offset, bytes, 0,
                              nullptr, nullptr),
          "clEnqueueCopyBuffer");
  }
  void Zero(DeviceMemory* dst, size_t offset, size_t bytes, Queue* queue) override {
    if (!bytes) return;
    CheckRange(dst, offset, bytes, "Zero");
    const cl_uchar zero = 0;
    Check(clEnqueueFillBuffer(Q(queue), MemOf(dst), &zero, 1, offset, bytes, 0, nullptr, nullptr),
          "clEnqueueFillBuffer");
  }

  void* Map(DeviceMemory* mem, size_t offset, size_t bytes, bool overwrite,
            Queue* queue) override {
    if (!bytes) return nullptr;
    CheckRange(mem, offset, bytes, "Map");
    CountHostSync();  // blocking map
    cl_int err = CL_SUCCESS;
    void* host = clEnqueueMapBuffer(Q(queue), MemOf(mem), CL_TRUE,
                                    overwrite ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ,
                                    offset, bytes, 0, nullptr, nullptr, &err);
    if (err != CL_SUCCESS)
      Check(err, "clEnqueueMapBuffer", std::to_string(bytes) + " bytes on " + Describe());
    return host;
  }
  void Unmap(DeviceMemory* mem, void* host, Queue* queue) override {
    Check(clEnqueueUnmapMemObject(Q(queue), MemOf(mem), host, 0, nullptr, nullptr),
          "clEnqueueUnmapMemObject");
  }

  ProgramKey BinaryKey(const std::string& source, const std::string& options) const override {
    ProgramKey key;
    key.backend = "opencl";
    key.platform = info_.platform_name + " " + info_.platform_version;
    key.device = info_.name;
    key.driver = info_.driver_version;
    key.arch = info_.compile_target;
    key.options = options;
    key.source = source;
    return key;
  }
  std::shared_ptr<Program> LoadBinary(const std::string& binary, const std::string& source,
                                      const std::string& options, std::string* why) override {
    cl_program program = FromBinary(binary, options, why);
    if (!program) return nullptr;
    return std::make_shared<OpenCLProgram>(this, program, source, options, true);
  }
  Compiled Compile(const std::string& source, const std::string& options,
                   const ProgramHints& hints, bool want_binary) override {
    const auto start = std::chrono::steady_clock::now();
    cl_program program = FromSource(source, options);
    Compiled out;
    out.seconds = Seconds(start);
    if (want_binary) out.binary = Binary(program, hints);
    out.program = std::make_shared<OpenCLProgram>(this, program, source, options, false);
    return out;
  }

  Queue& default_queue() override { return *queue_; }
  std::unique_ptr<Queue> CreateQueue() override {
    return std::make_unique<OpenCLQueue>(context_, device_);
  }
  cl_command_queue default_cl_queue() const { return queue_->get(); }
  cl_device_id id() const { return device_; }

 private:
  cl_command_queue Q(Queue* queue) const {
    if (!queue) queue = scoped_queue();
    return queue ? static_cast<OpenCLQueue*>(queue)->get() : queue_->get();
  }
  static double Seconds(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  void CheckRange(const DeviceMemory* m, size_t offset, size_t bytes, const char* what) const {
    if (offset + bytes > m->bytes() || offset + bytes < offset)
      throw DeviceError(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                        std::to_string(offset + bytes) + ") outside a buffer of " +
                        std::to_string(m->bytes()) + " bytes on " + Describe());
  }

  std::string BuildLog(cl_program program) const {
    size_t size = 0;
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    if (size) clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
  }

  cl_program FromSource(const std::string& source, const std::string& options) {
    const char* text = source.c_str();
    size_t length = source.size();
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(context_, 1, &text, &length, &err);
    Check(err, "clCreateProgramWithSource", info_.name);
    // "-w" (OpenCL's own option): PoCL's compiler prints its warnings on the process's standard
    // error, where a user can do nothing with them (at the AVX2 level, one per float16 argument
    // of a builtin: "changes the ABI"). Errors still fail the build with their log below.
    const std::string quiet = options.empty() ? "-w" : options + " -w";
    err = clBuildProgram(program, 1, &device_, quiet.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
      std::string log = BuildLog(program);
      clReleaseProgram(program);
      std::string what = std::string("clBuildProgram: ") + ClErrorName(err);
      throw BuildError(FormatBuildFailure(what, Describe() + " (" + info_.platform_name + ", driver " +
                                                    info_.driver_version + ")",
                                          options, log, source),
                       log);
    }
    return program;
  }

  /// A program from a stored binary, or null (with the reason) when the driver refuses it.
  cl_program FromBinary(const std::string& binary, const std::string& options, std::string* why) {
    const unsigned char* data = reinterpret_cast<const unsigned char*>(binary.data());
    size_t length = binary.size();
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program program =
        clCreateProgramWithBinary(context_, 1, &device_, &length, &data, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
      *why = std::string("clCreateProgramWithBinary: ") +
             ClErrorName(err != CL_SUCCESS ? err : status);
      if (program) clReleaseProgram(program);
      return nullptr;
    }
    err = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
      *why = std::string("clBuildProgram (binary): ") + ClErrorName(err) + ": " + BuildLog(program);
      clReleaseProgram(program);
      return nullptr;
    }
    return program;
  }

  /// CL_PROGRAM_BINARIES of a built program; empty when the driver gives none.
  std::string Binary(cl_program program, const ProgramHints& hints) {
    std::unique_lock<std::mutex> lock(pocl_env_mutex, std::defer_lock);
    std::string previous;
    bool had_previous = false;
    if (is_pocl_ && !hints.local_sizes.empty()) {
      lock.lock();
      if (const char* p = std::getenv("POCL_BINARY_SPECIALIZE_WG")) {
        previous = p;
        had_previous = true;
      }
      setenv("POCL_BINARY_SPECIALIZE_WG", PoclSpecializations(hints).c_str(), 1);
    }
    size_t size = 0;
    std::string binary;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) ==
            CL_SUCCESS &&
        size > 0) {
      binary.resize(size);
      unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
      if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS)
        binary.clear();
    }
    if (lock.owns_lock()) {
      if (had_previous)
        setenv("POCL_BINARY_SPECIALIZE_WG", previous.c_str(), 1);
      else
        unsetenv("POCL_BINARY_SPECIALIZE_WG");
    }
    return binary;
  }

  cl_device_id device_;
  cl_context context_ = nullptr;
  std::unique_ptr<OpenCLQueue> queue_;
  bool is_pocl_ = false;
};

OpenCLProgram::OpenCLProgram(OpenCLDevice* device, cl_program program, std::string source,
                             std::string options, bool from_cache)
    : device_(device), program_(program, [](cl_program p) { clReleaseProgram(p); }) {
  source_ = std::move(source);
  options_ = std::move(options);
  from_cache_ = from_cache;
}

Kernel OpenCLProgram::GetKernel(const std::string& name) {
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program_.get(), name.c_str(), &err);
  Check(err, "clCreateKernel", "kernel '" + name + "' on " + device_->Describe());
  auto impl = std::make_shared<OpenCLKernel>(kernel, device_->default_cl_queue(), device_->id(),
                                             std::shared_ptr<void>(program_));
  return Kernel(name, impl, device_);
}

}  // namespace

bool PoclWorkersMayBePinned() {
  for (const char* local_ranks : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(local_ranks); v && std::atoi(v) > 1) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  const int n = CPU_COUNT(&set);
  for (int cpu = 0; cpu < n; ++cpu)
    if (!CPU_ISSET(cpu, &set)) return false;
  return n > 1;
}

std::string EnumerateOpenCL() {
  // Mesa's rusticl lists its CPU device (llvmpipe) only when RUSTICL_ENABLE names it, and reads
  // the variable when the ICD loader first loads it: at the first clGetPlatformIDs, below. So
  // that `mpcaffe devices` lists rusticl with no help, ask for llvmpipe unless the user set
  // RUSTICL_ENABLE (even empty: `RUSTICL_ENABLE=` keeps rusticl's CPU device away). Setting it
  // replaces rusticl's default driver list, which enables no driver in the Mesa versions
  // measured (22.3). Once per process (DeviceList's call_once); like POCL_BINARY_SPECIALIZE_WG
  // (Binary, above), glibc's setenv is not safe against a getenv on another thread at once.
  setenv("RUSTICL_ENABLE", "llvmpipe", /*overwrite=*/0);
  // MPCAFFE_ISA=avx2 on an AVX-512 CPU holds the CPU runtimes' compilers to AVX2 as well, so
  // that the target profile's level (ActiveHostIsa) is the level the kernels are compiled for:
  // Intel's runtime through CL_CONFIG_CPU_TARGET_ARCH; PoCL through the kernel-library variant
  // (Debian's distro build, whose CPU name follows the variant and ignores POCL_LLVM_CPU_NAME)
  // and the CPU name (PoCL built for one host). Each read once, at the first clGetPlatformIDs;
  // a variable the user set is kept.
  // PoCL's workers pinned one per CPU: unpinned, the scheduler at times leaves two of them on
  // one CPU for a whole process (every kernel of MobileNet v1's first layers 1.7x slower in
  // such a process, docs/BENCHMARKS.md). Kept when the user set POCL_AFFINITY.
  if (PoclWorkersMayBePinned()) setenv("POCL_AFFINITY", "1", /*overwrite=*/0);
  if (ActiveHostIsa() == HostIsa::kAvx2 && CpuHostIsa() == HostIsa::kAvx512) {
    setenv("CL_CONFIG_CPU_TARGET_ARCH", "core-avx2", /*overwrite=*/0);
    setenv("POCL_KERNELLIB_NAME", "avx2", /*overwrite=*/0);
    setenv("POCL_LLVM_CPU_NAME", "haswell", /*overwrite=*/0);
  }
  cl_uint num_platforms = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &num_platforms);
  if (err != CL_SUCCESS || num_platforms == 0)
    return std::string("opencl: no platform (clGetPlatformIDs: ") + ClErrorName(err) +
           "); install an ICD such as pocl-opencl-icd";
  std::vector<cl_platform_id> platforms(num_platforms);
  clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
  // The ICD loader lists platforms in the order it reads its vendor directory, which is not
  // the same on every machine: order them by name so device indices are reproducible.
  std::stable_sort(platforms.begin(), platforms.end(), [](cl_platform_id a, cl_platform_id b) {
    return PlatformString(a, CL_PLATFORM_NAME) < PlatformString(b, CL_PLATFORM_NAME);
  });
  int count = 0;
  std::string problems;
  for (cl_platform_id platform : platforms) {
    cl_uint num_devices = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &num_devices) != CL_SUCCESS)
      continue;
    std::vector<cl_device_id> devices(num_devices);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, num_devices, devices.data(), nullptr);
    for (cl_device_id d : devices) {
      try {
        RegisterDevice(std::make_unique<OpenCLDevice>(platform, d));
        ++count;
      } catch (const Error& e) {
        problems += std::string("; skipped a device: ") + e.what();
      }
    }
  }
  return "opencl: " + std::to_string(num_platforms) + " platform(s), " + std::to_string(count) +
         " device(s)" + problems;
}

}  // namespace mpcaffe

// device/opencl/opencl_interop.h
namespace mpcaffe::opencl {

cl_mem NativeBuffer(const DeviceMemory& mem) {
  if (mem.device()->backend() != Backend::kOpenCL)
    throw DeviceError("NativeBuffer: the allocation belongs to " + mem.device()->Describe() +
                      ", not an OpenCL device");
  return MemOf(&mem);
}

cl_command_queue NativeQueue(Device& device, Queue* queue) {
  if (device.backend() != Backend::kOpenCL)
    throw DeviceError("NativeQueue: " + device.Describe() + " is not an OpenCL device");
  if (!queue) queue = device.scoped_queue();
  return queue ? static_cast<OpenCLQueue*>(queue)->get()
               : static_cast<OpenCLDevice&>(device).default_cl_queue();
}

}  // namespace mpcaffe::opencl
