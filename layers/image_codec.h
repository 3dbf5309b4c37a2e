/* layers/image_codec.h — the C interface between mpcaffe (layers/image_io.cc) and its image
 * codec plugin, libmpcaffe_image_codec.so (layers/codec/opencv_codec.cc: OpenCV's imgcodecs and
 * imgproc). mpcaffe never links OpenCV itself: OpenCV's libraries bring their own dependencies
 * (Debian's libopencv_core needs Debian's libtbb.so.12), and a library loaded at process start
 * serves every later user of its soname — Intel's CPU OpenCL runtime needs a newer libtbb.so.12
 * and would fail to load, silently dropping its platform. image_io.cc opens the plugin with
 * dlopen on the first image, after the OpenCL drivers are loaded. Plain C types only, so the
 * plugin and mpcaffe need not share a C++ library version's object layouts. */
#ifndef MPCAFFE_LAYERS_IMAGE_CODEC_H_
#define MPCAFFE_LAYERS_IMAGE_CODEC_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a struct or a function's meaning below changes. */
#define MPCAFFE_IMAGE_CODEC_ABI 2
/* The plugin's file name and the one symbol mpcaffe looks up in it. */
#define MPCAFFE_IMAGE_CODEC_FILE "libmpcaffe_image_codec.so"
#define MPCAFFE_IMAGE_CODEC_ENTRY "mpcaffe_image_codec_entry"

/* How to decode: OpenCV's IMREAD_GRAYSCALE, IMREAD_COLOR (3 channels, BGR), IMREAD_ANYCOLOR
 * (the stored channels: 1 for a gray image, else 3) and IMREAD_UNCHANGED (alpha kept: 1-4). */
enum mpcaffe_image_mode {
  MPCAFFE_IMAGE_GRAY = 0,
  MPCAFFE_IMAGE_COLOR = 1,
  MPCAFFE_IMAGE_ANY_COLOR = 2,
  MPCAFFE_IMAGE_UNCHANGED = 3
};

/* Pixels (8-bit, rows of interleaved channels, no padding) or encoded bytes (height, width and
 * channels 0), allocated by the plugin and given back to its release(). */
struct mpcaffe_image_buffer {
  int height, width, channels;
  unsigned char* data;
  size_t size;
};

/* Every function returns 0 on success; otherwise it writes a NUL-terminated reason (without the
 * file's name, which the caller knows) into error[0..error_size) and leaves *out empty. */
struct mpcaffe_image_codec {
  int abi; /* MPCAFFE_IMAGE_CODEC_ABI of the plugin's build */
  /* "OpenCV 4.6.0", for error messages and `mpcaffe devices --verbose`. */
  const char* (*version)(void);
  /* Decodes an image file's bytes; resized to height×width (INTER_LINEAR, as BVLC's
   * ReadImageToCVMat) when both are positive. Deeper than 8-bit images are converted to 8-bit. */
  int (*decode)(const unsigned char* bytes, size_t n, int mode, int height, int width,
                struct mpcaffe_image_buffer* out, char* error, size_t error_size);
  /* Encodes pixels in the format of a file extension without the dot ("png", "jpg", "bmp"). */
  int (*encode)(const char* extension, const unsigned char* pixels, int height, int width,
                int channels, struct mpcaffe_image_buffer* out, char* error, size_t error_size);
  void (*release)(struct mpcaffe_image_buffer* buffer);
  /* Resizes 8-bit pixels (rows of interleaved channels) to out_height×out_width with
   * INTER_LINEAR, as BVLC's WindowData resizes its windows (ABI 2). */
  int (*resize)(const unsigned char* pixels, int height, int width, int channels, int out_height,
                int out_width, struct mpcaffe_image_buffer* out, char* error, size_t error_size);
};

/* The plugin's entry point (MPCAFFE_IMAGE_CODEC_ENTRY). */
const struct mpcaffe_image_codec* mpcaffe_image_codec_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* MPCAFFE_LAYERS_IMAGE_CODEC_H_ */
