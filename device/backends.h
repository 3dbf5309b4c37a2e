// device/backends.h — the enumeration entry points each backend provides to device.cc.
#pragma once

#include <string>

namespace mpcaffe {

/// Registers every OpenCL device; returns one line saying what was found or why nothing.
std::string EnumerateOpenCL();
/// Registers every CUDA device; returns one line saying what was found or why nothing (no
/// toolkit at build time, no libcuda.so.1, no device, ...).
std::string EnumerateCuda();

}  // namespace mpcaffe
