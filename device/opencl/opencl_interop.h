// device/opencl/opencl_interop.h — the OpenCL handles behind mpcaffe buffers and queues, for
// libraries that work on them directly (CLBlast in libdnn/blas.cc).
#pragma once

#include <CL/cl.h>

#include "device/device.h"

namespace mpcaffe::opencl {

/// The cl_mem of an OpenCL allocation (not retained: valid while `mem` lives). Throws
/// DeviceError when `mem` belongs to a device of another backend.
cl_mem NativeBuffer(const DeviceMemory& mem);

/// The cl_command_queue of `queue`, or of the device's default queue when `queue` is null (not
/// retained). Throws DeviceError when `device` is not an OpenCL device.
cl_command_queue NativeQueue(Device& device, Queue* queue = nullptr);

}  // namespace mpcaffe::opencl
