# cmake/FindNVRTC.cmake — find_package(NVRTC): the CUDA toolkit's run-time compiler library,
# located through CMake's FindCUDAToolkit (CUDAToolkit_ROOT, nvcc on PATH, /usr/local/cuda).
# Gives the imported target NVRTC::NVRTC: the library file alone, because FindCUDAToolkit's
# CUDA::nvrtc also links the toolkit's stub libcuda.so, which would make every program need
# libcuda.so.1 (mpcaffe opens the driver with dlopen, so it runs where there is none).
# Installed with mpcaffe's CMake package, so its exported targets name NVRTC::NVRTC, not a path.
if(NOT CUDAToolkit_FOUND)
  find_package(CUDAToolkit QUIET)
endif()
if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc)
  get_target_property(NVRTC_LIBRARY CUDA::nvrtc IMPORTED_LOCATION)
  set(NVRTC_VERSION ${CUDAToolkit_VERSION})
else()
  set(NVRTC_LIBRARY NVRTC_LIBRARY-NOTFOUND)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NVRTC REQUIRED_VARS NVRTC_LIBRARY VERSION_VAR NVRTC_VERSION)

if(NVRTC_FOUND AND NOT TARGET NVRTC::NVRTC)
  add_library(NVRTC::NVRTC UNKNOWN IMPORTED)
  set_target_properties(NVRTC::NVRTC PROPERTIES IMPORTED_LOCATION "${NVRTC_LIBRARY}")
endif()
