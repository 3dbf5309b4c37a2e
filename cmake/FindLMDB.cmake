# cmake/FindLMDB.cmake — find_package(LMDB): the Lightning Memory-Mapped Database library (the
# Data layer's LMDB reader; Debian liblmdb-dev), which ships no CMake package. Gives the imported
# target LMDB::LMDB. Installed with mpcaffe's CMake package, so its exported targets name
# LMDB::LMDB and the consumer's machine says where the library is.
find_path(LMDB_INCLUDE_DIR lmdb.h)
find_library(LMDB_LIBRARY lmdb)
mark_as_advanced(LMDB_INCLUDE_DIR LMDB_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LMDB REQUIRED_VARS LMDB_LIBRARY LMDB_INCLUDE_DIR)

if(LMDB_FOUND AND NOT TARGET LMDB::LMDB)
  add_library(LMDB::LMDB UNKNOWN IMPORTED)
  set_target_properties(LMDB::LMDB PROPERTIES
    IMPORTED_LOCATION "${LMDB_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LMDB_INCLUDE_DIR}")
endif()
