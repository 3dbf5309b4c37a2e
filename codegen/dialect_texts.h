// codegen/dialect_texts.h — helper texts of the dialect table (codegen/dialect.cc) that live in
// their own files.
#pragma once

namespace mpcaffe {

/// KernelHelper::kByteQuadProduct16 in OpenCL C and CUDA C (codegen/dialect_quads.cc).
extern const char* const kByteQuadProduct16OpenCLText;
extern const char* const kByteQuadProduct16CudaText;
/// KernelHelper::kByteQuadSlide16 in OpenCL C (codegen/dialect_quads.cc).
extern const char* const kByteQuadSlide16OpenCLText;
/// KernelHelper::kByteTileProduct in OpenCL C (codegen/dialect_quads.cc).
extern const char* const kByteTileProductOpenCLText;

}  // namespace mpcaffe
