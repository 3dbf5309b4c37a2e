// device/opencl/cl_errors.h — OpenCL status codes as names ("CL_OUT_OF_RESOURCES") and as
// mpcaffe's errors: the OpenCL backend's one way of checking a call.
#pragma once

#include <CL/cl.h>

#include <string>

namespace mpcaffe::opencl {

/// The name of an OpenCL status code, "CL_UNKNOWN_ERROR" for one it does not know.
const char* ClErrorName(cl_int code);

/// Throws DeviceError "call: CL_NAME (code) — context" unless code is CL_SUCCESS; an
/// OutOfMemoryError for the codes that mean the device or host ran out of memory.
void Check(cl_int code, const char* call, const std::string& context = "");

}  // namespace mpcaffe::opencl
