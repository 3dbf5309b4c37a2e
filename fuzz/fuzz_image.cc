// fuzz/fuzz_image.cc — libFuzzer target: bytes as an image file and as an encoded Datum record
// (layers/image_io.h: the JPEG/PNG damage checks, then OpenCV's decoders).
#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpcaffe::fuzz::RunImageInput(data, size);
  return 0;
}
