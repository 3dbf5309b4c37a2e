# cmake/install.cmake — `cmake --install <build> --prefix P` installs mpcaffe as a C++ package:
# the libraries (static, or shared with BUILD_SHARED_LIBS=ON), the public headers under
# P/include/mpcaffe/, the `mpcaffe` command, a CMake package (find_package(mpcaffe CONFIG) gives
# mpcaffe::mpcaffe, its dependencies found by find_dependency) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The per-folder libraries, in link order (each uses only those after it).
set(mpcaffe_installed_libraries
    mpcaffe_net mpcaffe_layers mpcaffe_libdnn mpcaffe_quant mpcaffe_proto mpcaffe_cache
    mpcaffe_codegen mpcaffe_device)

# mpcaffe::mpcaffe: every library and the include folders of the installed headers. The headers
# include each other as "folder/file.h", so P/include/mpcaffe is on the path besides P/include
# (programs write #include <mpcaffe/mpcaffe.h>).
add_library(mpcaffe_package INTERFACE)
set_target_properties(mpcaffe_package PROPERTIES EXPORT_NAME mpcaffe)
target_link_libraries(mpcaffe_package INTERFACE ${mpcaffe_installed_libraries})
target_compile_features(mpcaffe_package INTERFACE cxx_std_17)  # the headers need C++17
target_include_directories(mpcaffe_package INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>
  $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/generated>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe>)
add_library(mpcaffe::mpcaffe ALIAS mpcaffe_package)

# Installed programs and shared libraries find the libraries beside them.
set(mpcaffe_rpath "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
foreach(lib ${mpcaffe_installed_libraries})
  string(REPLACE "mpcaffe_" "" short ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short} INSTALL_RPATH "${mpcaffe_rpath}")
endforeach()
set_target_properties(mpcaffe PROPERTIES INSTALL_RPATH "${mpcaffe_rpath}")

install(TARGETS ${mpcaffe_installed_libraries} mpcaffe_package
  EXPORT mpcaffeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS mpcaffe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The image codec plugin (layers/image_codec.h), opened at run time: beside the libraries.
install(TARGETS mpcaffe_image_codec LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The wheel (`pip wheel .` installs only the component "python") carries the command too, for
# `python -m mpcaffe` and mpcaffe.calibrate(), and the plugin in mpcaffe/lib, where both the
# extension (mpcaffe/_mpcaffe*.so) and the command (mpcaffe/bin/mpcaffe) look for it.
if(MPCAFFE_BUILD_PYTHON)
  install(TARGETS mpcaffe RUNTIME DESTINATION mpcaffe/bin COMPONENT python)
  install(TARGETS mpcaffe_image_codec LIBRARY DESTINATION mpcaffe/lib COMPONENT python)
endif()

# The public headers: mpcaffe/mpcaffe.h and what it includes (the closure, nothing more: the
# cpp_package test checks that every installed header compiles alone against the prefix and that
# the installed set is exactly mpcaffe.h's closure). Layer, Quantizer and the kernel writer stay
# private: net/net.h declares Layer only, quant/quantizer_mode.h holds the modes.
set(mpcaffe_public_headers
    codegen/datatype.h device/device.h device/error.h layers/blob.h layers/image_io.h
    net/distributed.h net/net.h
    net/solver.h proto/model_io.h quant/quantizer_mode.h)
foreach(header ${mpcaffe_public_headers})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe/${folder})
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/mpcaffe/mpcaffe.h ${CMAKE_BINARY_DIR}/generated/mpcaffe/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe)
install(FILES ${CMAKE_BINARY_DIR}/generated/proto/caffe.pb.h ${CMAKE_SOURCE_DIR}/proto/caffe.proto
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe/proto)

# The CMake package. Dependencies are exported as imported targets (OpenCL::OpenCL,
# protobuf::libprotobuf, LMDB::LMDB, clblast, NVRTC::NVRTC, ...), which mpcaffeConfig.cmake finds
# again on the consumer's machine, with the Find modules CMake lacks installed beside it: nothing
# in the package names a path of this machine, so the installed tree can move.
set(mpcaffe_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/mpcaffe)
set(MPCAFFE_HAVE_CLBLAST OFF)
if(TARGET clblast)
  set(MPCAFFE_HAVE_CLBLAST ON)
endif()
install(EXPORT mpcaffeTargets NAMESPACE mpcaffe:: DESTINATION ${mpcaffe_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mpcaffeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfig.cmake
  INSTALL_DESTINATION ${mpcaffe_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/mpcaffeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/FindLMDB.cmake ${CMAKE_SOURCE_DIR}/cmake/FindHDF5C.cmake
              ${CMAKE_SOURCE_DIR}/cmake/FindNVRTC.cmake
        DESTINATION ${mpcaffe_cmake_dir})

# The pkg-config file: the libraries in link order; dependencies by their own .pc files (LMDB,
# HDF5, CLBlast, SQLite, OpenCL and protobuf all ship one) and NVRTC, which has none, by name in the
# folder ${cuda_libdir} (--define-variable=cuda_libdir=... where the toolkit is elsewhere).
# Static libraries need every dependency on each link; shared ones only protobuf (the headers
# use its classes), the rest goes to Requires.private / Libs.private (pkg-config --static).
set(mpcaffe_pc_libs "")
foreach(lib ${mpcaffe_installed_libraries})
  string(APPEND mpcaffe_pc_libs " -l${lib}")
endforeach()
set(mpcaffe_pc_deps "sqlite3 OpenCL lmdb hdf5")
if(MPCAFFE_HAVE_CLBLAST)
  string(APPEND mpcaffe_pc_deps " clblast")
endif()
set(mpcaffe_pc_cuda_libdir "")
set(mpcaffe_pc_dep_libs "")
if(MPCAFFE_HAVE_CUDA)
  get_filename_component(mpcaffe_pc_cuda_libdir "${NVRTC_LIBRARY}" DIRECTORY)
  set(mpcaffe_pc_cuda_libdir "cuda_libdir=${mpcaffe_pc_cuda_libdir}")
  set(mpcaffe_pc_dep_libs "-L\${cuda_libdir} -lnvrtc ")
endif()
if(MPCAFFE_HAVE_MPI)  # Open MPI's own pkg-config module (no paths of this machine)
  string(APPEND mpcaffe_pc_deps " ompi-c")
endif()
string(APPEND mpcaffe_pc_dep_libs "-pthread")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND mpcaffe_pc_dep_libs " -l${lib}")
endforeach()
if(BUILD_SHARED_LIBS)
  set(mpcaffe_pc_requires "protobuf")
  set(mpcaffe_pc_requires_private "${mpcaffe_pc_deps}")
  set(mpcaffe_pc_libs_private "${mpcaffe_pc_dep_libs}")
else()
  set(mpcaffe_pc_requires "protobuf ${mpcaffe_pc_deps}")
  set(mpcaffe_pc_requires_private "")
  string(APPEND mpcaffe_pc_libs " ${mpcaffe_pc_dep_libs}")
  set(mpcaffe_pc_libs_private "")
endif()
set(mpcaffe_pc_cflags "-DCL_TARGET_OPENCL_VERSION=${CL_TARGET_OPENCL_VERSION}")
if(MPCAFFE_HAVE_CUDA)
  string(APPEND mpcaffe_pc_cflags " -DMPCAFFE_HAVE_CUDA=1")
endif()
# The prefix relative to the .pc file, so the installed tree can move.
file(RELATIVE_PATH mpcaffe_pc_prefix "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" mpcaffe_pc_prefix "${mpcaffe_pc_prefix}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/mpcaffe.pc.in ${CMAKE_BINARY_DIR}/cmake/mpcaffe.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/mpcaffe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
