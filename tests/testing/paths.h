// tests/testing/paths.h — where the suites find their files: the source tree (golden texts,
// fuzz cases, caffe.proto) and ../shared (models, papers). Both come from one CMake
// definition each (MPCAFFE_SOURCE_DIR_DEFAULT, MPCAFFE_SHARED_DIR_DEFAULT; see the top-level
// CMakeLists.txt's MPCAFFE_SHARED_DIR), compiled into every suite, so a suite run by hand finds
// the same files as under CTest.
#pragma once

#include <filesystem>
#include <string>

namespace mpcaffe::test_support {

inline std::filesystem::path SourceDir() { return MPCAFFE_SOURCE_DIR_DEFAULT; }
inline std::filesystem::path SharedDir() { return MPCAFFE_SHARED_DIR_DEFAULT; }

}  // namespace mpcaffe::test_support
