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
# The wheel (`pip wheel .` installs only the component "python") carries the command too, for
# `python -m mpcaffe` and mpcaffe.calibrate().
if(MPCAFFE_BUILD_PYTHON)
  install(TARGETS mpcaffe RUNTIME DESTINATION mpcaffe/bin COMPONENT python)
endif()

# The public headers: mpcaffe/mpcaffe.h and what it includes (the closure, nothing more; the
# list is checked by the cpp_package test, which compiles against the installed copy only).
set(mpcaffe_public_headers
    codegen/datatype.h codegen/kernel_writer.h device/device.h device/error.h layers/blob.h
    layers/elementwise.h layers/layer.h net/net.h net/solver.h net/distributed.h proto/model_io.h
    quant/fixed_point.h quant/quant_params.h quant/quantizer.h)
foreach(header ${mpcaffe_public_headers})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe/${folder})
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/mpcaffe/mpcaffe.h ${CMAKE_BINARY_DIR}/generated/mpcaffe/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe)
install(FILES ${CMAKE_BINARY_DIR}/generated/proto/caffe.pb.h ${CMAKE_SOURCE_DIR}/proto/caffe.proto
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mpcaffe/proto)

# The CMake package.
set(mpcaffe_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/mpcaffe)
install(EXPORT mpcaffeTargets NAMESPACE mpcaffe:: DESTINATION ${mpcaffe_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mpcaffeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfig.cmake
  INSTALL_DESTINATION ${mpcaffe_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/mpcaffeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/mpcaffeConfigVersion.cmake
        DESTINATION ${mpcaffe_cmake_dir})

# The pkg-config file: the same libraries, in link order, and what they link.
set(mpcaffe_pc_libs "")
foreach(lib ${mpcaffe_installed_libraries})
  string(APPEND mpcaffe_pc_libs " -l${lib}")
endforeach()
set(mpcaffe_pc_extra "${MPCAFFE_LMDB_LIBRARY}")
if(CLBLAST_LIBRARY AND CLBLAST_INCLUDE_DIR)
  string(APPEND mpcaffe_pc_extra " ${CLBLAST_LIBRARY}")
endif()
if(MPCAFFE_HAVE_CUDA)
  get_target_property(mpcaffe_pc_nvrtc CUDA::nvrtc IMPORTED_LOCATION)
  string(APPEND mpcaffe_pc_extra " ${mpcaffe_pc_nvrtc}")
endif()
if(MPCAFFE_HAVE_MPI)
  foreach(lib ${MPCAFFE_MPI_LIBRARIES})
    string(APPEND mpcaffe_pc_extra " ${lib}")
  endforeach()
endif()
string(APPEND mpcaffe_pc_extra " -pthread")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND mpcaffe_pc_extra " -l${lib}")
endforeach()
set(mpcaffe_pc_cflags "-DCL_TARGET_OPENCL_VERSION=${CL_TARGET_OPENCL_VERSION}")
if(MPCAFFE_HAVE_CUDA)
  string(APPEND mpcaffe_pc_cflags " -DMPCAFFE_HAVE_CUDA=1")
endif()
if(CLBLAST_LIBRARY AND CLBLAST_INCLUDE_DIR)
  string(APPEND mpcaffe_pc_cflags " -DMPCAFFE_HAVE_CLBLAST=1")
endif()
# The prefix relative to the .pc file, so the installed tree can move.
file(RELATIVE_PATH mpcaffe_pc_prefix "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" mpcaffe_pc_prefix "${mpcaffe_pc_prefix}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/mpcaffe.pc.in ${CMAKE_BINARY_DIR}/cmake/mpcaffe.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cmake/mpcaffe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
