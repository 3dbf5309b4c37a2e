// tools/npy_file.h — reads a NumPy .npy file of float32 values (what `numpy.save` writes for a
// float32 array, C order) for the commands that take inputs from a file (`mpcaffe calibrate
// --input x.npy`). Every refusal names the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "device/error.h"

namespace mpcaffe::tools {

/// A float32 array read from a .npy file: its shape (outermost first) and its values in C order.
struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

namespace npy_detail {

/// The text after `'key':` in the header dictionary, up to the next top-level comma or brace
/// (a tuple counts as one value). Empty when the key is absent.
inline std::string DictValue(const std::string& header, const std::string& key) {
  const std::string quoted[] = {"'" + key + "'", "\"" + key + "\""};
  size_t at = std::string::npos;
  for (const auto& q : quoted)
    if ((at = header.find(q)) != std::string::npos) {
      at += q.size();
      break;
    }
  if (at == std::string::npos) return "";
  at = header.find(':', at);
  if (at == std::string::npos) return "";
  ++at;
  int depth = 0;
  std::string value;
  for (; at < header.size(); ++at) {
    const char c = header[at];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    value += c;
  }
  const size_t b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t");
  return b == std::string::npos ? "" : value.substr(b, e - b + 1);
}

}  // namespace npy_detail

/// Reads `path`: a version 1, 2 or 3 .npy file holding a little-endian float32 array in C order.
/// Throws Error naming the file for a missing file, a file that is not .npy, another element
/// type (e.g. float64: "save it with x.astype(numpy.float32)"), Fortran order, or a size that
/// does not match the header.
inline NpyArray ReadNpyFloat32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  auto fail = [&](const std::string& why) -> Error {
    return Error("'" + path + "' is not a usable .npy file: " + why);
  };
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw fail("it does not start with the .npy magic \\x93NUMPY");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!f.read(reinterpret_cast<char*>(b), 2)) throw fail("truncated header");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!f.read(reinterpret_cast<char*>(b), 4)) throw fail("truncated header");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    throw fail("format version " + std::to_string(major) + " (1, 2 and 3 are known)");
  }
  if (header_len > (1u << 20)) throw fail("header of " + std::to_string(header_len) + " bytes");
  std::string header(header_len, '\0');
  if (!f.read(header.data(), header_len)) throw fail("truncated header");

  std::string descr = npy_detail::DictValue(header, "descr");
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"'))
    descr = descr.substr(1, descr.size() - 2);
  if (descr != "<f4" && descr != "f4" && descr != "=f4")
    throw fail("its elements are '" + descr +
               "', float32 ('<f4') is needed (save it with x.astype(numpy.float32))");
  if (npy_detail::DictValue(header, "fortran_order") != "False")
    throw fail("it is in Fortran order; save a C-ordered array (numpy.ascontiguousarray)");
  std::string shape_text = npy_detail::DictValue(header, "shape");
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
    throw fail("no shape tuple in its header");
  NpyArray out;
  size_t count = 1;
  std::string digits;
  for (size_t i = 1; i < shape_text.size(); ++i) {
    const char c = shape_text[i];
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (c == ',' || c == ')') {
      if (!digits.empty()) {
        out.shape.push_back(std::stoll(digits));
        count *= static_cast<size_t>(out.shape.back());
        digits.clear();
      }
    } else if (c != ' ' && c != 'L') {
      throw fail("cannot read the shape " + shape_text);
    }
  }
  out.values.resize(count);
  if (count > 0 && !f.read(reinterpret_cast<char*>(out.values.data()), count * sizeof(float)))
    throw fail("it holds fewer than the " + std::to_string(count) + " float32 values its shape " +
               shape_text + " needs");
  return out;
}

}  // namespace mpcaffe::tools
