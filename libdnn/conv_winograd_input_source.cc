// libdnn/conv_winograd_input_source.cc — F(2×2)'s input transform in chunks of 8 neighbouring
// tiles of one tile row (OpenCL, InputTilesPerItem): the text fp32's and int8q's input kernels
// share. Where a chunk's windows lie inside the plane, each window row of its 8 tiles is two
// vector loads of 16 values from the row, its 4 columns their even and odd lanes (the windows
// step by 2 and overlap by 2); at the plane's edges and past the row's last tile each lane reads
// its window row as one vector of 4 from a clamped column and picks its columns from it. The
// per-tile form (a work-item per tile reading its 16 values one by one at computed addresses)
// spent most of its time in those loads: ResNet-50's int8 res3 input kernel took 0.26–0.44 ms on
// Intel's runtime at AVX2, 0.077 with the loads replaced by arithmetic.
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/conv_winograd_internal.h"

namespace mpcaffe::libdnn::winograd_internal {

namespace {

constexpr int kLanes = 8;  // tiles per chunk

/// "0, step, 2·step, …" (count values).
std::string Steps(int count, int step) {
  std::string out;
  for (int t = 0; t < count; ++t) out += std::string(t ? ", " : "") + Num(long(t) * step);
  return out;
}

}  // namespace

std::string ChunkPrologue(const VectorWords& v, const ConvDesc& d, const Shape& s,
                          const std::string& channel, long channels, const std::string& word,
                          long plane) {
  const int L = kLanes, n = s.n, m = s.m, H = d.height, W = d.width;
  const std::string I = v.Type("int", L);
  const long chunks = long(d.batch) * s.th * InputChunksPerRow(s);
  const int span = m * (L - 1) + n;  // columns the windows of L tiles cover
  std::string in = "  const int g = $global_id(0), " + channel + " = $global_id(1);\n";
  in += "  if (g >= " + Num(InputChunks(d, s)) + " || " + channel + " >= " + Num(channels) +
        ") return;\n";
  in += "  $global " + word + "* vc = v + (long)" + channel + " * " + Num(s.padded) + ";\n";
  // V's tiles past P (the products kernel's whole blocks) are zeros.
  in += "  if (g >= " + Num(chunks) + ") {\n";
  in += "    const long p0 = " + Num(s.tiles) + " + (long)(g - " + Num(chunks) + ") * " + Num(L) +
        ";\n";
  in += "    for (int k = 0; k < " + Num(L) + " && p0 + k < " + Num(s.padded) + "; ++k) {\n";
  for (int e = 0; e < s.elements(); ++e)
    in += "      vc[" + Num(long(e) * plane) + "L + p0 + k] = 0;\n";
  in += "    }\n    return;\n  }\n";
  in += "  const int row = g / " + Num(InputChunksPerRow(s)) + ", tx0 = g % " +
        Num(InputChunksPerRow(s)) + " * " + Num(L) + ";\n";
  in += "  const int img = row / " + Num(s.th) + ", ty = row % " + Num(s.th) + " * " + Num(m) +
        " - " + Num(d.pad_h) + ", tx = tx0 * " + Num(m) + " - " + Num(d.pad_w) + ";\n";
  in += "  const int lanes = min(" + Num(L) + ", " + Num(s.tw) + " - tx0);\n";
  in += "  const long p0 = (long)row * " + Num(s.tw) + " + tx0;\n";
  in += "  const int inner = lanes == " + Num(L) + " && tx >= 0 && tx + " + Num(span - 1) + " < " +
        Num(W) + ";\n";
  if (W >= n) {  // the edge chunks: each lane's first column, clamped into the row, and the shift
    in += "  const " + I + " st = tx + " + v.Of(I, Steps(L, m)) + ", cs = " +
          v.Clamp("st", v.Splat(I, "0"), v.Splat(I, Num(W - n))) + ", sh = st - cs;\n";
  }
  for (int i = 0; i < n; ++i) {
    const std::string is = Num(i);
    in += "  const int ry" + is + " = ty + " + is + " >= 0 && ty + " + is + " < " + Num(H) +
          ", cy" + is + " = min(max(ty + " + is + ", 0), " + Num(H - 1) + ") * " + Num(W) + ";\n";
  }
  return in;
}

std::string ChunkWindow(const VectorWords& v, const ConvDesc& d, const Shape& s,
                        const std::string& name, const std::string& ptr, const std::string& live,
                        bool bytes) {
  const int L = kLanes, n = s.n, m = s.m, W = d.width;
  const std::string scalar = bytes ? "int" : "float", T = v.Type(scalar, L);
  const std::string wide = v.Type(bytes ? "uchar" : "float", 2 * L);
  const std::string zero = v.Splat(T, bytes ? "0" : "0.0f");
  // A value read: less the input's zero point in int8q.
  auto value = [&](const std::string& x) { return bytes ? x + " - x_zero" : x; };
  auto as_values = [&](const std::string& x, const std::string& type) {
    return bytes ? v.Convert(type, x) : x;
  };
  auto cell = [&](int i, int j) { return name + Num(i) + "_" + Num(j); };
  std::string in;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) in += "  " + T + " " + cell(i, j) + ";\n";
  in += "  if (inner) {\n";
  for (int i = 0; i < n; ++i) {
    const std::string is = Num(i), ok = live + " && ry" + is;
    // Columns tx + 2t + j of lane t: j = 0, 1 the even and odd lanes from tx, j = 2, 3 from
    // tx + 2.
    for (int k = 0; k < 2; ++k)
      in += "    const " + wide + " w" + name + is + "_" + Num(k) + " = " +
            v.Load(2 * L, ptr + " + cy" + is + " + tx + " + Num(m * k)) + ";\n";
    for (int j = 0; j < n; ++j) {
      const std::string src = "w" + name + is + "_" + Num(j / 2);
      in += "    " + cell(i, j) + " = " + ok + " ? " +
            value(as_values(j % 2 ? v.Odd(src) : v.Even(src), T)) + " : " + zero + ";\n";
    }
  }
  in += "  } else {\n";
  const std::string four = v.Type(scalar, n);
  for (int i = 0; i < n; ++i) {
    const std::string is = Num(i), ok = live + " && ry" + is;
    if (W < n) {  // planes narrower than a window row: value by value (lanes past `lanes`
      // are computed and never stored)
      for (int j = 0; j < n; ++j) {
        std::string lanes;
        for (int t = 0; t < L; ++t) {
          const std::string col = "tx + " + Num(m * t + j);
          lanes += std::string(t ? ", " : "") + "(" + ok + " && " + col + " >= 0 && " + col +
                   " < " + Num(W) + ") ? " +
                   value("(" + scalar + ")" + ptr + "[cy" + is + " + min(max(" + col + ", 0), " +
                         Num(W - 1) + ")]") +
                   " : " + (bytes ? "0" : "0.0f");
        }
        in += "    " + cell(i, j) + " = " + v.Of(T, lanes) + ";\n";
      }
      continue;
    }
    // Lane t's window row: the n values from its clamped first column cs (inside the row); its
    // column j is value j + sh of them (sh = start − cs), zero outside the plane. Bytes as one
    // word per lane, the column a shift of it (a fifth faster than picking lanes on ResNet-50's
    // int8 input kernels at AVX2), floats picked lane by lane.
    // (Lanes past `lanes` are computed and not stored. Oclgrind 21.10 computed some lanes of
    // the column words wrong with a lane mask of them in this product.)
    const std::string inside = "(st + @ >= 0) & (st + @ < " + Num(W) + ") & " +
                               v.Splat(v.Type("int", L), "-(" + ok + ")");
    auto inside_col = [&](int j) {
      std::string c = inside;
      for (size_t at; (at = c.find('@')) != std::string::npos;) c.replace(at, 1, Num(j));
      return c;
    };
    if (bytes) {
      const std::string U = v.Type("uint", L);
      std::string words;
      for (int t = 0; t < L; ++t)
        words += std::string(t ? ", " : "") +
                 v.As("uint", v.Load(n, ptr + " + cy" + is + " + " + v.Lane("cs", t)));
      in += "    const " + U + " e" + name + is + " = " + v.Of(U, words) + ";\n";
      for (int j = 0; j < n; ++j) {
        const std::string shift =
            v.As(U, v.Clamp("sh + " + Num(j), v.Splat(T, "0"), v.Splat(T, Num(n - 1))) + " * 8");
        const std::string byte = v.As(T, "(e" + name + is + " >> " + shift + ") & 0xffu");
        in += "    " + cell(i, j) + " = " + v.Select(zero, value(byte), inside_col(j)) + ";\n";
      }
      continue;
    }
    for (int t = 0; t < L; ++t)
      in += "    const " + four + " e" + name + is + "_" + Num(t) + " = " +
            as_values(v.Load(n, ptr + " + cy" + is + " + " + v.Lane("cs", t)), four) + ";\n";
    for (int k = 0; k < n; ++k) {
      std::string lanes;
      for (int t = 0; t < L; ++t)
        lanes += std::string(t ? ", " : "") + v.Lane("e" + name + is + "_" + Num(t), k);
      in += "    const " + T + " f" + name + is + "_" + Num(k) + " = " + v.Of(T, lanes) + ";\n";
    }
    for (int j = 0; j < n; ++j) {
      const std::string b = "sh + " + Num(j);
      std::string pick = "f" + name + is + "_0";
      for (int k = 1; k < n; ++k)
        pick = v.Select(pick, "f" + name + is + "_" + Num(k), "(" + b + ") == " + Num(k));
      in += "    " + cell(i, j) + " = " + v.Select(zero, value(pick), inside_col(j)) + ";\n";
    }
  }
  return in + "  }\n";
}

std::string ChunkStores(const VectorWords& v, const Shape& s, const std::string& name,
                        long plane) {
  const int L = kLanes, n = s.n;
  auto cell = [&](int e) { return name + Num(e / n) + "_" + Num(e % n); };
  std::string out = "  if (lanes == " + Num(L) + ") {\n";
  for (int e = 0; e < s.elements(); ++e)
    out += "    " + v.Store(L, cell(e), "vc + " + Num(long(e) * plane) + "L + p0") + ";\n";
  out += "  } else {\n";
  for (int t = 0; t < L; ++t) {
    out += "    if (" + Num(t) + " < lanes) {";
    for (int e = 0; e < s.elements(); ++e)
      out += " vc[" + Num(long(e) * plane) + "L + p0 + " + Num(t) + "] = " + v.Lane(cell(e), t) +
             ";";
    out += " }\n";
  }
  return out + "  }\n";
}

}  // namespace mpcaffe::libdnn::winograd_internal
