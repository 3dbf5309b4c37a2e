// device/backends.h — the enumeration entry points each backend provides to device.cc.
#pragma once

#include <string>

namespace mpcaffe {

/// Registers every OpenCL device; returns one line saying what was found or why nothing.
std::string EnumerateOpenCL();
/// Registers every CUDA device; returns one line saying what was found or why nothing (no
/// toolkit at build time, no libcuda.so.1, no device, ...).
std::string EnumerateCuda();

/// Whether EnumerateOpenCL pins PoCL's workers, worker i to CPU i (POCL_AFFINITY=1, unless the
/// user set it): the calling thread may run on exactly CPUs 0 … n − 1, n > 1 (PoCL starts a
/// worker per CPU it may use and pins by index, so a set such as {4, 5} would pin outside it),
/// and the process is not one of several MPI ranks on the node (their workers would be pinned
/// to the same CPUs).
bool PoclWorkersMayBePinned();

}  // namespace mpcaffe
