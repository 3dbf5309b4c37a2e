# cmake/FindOpenCV.cmake — find_package(OpenCV COMPONENTS core imgproc imgcodecs): OpenCV's own
# CMake package where it is installed (Debian ships OpenCVConfig.cmake only in the whole
# libopencv-dev), else the headers and the libraries of the per-module Debian packages
# (libopencv-core-dev, libopencv-imgproc-dev, libopencv-imgcodecs-dev) found one by one. Either
# way it gives OpenCV's own imported targets (opencv_core, opencv_imgproc, ...) and OpenCV_LIBS
# naming them. Installed with mpcaffe's CMake package, so its exported targets name opencv_*
# and the consumer's machine says where the libraries are.
set(_opencv_components ${OpenCV_FIND_COMPONENTS})
if(NOT _opencv_components)
  set(_opencv_components core imgproc imgcodecs)
endif()

include(FindPackageHandleStandardArgs)
find_package(OpenCV CONFIG QUIET COMPONENTS ${_opencv_components})
if(OpenCV_FOUND)
  find_package_handle_standard_args(OpenCV CONFIG_MODE)
  return()
endif()

find_path(OpenCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
mark_as_advanced(OpenCV_INCLUDE_DIR)
set(OpenCV_LIBS "")
set(_opencv_required OpenCV_INCLUDE_DIR)
foreach(component ${_opencv_components})
  find_library(OpenCV_${component}_LIBRARY opencv_${component})
  mark_as_advanced(OpenCV_${component}_LIBRARY)
  list(APPEND _opencv_required OpenCV_${component}_LIBRARY)
  if(OpenCV_${component}_LIBRARY AND OpenCV_INCLUDE_DIR)
    set(OpenCV_${component}_FOUND TRUE)
    if(NOT TARGET opencv_${component})
      add_library(opencv_${component} UNKNOWN IMPORTED)
      set_target_properties(opencv_${component} PROPERTIES
        IMPORTED_LOCATION "${OpenCV_${component}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${OpenCV_INCLUDE_DIR}")
    endif()
    list(APPEND OpenCV_LIBS opencv_${component})
  endif()
endforeach()

find_package_handle_standard_args(OpenCV REQUIRED_VARS ${_opencv_required} HANDLE_COMPONENTS)
set(OpenCV_INCLUDE_DIRS "${OpenCV_INCLUDE_DIR}")
unset(_opencv_required)
unset(_opencv_components)
