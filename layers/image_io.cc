// layers/image_io.cc — image decoding and resizing through the codec plugin (OpenCV imgcodecs and
// imgproc INTER_LINEAR, layers/image_codec.h), and the Datum / mean.binaryproto conversions of
// layers/image_io.h.
#include "layers/image_io.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "device/device.h"
#include "device/settings.h"
#include "layers/image_codec.h"

namespace mpcaffe {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct LoadedCodec {
  const mpcaffe_image_codec* codec = nullptr;
  std::string path;
};

/// Where the plugin may be, in order: MPCAFFE_IMAGE_CODEC (a file) alone when it is set; else
/// beside the binary or library holding this code (a shared library's lib/), in its lib/ (the
/// Python package: mpcaffe/lib beside mpcaffe/_mpcaffe.so), in its ../lib (build/bin beside
/// build/lib, an installed bin/, the package's mpcaffe/bin/mpcaffe), and last the loader's own
/// search: the program's run path (a program built against the installed package carries the
/// prefix's library folder, see mpcaffeConfig.cmake and mpcaffe.pc), LD_LIBRARY_PATH, the system.
std::vector<std::string> CodecCandidates() {
  if (const std::string& file = GetSettings().image_codec; !file.empty()) return {file};
  std::vector<std::string> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CodecCandidates), &info) && info.dli_fname) {
    const std::string here = Folder(info.dli_fname);
    out.push_back(here + "/" MPCAFFE_IMAGE_CODEC_FILE);
    out.push_back(here + "/lib/" MPCAFFE_IMAGE_CODEC_FILE);
    out.push_back(here + "/../lib/" MPCAFFE_IMAGE_CODEC_FILE);
  }
  out.push_back(MPCAFFE_IMAGE_CODEC_FILE);
  return out;
}

LoadedCodec LoadCodec() {
  // The OpenCL drivers first: a driver that brings its own copy of a library OpenCV needs too
  // (Intel's CPU runtime: a newer libtbb.so.12) must load it before OpenCV's older one does,
  // because the first library of a soname serves every later user. OpenCV works with the newer
  // one; the driver does not load with the older. (The device list is enumerated once per
  // process; a failure here is reported where a device is asked for, not by image decoding.)
  try {
    (void)DeviceList();
  } catch (const std::exception&) {
  }
  std::string tried;
  for (const std::string& path : CodecCandidates()) {
    const bool bare = path.find('/') == std::string::npos;
    if (!bare && !IsFile(path)) {
      tried += "\n  " + path + ": no such file";
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "dlopen failed");
      if (!bare) break;  // the plugin is there but its libraries (OpenCV's) are not
      continue;
    }
    auto entry = reinterpret_cast<const mpcaffe_image_codec* (*)()>(
        dlsym(handle, MPCAFFE_IMAGE_CODEC_ENTRY));
    const mpcaffe_image_codec* codec = entry ? entry() : nullptr;
    if (!codec || codec->abi != MPCAFFE_IMAGE_CODEC_ABI) {
      tried += "\n  " + path + ": " +
               (codec ? "interface version " + std::to_string(codec->abi) + ", mpcaffe needs " +
                            std::to_string(MPCAFFE_IMAGE_CODEC_ABI) + " (a plugin of another build)"
                      : std::string("no " MPCAFFE_IMAGE_CODEC_ENTRY " in it"));
      dlclose(handle);
      continue;
    }
    Dl_info info{};
    std::string where = path;
    if (dladdr(reinterpret_cast<void*>(entry), &info) && info.dli_fname) where = info.dli_fname;
    if (char* full = realpath(where.c_str(), nullptr)) {
      where = full;
      std::free(full);
    }
    return {codec, where};
  }
  throw ImageError(
      "images are decoded by mpcaffe's OpenCV plugin " MPCAFFE_IMAGE_CODEC_FILE
      ", which cannot be loaded:" +
      tried +
      "\n(it is built with mpcaffe when OpenCV's imgcodecs is found, and needs OpenCV's "
      "libraries at run time — Debian: apt-get install libopencv-imgcodecs406 — or set "
      "MPCAFFE_IMAGE_CODEC to its path)");
}

const LoadedCodec& Codec() {
  // Loaded once; a failure is thrown again on the next image (call_once retries after a throw).
  static std::once_flag once;
  static LoadedCodec loaded;
  std::call_once(once, [] { loaded = LoadCodec(); });
  return loaded;
}

/// A buffer from the plugin, given back to it when it goes.
class CodecBuffer {
 public:
  CodecBuffer() = default;
  CodecBuffer(const CodecBuffer&) = delete;
  CodecBuffer& operator=(const CodecBuffer&) = delete;
  ~CodecBuffer() {
    if (b_.data) Codec().codec->release(&b_);
  }
  mpcaffe_image_buffer* get() { return &b_; }
  const mpcaffe_image_buffer& operator*() const { return b_; }

 private:
  mpcaffe_image_buffer b_{};
};

/// Decodes with the plugin; throws ImageError "<what>: <reason>".
Image Decode(const std::string& bytes, const std::string& what, int mode, int height, int width) {
  const mpcaffe_image_codec& codec = *Codec().codec;
  CodecBuffer out;
  char error[512] = "";
  if (codec.decode(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), mode, height,
                   width, out.get(), error, sizeof error) != 0)
    throw ImageError(what + ": " + error);
  Image image;
  image.height = (*out).height, image.width = (*out).width, image.channels = (*out).channels;
  image.pixels.assign((*out).data, (*out).data + (*out).size);
  return image;
}

bool StartsWith(const std::string& s, const char* prefix, size_t n) {
  return s.size() >= n && std::memcmp(s.data(), prefix, n) == 0;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

/// A JPEG ends its last scan with the end-of-image marker FF D9. Inside entropy-coded data a
/// 0xFF byte is always followed by 0x00 (stuffing) or a restart marker, so an FF D9 after the
/// last start-of-scan FF DA can only be the real end (an EXIF thumbnail's EOI comes before it).
std::string JpegDamage(const std::string& b) {
  size_t sos = std::string::npos;
  for (size_t i = b.size() >= 2 ? b.size() - 2 : 0; i-- > 0;)
    if (static_cast<unsigned char>(b[i]) == 0xFF && static_cast<unsigned char>(b[i + 1]) == 0xDA) {
      sos = i;
      break;
    }
  if (sos == std::string::npos)
    return "truncated JPEG: no image data (start of scan) in its " + std::to_string(b.size()) +
           " bytes";
  for (size_t i = sos + 2; i + 1 < b.size(); ++i)
    if (static_cast<unsigned char>(b[i]) == 0xFF && static_cast<unsigned char>(b[i + 1]) == 0xD9)
      return "";
  return "truncated JPEG: the file ends before its end-of-image marker (" +
         std::to_string(b.size()) + " bytes)";
}

/// A PNG is the 8-byte signature and chunks (length, type, data, CRC) up to IEND.
std::string PngDamage(const std::string& b) {
  size_t at = 8;
  while (at + 8 <= b.size()) {
    const uint32_t length = BigEndian32(b, at);
    const std::string type = b.substr(at + 4, 4);
    const size_t end = at + 12 + static_cast<size_t>(length);
    if (end > b.size()) break;
    if (type == "IEND") return "";
    at = end;
  }
  return "truncated PNG: the file ends before its IEND chunk (" + std::to_string(b.size()) +
         " bytes)";
}

}  // namespace

std::string ReadFileBytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    throw ImageError("'" + path +
                     "': " + (errno == ENOENT ? "no such file" : std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ImageError("'" + path + "' is a directory, not an image");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("'" + path + "': cannot open (" + std::strerror(errno) + ")");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw ImageError("'" + path + "': read error");
  return buf.str();
}

std::string ImageDamage(const std::string& bytes) {
  if (StartsWith(bytes, "\xFF\xD8\xFF", 3)) return JpegDamage(bytes);
  if (StartsWith(bytes, "\x89PNG\r\n\x1A\n", 8)) return PngDamage(bytes);
  return "";
}

Image DecodeImage(const std::string& bytes, const std::string& what, int height, int width,
                  bool is_color) {
  if (bytes.empty()) throw ImageError(what + ": empty file, not an image");
  const std::string damage = ImageDamage(bytes);
  if (!damage.empty()) throw ImageError(what + ": " + damage);
  return Decode(bytes, what, is_color ? MPCAFFE_IMAGE_COLOR : MPCAFFE_IMAGE_GRAY, height, width);
}

Image ReadImage(const std::string& path, int height, int width, bool is_color) {
  return DecodeImage(ReadFileBytes(path), "'" + path + "'", height, width, is_color);
}

Image ResizeImage(const Image& image, int height, int width) {
  if (image.height == height && image.width == width) return image;
  const mpcaffe_image_codec& codec = *Codec().codec;
  CodecBuffer out;
  char error[512] = "";
  if (codec.resize(image.pixels.data(), image.height, image.width, image.channels, height, width,
                   out.get(), error, sizeof error) != 0)
    throw ImageError(std::string("resizing an image: ") + error);
  Image resized;
  resized.height = (*out).height, resized.width = (*out).width, resized.channels = (*out).channels;
  resized.pixels.assign((*out).data, (*out).data + (*out).size);
  return resized;
}

std::string EncodeImage(const Image& image, const std::string& extension,
                        const std::string& what) {
  if (image.pixels.size() != static_cast<size_t>(image.height) * image.width * image.channels)
    throw ImageError(what + ": " + std::to_string(image.pixels.size()) + " bytes of pixels for a " +
                     std::to_string(image.width) + "x" + std::to_string(image.height) + "x" +
                     std::to_string(image.channels) + " image");
  const mpcaffe_image_codec& codec = *Codec().codec;
  CodecBuffer out;
  char error[512] = "";
  if (codec.encode(extension.c_str(), image.pixels.data(), image.height, image.width,
                   image.channels, out.get(), error, sizeof error) != 0)
    throw ImageError(what + ": " + error);
  return std::string(reinterpret_cast<const char*>((*out).data), (*out).size);
}

void WriteImage(const std::string& path, const Image& image) {
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos)
    throw ImageError("'" + path + "': no file extension to choose the image format by");
  const std::string bytes = EncodeImage(image, path.substr(dot + 1), "'" + path + "'");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw ImageError("cannot write '" + path + "': " + std::strerror(errno));
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !out.flush())
    throw ImageError("writing '" + path + "' failed");
}

std::string ImageCodecDescription() {
  const LoadedCodec& c = Codec();
  return std::string(c.codec->version()) + " (" + c.path + ")";
}

void ImageToDatum(const Image& image, caffe::Datum* datum) {
  const int c = image.channels, h = image.height, w = image.width;
  datum->set_channels(c);
  datum->set_height(h);
  datum->set_width(w);
  datum->clear_float_data();
  datum->set_encoded(false);
  std::string data(static_cast<size_t>(c) * h * w, '\0');
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = image.row(y);
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        data[(static_cast<size_t>(k) * h + y) * w + x] = static_cast<char>(row[x * c + k]);
  }
  datum->set_data(std::move(data));
}

caffe::Datum ReadImageToDatum(const std::string& path, int label, int height, int width,
                              bool is_color, const std::string& encode_type) {
  const std::string bytes = ReadFileBytes(path);
  const Image image = DecodeImage(bytes, "'" + path + "'", height, width, is_color);
  caffe::Datum datum;
  datum.set_label(label);
  if (encode_type.empty()) {
    ImageToDatum(image, &datum);
    return datum;
  }
  std::string ext = path.substr(
      path.find_last_of('.') == std::string::npos ? path.size() : path.find_last_of('.') + 1);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool same_format = ext == encode_type || (ext == "jpeg" && encode_type == "jpg") ||
                           (ext == "jpg" && encode_type == "jpeg");
  // The file's own bytes when they decode to what was asked (BVLC's ReadFileToDatum case).
  const bool file_channels_match =
      same_format && height <= 0 && width <= 0 &&
      (Decode(bytes, "'" + path + "'", MPCAFFE_IMAGE_UNCHANGED, 0, 0).channels == 3) == is_color;
  if (file_channels_match)
    datum.set_data(bytes);
  else
    datum.set_data(EncodeImage(image, encode_type, "'" + path + "'"));
  datum.set_encoded(true);
  return datum;
}

void DecodeDatumInPlace(caffe::Datum* datum, const std::string& what, bool force_color,
                        bool force_gray) {
  if (!datum->encoded()) return;
  // BVLC's DecodeDatumNative: the stored channels (a gray JPEG stays one channel).
  const std::string& bytes = datum->data();
  const std::string damage = ImageDamage(bytes);
  if (!damage.empty()) throw ImageError(what + ": " + damage);
  Image image = Decode(bytes, what,
                       force_color  ? MPCAFFE_IMAGE_COLOR
                       : force_gray ? MPCAFFE_IMAGE_GRAY
                                    : MPCAFFE_IMAGE_ANY_COLOR,
                       0, 0);
  ImageToDatum(image, datum);
}

void WriteBlobProtoBinary(const std::string& path, const caffe::BlobProto& blob) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  if (!blob.SerializeToOstream(&out) || !out.flush()) throw Error("writing '" + path + "' failed");
}

caffe::BlobProto MeanBlobProto(int channels, int height, int width,
                               const std::vector<float>& mean) {
  caffe::BlobProto blob;
  blob.set_num(1);
  blob.set_channels(channels);
  blob.set_height(height);
  blob.set_width(width);
  for (float v : mean) blob.add_data(v);
  return blob;
}

std::vector<ListedImage> ReadImageList(const std::string& list, bool label_required) {
  std::ifstream in(list);
  if (!in) throw ImageError("image list '" + list + "' cannot be opened (missing or unreadable)");
  std::vector<ListedImage> items;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
      text.pop_back();
    if (text.empty()) continue;
    // BVLC: the label follows the last space, so paths may contain spaces.
    ListedImage item;
    item.line = line;
    item.path = text;
    const size_t space = text.find_last_of(" \t");
    size_t used = 0;
    if (space != std::string::npos) {
      try {
        item.label = std::stoi(text.substr(space + 1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
    }
    if (space != std::string::npos && used > 0 && used == text.size() - space - 1)
      item.path = text.substr(0, text.find_last_not_of(" \t", space) + 1);
    else if (label_required)
      throw ImageError("image list '" + list + "' line " + std::to_string(line) + ": '" + text +
                       "' is not \"<path> <integer label>\"");
    else
      item.label = -1;
    items.push_back(item);
  }
  return items;
}

}  // namespace mpcaffe
