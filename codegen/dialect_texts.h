// codegen/dialect_texts.h — helper texts of the dialect table (codegen/dialect.cc) that live in
// their own files.
#pragma once

namespace mpcaffe {

/// KernelHelper::kByteQuadSlide16 in OpenCL C (codegen/dialect_quads.cc).
extern const char* const kByteQuadSlide16OpenCLText;

}  // namespace mpcaffe
