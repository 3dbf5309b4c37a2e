# cmake/FindHDF5C.cmake — find_package(HDF5C): the HDF5 C library alone (the HDF5Data and
# HDF5Output layers; Debian libhdf5-dev, which puts it under hdf5/serial). Gives the imported
# target HDF5C::HDF5C. CMake's own FindHDF5 compiles a C test program, which a consumer's C++-only
# project cannot; this module only looks for the header and the library. Installed with
# mpcaffe's CMake package, so its exported targets name HDF5C::HDF5C, never this machine's paths.
find_path(HDF5C_INCLUDE_DIR hdf5.h PATH_SUFFIXES hdf5/serial hdf5)
find_library(HDF5C_LIBRARY NAMES hdf5_serial hdf5 PATH_SUFFIXES hdf5/serial)
mark_as_advanced(HDF5C_INCLUDE_DIR HDF5C_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(HDF5C REQUIRED_VARS HDF5C_LIBRARY HDF5C_INCLUDE_DIR)

if(HDF5C_FOUND AND NOT TARGET HDF5C::HDF5C)
  add_library(HDF5C::HDF5C UNKNOWN IMPORTED)
  set_target_properties(HDF5C::HDF5C PROPERTIES
    IMPORTED_LOCATION "${HDF5C_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${HDF5C_INCLUDE_DIR}")
endif()
