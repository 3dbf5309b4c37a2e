// device/cuda/cuda_kernel.cc — CUDA kernels: functions looked up in a loaded module, their
// arguments checked against the driver's parameter sizes, and launches with shared memory laid out.
#include <cstring>
#include <limits>
#include <utility>

#include "device/cuda/cuda_objects.h"

namespace mpcaffe {
namespace cuda {

Kernel CudaProgram::GetKernel(const std::string& name) {
  CUfunction function = nullptr;
  {
    ContextScope scope(*device_);
    CUresult r = device_->api().module_get_function(&function, module_, name.c_str());
    if (r != CUDA_SUCCESS)
      throw DeviceError("cuModuleGetFunction: " + ErrorName(device_->api(), r) + ": no kernel '" +
                        name + "' in the program (device " + device_->Describe() +
                        "; kernels must be declared extern \"C\" __global__)");
  }
  return Kernel(name, std::make_shared<CudaKernel>(shared_from_this(), function, name), device_);
}

CudaKernel::CudaKernel(std::shared_ptr<CudaProgram> program, CUfunction function, std::string name)
    : program_(std::move(program)),
      device_(program_->device()),
      function_(function),
      name_(std::move(name)) {
  const DriverApi& api = device_->api();
  ContextScope scope(*device_);
  int v = 0;
  device_->Check(api.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function_),
                 "cuFuncGetAttribute", Where());
  max_threads_ = static_cast<size_t>(v);
  device_->Check(
      api.func_get_attribute(&static_shared_, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_),
      "cuFuncGetAttribute", Where());
  if (api.func_get_param_info) {
    // Parameters are numbered until the driver answers CUDA_ERROR_INVALID_VALUE (no such
    // index); any other answer means it cannot tell, and launches go unchecked.
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; r == CUDA_SUCCESS; ++i) {
      size_t offset = 0, size = 0;
      r = api.func_get_param_info(function_, i, &offset, &size);
      if (r == CUDA_SUCCESS) param_sizes_.push_back(size);
    }
    param_sizes_known_ = r == CUDA_ERROR_INVALID_VALUE;
  }
}

CudaKernel::Arg& CudaKernel::At(size_t index) {
  if (index >= args_.size()) args_.resize(index + 1);
  return args_[index];
}

void CudaKernel::SetValue(size_t index, const void* value, size_t bytes) {
  Arg& arg = At(index);
  arg.set = true;
  arg.local = false;
  arg.value.assign(static_cast<const unsigned char*>(value),
                   static_cast<const unsigned char*>(value) + bytes);
}

void CudaKernel::SetPointer(size_t index, DeviceMemory* mem, size_t byte_offset,
                            size_t /*element_size*/) {
  // CUDA kernels take the moved address; there is no separate offset parameter.
  CUdeviceptr address = 0;
  if (mem) {
    const std::string call = Where() + " argument " + std::to_string(index);
    address = device_->Address(mem, byte_offset, 0, call.c_str());
  }
  SetValue(index, &address, sizeof address);
}

void CudaKernel::SetLocal(size_t index, size_t bytes) {
  Arg& arg = At(index);
  arg.set = true;
  arg.local = true;
  arg.local_bytes = bytes;
  arg.value.assign(sizeof(uint32_t), 0);  // the offset is filled in at launch
}

Event CudaKernel::Launch(const Dim3& global, const Dim3& local, Queue* queue) {
  const DriverApi& api = device_->api();
  // Arguments: every index set, shared-memory blocks laid out 16-byte aligned in order.
  size_t dynamic_shared = 0;
  std::vector<void*> params(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    Arg& arg = args_[i];
    if (!arg.set) throw DeviceError(Where() + ": argument " + std::to_string(i) + " was not set");
    if (arg.local) {
      if (dynamic_shared > std::numeric_limits<uint32_t>::max())
        throw DeviceError(Where() + ": shared memory offset overflows 32 bits");
      const uint32_t offset = static_cast<uint32_t>(dynamic_shared);
      std::memcpy(arg.value.data(), &offset, sizeof offset);
      dynamic_shared += AlignUp(arg.local_bytes, 16);
    }
    params[i] = arg.value.data();
  }
  if (param_sizes_known_) {
    if (param_sizes_.size() != args_.size())
      throw DeviceError(Where() + ": " + std::to_string(args_.size()) +
                        " arguments given, the kernel takes " +
                        std::to_string(param_sizes_.size()));
    for (size_t i = 0; i < args_.size(); ++i) {
      if (param_sizes_[i] != args_[i].value.size())
        throw DeviceError(Where() + " argument " + std::to_string(i) + ": " +
                          std::to_string(args_[i].value.size()) + " bytes given, the kernel " +
                          "expects " + std::to_string(param_sizes_[i]));
    }
  }

  unsigned int grid[3], block[3];
  size_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    if (local[d] == 0 || global[d] == 0)
      throw DeviceError(Where() + ": zero launch size in dimension " + std::to_string(d));
    const size_t groups = (global[d] + local[d] - 1) / local[d];
    if (local[d] > device_->max_block()[d] || groups > device_->max_grid()[d])
      throw DeviceError(Where() + ": launch of " + std::to_string(global[d]) + " items in " +
                        "groups of " + std::to_string(local[d]) + " exceeds the device's " +
                        "limits in dimension " + std::to_string(d) + " (block " +
                        std::to_string(device_->max_block()[d]) + ", grid " +
                        std::to_string(device_->max_grid()[d]) + ")");
    block[d] = static_cast<unsigned int>(local[d]);
    grid[d] = static_cast<unsigned int>(groups);
    threads *= local[d];
  }
  if (threads > max_threads_)
    throw DeviceError(Where() + ": work-group of " + std::to_string(threads) +
                      " threads exceeds the kernel's limit of " + std::to_string(max_threads_));
  const size_t total_shared = dynamic_shared + static_cast<size_t>(static_shared_);
  if (total_shared > static_cast<size_t>(device_->shared_per_block_optin()))
    throw DeviceError(Where() + ": " + std::to_string(total_shared) +
                      " bytes of shared memory requested, the device allows " +
                      std::to_string(device_->shared_per_block_optin()) + " per block");

  CUstream stream = device_->StreamOf(queue, "Kernel::Launch");
  ContextScope scope(*device_);
  // Beyond the default per-block limit a kernel must opt in to larger dynamic shared memory.
  if (total_shared > static_cast<size_t>(device_->shared_per_block()) &&
      dynamic_shared_opted_ < static_cast<int>(dynamic_shared)) {
    device_->Check(
        api.func_set_attribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(dynamic_shared)),
        "cuFuncSetAttribute", Where());
    dynamic_shared_opted_ = static_cast<int>(dynamic_shared);
  }
  auto event = std::make_shared<CudaEvent>(*device_);
  event->RecordStart(stream);
  device_->Check(api.launch_kernel(function_, grid[0], grid[1], grid[2], block[0], block[1],
                                   block[2], static_cast<unsigned int>(dynamic_shared), stream,
                                   params.empty() ? nullptr : params.data(), nullptr),
                 "cuLaunchKernel", Where());
  event->RecordEnd(stream);
  return Event(event);
}

}  // namespace cuda
}  // namespace mpcaffe
