// libdnn/pool_plane.cc — pooling's kernels that walk whole planes: the plane form of max pooling
// (int8q, int16q, fp32: a 3×3 window, stride 1, padding 1, each output plane the size of its
// input plane: GoogLeNet's inception pools), the column walk of max pooling (int8q and fp32,
// stride 1 and 2) and the whole-plane average.
//
// The row form (pool.cc, DeclareVectorMax) takes one output row per vector: rows of 7, 14 or 28
// outputs fill a half or less of its 8 or 16 lanes, every vector of a padded row's ends runs the
// masked loop, and the row's set-up is paid per vector (GoogLeNet's inception pools 2-5× slower
// than this form: docs/BENCHMARKS.md, "Default configurations"). Here a work-item's vector is 16
// neighbouring outputs of the flattened plane, the same positions in every plane it walks: output i
// = (row r, column c) is the maximum of the input at i + dy·W + dx, dy, dx ∈ {−1, 0, 1}, where that
// tap lies in the plane (r + dy in [0, H), c + dx in [0, W)). The nine taps are nine vector loads
// at fixed offsets; each one's in-plane mask depends on the lane's position only, so the work-item
// computes the masks once and every plane costs 9 loads, 8 ANDs, 8 maxima and a store. A code
// outside the plane is masked to 0, never above the window's maximum: the codes are unsigned and
// each window holds its centre. Float lanes keep the scalar kernel's order (see `maxima`). The last
// vector of a plane overlaps the one before it (the same values written twice); vectors whose taps
// would leave the buffer (the first and last plane's edges) gather lane by lane at clamped indices.
#include <functional>
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/pool_internal.h"

namespace mpcaffe::libdnn::pool_internal {

namespace {

/// A lane condition of `lanes` lanes as the max kernels' mask: for the codes (`lane` uchar or
/// ushort) all ones or zero in the lanes' own width, ANDed with them; for float (`lane` float)
/// int lanes for select's condition, through char: Oclgrind took int lanes of a comparison
/// combined with ~ and | for other values than -1 and 0 (NaNs won windows there).
std::string LaneMask(const VectorWords& vw, const std::string& lane, int lanes,
                     const std::string& cond) {
  if (lane == "float")
    return vw.Convert(vw.Type("int", lanes), vw.Convert(vw.Type("char", lanes), cond));
  return vw.As(vw.Type(lane, lanes),
               vw.Convert(vw.Type(lane == "uchar" ? "char" : "short", lanes), cond));
}

/// Statement text: the maxima `best` (codes in lanes of any width) of `lanes` outputs y[i0 …]
/// requantized lane by lane from the input's parameters to the output's, the first `count`
/// stored (a pool whose input and output are quantized apart), `indent` spaces deep.
std::string RequantizedLanes(const VectorWords& vw, int lanes, const std::string& i0,
                             const std::string& count, int indent) {
  const std::string in(indent, ' '), L = std::to_string(lanes);
  return in + "int lanes[" + L + "];\n" + in +
         vw.Store(lanes, vw.Convert(vw.Type("int", lanes), "best"), "lanes") + ";\n" + in +
         "for (int l = 0; l < " + count + "; ++l) {\n" + in +
         "  mp_i64 q = (mp_i64)y_zero + MP_REQUANT(lanes[l] - x_zero, mult, shift);\n" + in +
         "  q = Dtype_SAT(q);\n" + in + "  Dtype_STORE(y, " + i0 + " + l, q);\n" + in + "}\n";
}

}  // namespace

bool PlaneMaxApplies(const PoolDesc& d) {
  return (IsQuantized(d.type) || d.type == DataType::kFloat32) && d.method == PoolMethod::kMax &&
         !d.global && d.kernel_h == 3 && d.kernel_w == 3 && d.stride_h == 1 && d.stride_w == 1 &&
         d.pad_h == 1 && d.pad_w == 1 && d.out_h() == d.height && d.out_w() == d.width &&
         d.height * d.width >= kPlaneLanes;
}

std::string PlaneMaxKernelName(DataType type) {
  return Pooling::ForwardKernelName(type, PoolMethod::kMax) + "_plane";
}

void DeclarePlaneMax(KernelWriter& w, DataType type) {
  const VectorWords vw(w.target());
  const bool q = IsQuantized(type);
  constexpr int L = kPlaneLanes;
  const std::string Ls = std::to_string(L);
  // The lanes' storage: the codes (uchar, ushort) or float.
  const std::string U = type == DataType::kInt8Q ? "uchar" : q ? "ushort" : "float";
  const std::string V = vw.Type(U, L), I = vw.Type("int", L);
  // The codes through the byte-vector helper's unaligned moves, float as vload16.
  auto load = [&](const std::string& p) { return q ? vw.MoveLoad(U, L, p) : vw.Load(L, p); };
  w.UseHelper(KernelHelper::kByteVectorStore);
  // A lane condition as the taps' mask (LaneMask).
  auto mask = [&](const std::string& cond) { return LaneMask(vw, U, L, cond); };
  const std::string M = q ? V : I;
  std::string iota;
  for (int l = 0; l < L; ++l) iota += (l ? ", " : "") + std::to_string(l);
  auto& k = w.Kernel(PlaneMaxKernelName(type))
                .In("Dtype", "x")
                .Out("Dtype", "y")
                .VectorWidth(q ? Scalar::kI32 : Scalar::kF32, L);
  for (const char* name :
       {"planes", "H", "W", "x_zero", "y_zero", "same", "mult", "shift", "elements"})
    k.Value("int", name);
  std::string b = "  const int HW = H * W;\n  const int vecs = (HW + " + std::to_string(L - 1) +
                  ") / " + Ls + ";\n";
  b += "  const int v = $global_id(0);\n  if (v >= vecs) return;\n";
  b += "  const int p0 = min(v * " + Ls + ", HW - " + Ls +
       ");  // the plane's last vector overlaps its neighbour\n";
  b += "  const " + I + " at = p0 + " + vw.Of(I, iota) + ";\n";
  b += "  const " + I + " r = at / W, c = at - r * W;\n";
  b += "  const " + M + " up = " + mask("r > 0") + ", down = " + mask("r < H - 1") + ";\n";
  b += "  const " + M + " left = " + mask("c > 0") + ", right = " + mask("c < W - 1") + ";\n";
  // The nine taps in the window's order (rows, then columns): offset from the output, mask
  // (empty: the centre, always inside).
  struct Tap {
    std::string offset, mask;
  };
  const Tap taps[9] = {{" - W - 1", "up & left"},
                       {" - W", "up"},
                       {" - W + 1", "up & right"},
                       {" - 1", "left"},
                       {"", ""},
                       {" + 1", "right"},
                       {" + W - 1", "down & left"},
                       {" + W", "down"},
                       {" + W + 1", "down & right"}};
  for (int t = 0; t < 9; ++t)
    if (!taps[t].mask.empty())
      b += "  const " + M + " m" + std::to_string(t) + " = " + taps[t].mask + ";\n";
  if (!q) {  // float: the lanes whose first tap inside the plane is tap t (1 … 4: the centre)
    b += "  const " + I + " f1 = m1 & ~m0, f2 = m2 & ~(m0 | m1), f3 = m3 & ~(m0 | m1 | m2);\n";
    b += "  const " + I + " f4 = ~(m0 | m1 | m2 | m3);\n";
  }
  // `value(offset)`: a tap's vector, from the work-item's loads or its clamped gather.
  // Codes: the taps masked to 0 and their maximum. Float: each lane starts from its first tap
  // inside the plane (f<t>), whatever its value (a NaN stays), and takes a later one inside the
  // plane where strictly greater (a later NaN never is) — the scalar kernel's order and values.
  auto maxima = [&](const std::function<std::string(const std::string&)>& value) {
    std::string out;
    if (q) {
      std::string expr;
      for (int t = 8; t >= 0; --t) {
        std::string v = value(taps[t].offset);
        if (!taps[t].mask.empty()) v = "(" + v + " & m" + std::to_string(t) + ")";
        expr = expr.empty() ? v : "max(" + v + ", " + expr + ")";
      }
      return "      best = " + expr + ";\n";
    }
    out += "      best = " + value(taps[0].offset) + ";\n";
    for (int t = 1; t < 9; ++t) {
      // f<t>: the lanes whose first tap inside the plane is t (taken whatever its value).
      std::string take = "val > best";
      if (!taps[t].mask.empty()) take = "m" + std::to_string(t) + " & (" + take + ")";
      if (t <= 4) take = "f" + std::to_string(t) + " | (" + take + ")";
      out += "      {\n        const " + V + " val = " + value(taps[t].offset) + ";\n";
      out += "        best = " + vw.Select("best", "val", take) + ";\n      }\n";
    }
    return out;
  };
  std::string gather;
  for (int l = 0; l < L; ++l)
    gather += std::string(l ? ", " : "") + "(" + U + ")x[clamp(base + " + std::to_string(l) +
              "OFF, 0L, last)]";
  b += R"(  const long last = (long)elements - 1;
  for (int plane = $group_id(1); plane < planes; plane += $num_groups(1)) {
    const long base = (long)plane * HW + p0;
    )" +
       V + R"( best;
    if (base - W - 1 >= 0 && base + W + 1 + )" +
       Ls + R"( <= elements) {
      const $global Dtype* o = x + base;
)" + maxima([&](const std::string& off) { return load("o" + off); }) +
       "    } else {\n" + maxima([&](const std::string& off) {
         std::string g = gather;
         for (size_t p; (p = g.find("OFF")) != std::string::npos;) g.replace(p, 3, off);
         return vw.Of(V, g);
       }) +
       "    }\n";
  if (!q) {
    b += "    " + vw.Store(L, "best", "y + base") + ";\n  }\n";
    k.Body(b);
    return;
  }
  b += "    if (same) {\n      " + vw.MoveStore(U, L, "best", "y + base") +
       ";\n      continue;\n    }\n";
  // Input and output quantized apart: each lane's maximum requantized, as the row form does.
  b += RequantizedLanes(vw, L, "base", Ls, 4) + "  }\n";
  k.Body(b);
}

// The column walk (int8q, fp32): 2×2 and 3×3 windows at stride 1 or 2. The row form takes each
// output row alone: its nine taps are nine loads (at stride 2 each narrowed to its even bytes),
// and each input row is read for every output row whose window holds it (PoCL spent 2-4×
// OpenVINO's time on GoogLeNet's and SqueezeNet's stride-2 pools); the plane form (3×3 stride 1)
// loads and masks nine taps per vector too. Here a work-item takes 16 neighbouring output
// columns of a plane and walks down its output rows, computing each input row's maximum over
// the window's columns once: at stride 1 three loads of 16 bytes one column apart, at stride 2
// one load of 32 bytes and one at +2 read as 16-bit lanes (the low byte is column 2i, the high
// byte 2i + 1, the second load's low byte 2i + 2), masked, and two maxima; the rows a window
// shares with the next output row's (two at stride 1, one at stride 2 of a 3×3 window) are
// carried. Columns outside the row (the padding, Caffe's clipped last window) are masked to 0,
// never above the window's maximum (the codes are unsigned and every window holds an input
// element), rows outside the plane are skipped; loads that would leave the buffer (the first
// and last plane's edges) gather lane by lane at clamped indices. The same values as the scalar
// kernel, bit for bit.
bool WalkMaxApplies(const PoolDesc& d) {
  return (d.type == DataType::kInt8Q || d.type == DataType::kFloat32) &&
         d.method == PoolMethod::kMax && !d.global && d.kernel_h == d.kernel_w &&
         (d.kernel_h == 2 || d.kernel_h == 3) && d.stride_h == d.stride_w &&
         (d.stride_h == 1 || d.stride_h == 2) && d.pad_h < d.kernel_h && d.pad_w < d.kernel_w;
}

int WalkLanes(DataType type) { return type == DataType::kInt8Q ? 16 : 8; }

std::string WalkMaxKernelName(DataType type, int stride) {
  return Pooling::ForwardKernelName(type, PoolMethod::kMax) + "_walk" + std::to_string(stride);
}

void DeclareWalkMax(KernelWriter& w, DataType type, int S) {
  const VectorWords vw(w.target());
  const bool q = type == DataType::kInt8Q;
  const int L = WalkLanes(type);
  const std::string Ls = std::to_string(L);
  // The lanes: int8q's codes themselves at stride 1 and 16-bit pairs of neighbouring codes at
  // stride 2; fp32's floats.
  const std::string lane = !q ? "float" : S == 1 ? "uchar" : "ushort";
  const std::string U = vw.Type(lane, L), I = vw.Type("int", L), B = vw.Type("uchar", L);
  w.UseHelper(KernelHelper::kByteVectorStore);
  // A lane condition as a mask (LaneMask).
  auto mask = [&](const std::string& cond) { return LaneMask(vw, lane, L, cond); };
  const std::string M = q ? U : I;
  // Float lanes outside the window are NaN, which fmax passes over; the first element of the
  // window decides alone where it is a NaN (see `first` below).
  const std::string none = q ? vw.Splat(U, "0") : vw.Splat(U, "NAN");
  std::string iota;
  for (int l = 0; l < L; ++l) iota += (l ? ", " : "") + std::to_string(l);
  // The lanes of a load at s (lane l: s + S·l), gathered at clamped indices.
  auto gather = [&](const std::string& s) {
    std::string lanes;
    for (int l = 0; l < L; ++l) {
      const std::string at = "(" + s + ") + " + std::to_string(S * l);
      lanes += std::string(l ? ", " : "") +
               (!q || S == 1 ? "x[clamp(" + at + ", 0L, last)]"
                             : "(ushort)((ushort)x[clamp(" + at + ", 0L, last)] | " +
                                   "((ushort)x[clamp(" + at + " + 1, 0L, last)] << 8))");
    }
    return vw.Of(U, lanes);
  };
  auto& k = w.Kernel(WalkMaxKernelName(type, S))
                .In("Dtype", "x")
                .Out("Dtype", "y")
                .VectorWidth(q ? Scalar::kI32 : Scalar::kF32, L);
  for (const char* name : {"planes", "H", "W", "OH", "OW", "K", "ph", "pw", "x_zero", "y_zero",
                           "same", "mult", "shift", "elements"})
    k.Value("int", name);
  std::string b = "  const int vecs = (OW + " + std::to_string(L - 1) + ") / " + Ls + ";\n";
  b += "  const int v = $global_id(0);\n  if (v >= vecs) return;\n";
  b += "  // A row's last vector overlaps its neighbour; a row narrower than " + Ls +
       " has one, its lanes\n  // past OW computed, not stored.\n";
  b += "  const int ox0 = max(min(v * " + Ls + ", OW - " + Ls + "), 0);\n";
  b += "  const int c0 = " + std::string(S == 1 ? "" : "2 * ") +
       "ox0 - pw;  // the first lane's first window column\n";
  b += "  const " + I + " col = c0 + " + (S == 1 ? "" : "2 * ") + vw.Of(I, iota) + ";\n";
  // The window columns' masks (m2: none for a 2×2 window). int8q at stride 2: the first column
  // is the low byte of a lane (m0 keeps those 8 bits), the second the high byte shifted down.
  const std::string low = q && S == 2 ? " & (ushort)0xff" : "";
  b += "  const " + M + " m0 = " + mask("col >= 0 && col < W") + low + ";\n";
  b += "  const " + M + " m1 = " + mask("col + 1 >= 0 && col + 1 < W") + ";\n";
  b += "  const " + M + " m2 = K == 3 ? " + mask("col + 2 >= 0 && col + 2 < W") + low + " : " +
       vw.Splat(M, "0") + ";\n";
  b += "  const long last = (long)elements - 1;\n";
  // The window columns' maximum of input row r of the plane into `out` (`none` outside the
  // plane); for float also its first column inside the row into `f<out>`.
  const std::string span = std::to_string(S == 1 ? L + 2 : 2 * L + 2);
  auto row = [&](const std::string& out, const std::string& r) {
    std::string t = "      " + U + " " + out + " = " + none + ";\n";
    if (!q) t += "      " + U + " f" + out + " = " + none + ";\n";
    t += "      if (" + r + " >= 0 && " + r + " < H) {\n        const long s = base + (long)(" +
         r + ") * W + c0;\n        " + U + " a, n, e;\n        if (s >= 0 && s + " + span +
         " <= elements) {\n";
    if (!q && S == 2) {
      // The even and odd lanes of 16 floats and the even ones of 16 from two columns on.
      t += "          const " + vw.Type("float", 2 * L) + " p = " + vw.Load(2 * L, "x + s") +
           ";\n          a = " + vw.Even("p") + ";\n          n = " + vw.Odd("p") +
           ";\n          e = " + vw.Even(vw.Load(2 * L, "x + s + 2")) + ";\n";
    } else if (!q) {
      t += "          a = " + vw.Load(L, "x + s") + ";\n          n = " + vw.Load(L, "x + s + 1") +
           ";\n          e = " + vw.Load(L, "x + s + 2") + ";\n";
    } else if (S == 1) {
      t += "          a = " + vw.MoveLoad("uchar", L, "x + s") + ";\n          n = " +
           vw.MoveLoad("uchar", L, "x + s + 1") + ";\n          e = " +
           vw.MoveLoad("uchar", L, "x + s + 2") + ";\n";
    } else {
      t += "          a = " + vw.MoveLoad("ushort", L, "x + s") +
           ";\n          n = a >> (ushort)8;\n          e = " +
           vw.MoveLoad("ushort", L, "x + s + 2") + ";\n";
    }
    t += "        } else {\n          a = " + gather("s") + ";\n";
    if (q && S == 2)
      t += "          n = a >> (ushort)8;\n          e = " + gather("s + 2") + ";\n";
    else
      t += "          n = " + gather("s + 1") + ";\n          e = " + gather("s + 2") + ";\n";
    t += "        }\n";
    if (q) {
      t += "        " + out + " = max(max(a & m0, n & m1), e & m2);\n      }\n";
    } else {
      t += "        " + out + " = fmax(fmax(" + vw.Select(none, "a", "m0") + ", " +
           vw.Select(none, "n", "m1") + "), " + vw.Select(none, "e", "m2") + ");\n";
      t += "        f" + out + " = " + vw.Select(vw.Select("e", "n", "m1"), "a", "m0") +
           ";\n      }\n";
    }
    return t;
  };
  // fp32: `first`, the window's first element inside the plane (its first row inside, that
  // row's first column inside), decides alone where it is a NaN (the scalar kernel keeps a NaN
  // it starts from and never takes a later one); else the maximum of the others, where fmax
  // passes over NaNs — the scalar kernel's values.
  const std::string MAX = q ? "max" : "fmax";
  auto carried = [&](const std::string& name) {
    return "    " + U + " " + name + " = " + none + (q ? "" : ", f" + name + " = " + none) + ";\n";
  };
  b += R"(  for (int plane = $group_id(1); plane < planes; plane += $num_groups(1)) {
    const long base = (long)plane * H * W;
)" + carried("carry0") + carried("carry1");
  b += "    for (int oy = 0; oy < OH; ++oy) {\n      const int r0 = " +
       std::string(S == 1 ? "" : "2 * ") + "oy - ph;\n      " + U + " best" +
       (q ? "" : ", first") + ";\n";
  // Rows r0 … r0 + K − 1 (h0 … h2); the next output row's window starts S rows lower, so its
  // row k is this one's row k + S where that is a row of the window: carried (carry0, carry1).
  // Row k is carried where k + S < K (at stride 1 all but the last, at stride 2 a 3×3 window's
  // first).
  const std::string Ss = std::to_string(S);
  for (int k = 0; k < 3; ++k) {
    const std::string h = "h" + std::to_string(k), r = "r0 + " + std::to_string(k);
    std::string compute = row(h + "r", r);
    std::string body = "      " + U + " " + h + " = " + none + (q ? "" : ", f" + h + " = " + none) +
                       ";\n";
    const std::string computed = "        " + h + " = " + h + "r;\n" +
                                 (q ? "" : "        f" + h + " = f" + h + "r;\n");
    if (k < 2) {
      const std::string c = "carry" + std::to_string(k);
      body += "      if (oy > 0 && " + std::to_string(k) + " + " + Ss + " < K) {\n        " + h +
              " = " + c + ";\n" + (q ? "" : "        f" + h + " = f" + c + ";\n") +
              "      } else {\n" + compute + computed + "      }\n";
    } else {
      body += "      if (K == 3) {\n" + compute + computed + "      }\n";
    }
    b += body;
  }
  b += "      best = " + MAX + "(" + MAX + "(h0, h1), h2);  // h2: `none` for a 2×2 window\n";
  if (!q) {
    // The window's first row inside the plane: r0, else r0 + 1, else (a 3×3 window) r0 + 2.
    b += "      first = r0 >= 0 ? fh0 : r0 + 1 >= 0 || K == 2 ? fh1 : fh2;\n";
  }
  // The next row's carried rows: its row k is row k + S here.
  for (int k = 0; k < 2; ++k) {
    const int from = k + S;
    if (from > 2) break;
    const std::string c = "carry" + std::to_string(k), h = "h" + std::to_string(from);
    b += "      " + c + " = " + h + ";\n" + (q ? "" : "      f" + c + " = f" + h + ";\n");
  }
  b += "      const long i0 = ((long)plane * OH + oy) * OW + ox0;\n";
  if (!q) {
    b += "      best = " + vw.Select("best", "first", "isnan(first)") + ";\n";
    b += "      if (OW >= " + Ls + ") {\n        " + vw.Store(L, "best", "y + i0") +
         ";\n        continue;\n      }\n";
    b += "      float lanes[" + Ls + "];\n      " + vw.Store(L, "best", "lanes") + ";\n";
    b += "      for (int l = 0; l < OW; ++l) Dtype_STORE(y, i0 + l, lanes[l]);\n    }\n  }\n";
    k.Body(b);
    return;
  }
  const std::string codes = S == 1 ? "best" : vw.Convert(B, "best");
  b += "      if (same) {\n        const " + B + " codes = " + codes + ";\n";
  b += "        if (OW >= " + Ls + ") {\n          " + vw.MoveStore("uchar", L, "codes", "y + i0") +
       ";\n        } else {\n" + vw.MoveStoreFirst("uchar", L, "codes", "y + i0", "OW", 10) +
       "        }\n        continue;\n      }\n";
  // Input and output quantized apart: each lane's maximum requantized, as the row form does.
  b += RequantizedLanes(vw, L, "i0", "min(" + Ls + ", OW)", 6) + "    }\n  }\n";
  k.Body(b);
}

// The whole-plane average: the scalar kernel gives each output (here a plane's one value) to a
// work-item that sums the plane one element at a time, and PoCL runs its work-groups as loops of
// such scalar sums (SqueezeNet's pool10 over 1000 planes of 13 × 13: 60 µs). Here a work-item
// sums its planes in vectors of 8. fp32 adds in another order than the scalar kernel (the lanes'
// partial sums, then the tail), as a reduction on any device may; the codes' sums are exact.
bool PlaneAveApplies(const PoolDesc& d) {
  return (IsQuantized(d.type) || d.type == DataType::kFloat32) &&
         d.method == PoolMethod::kAverage && d.window_h() == d.height &&
         d.window_w() == d.width && (d.global || (d.pad_h == 0 && d.pad_w == 0)) &&
         d.out_h() == 1 && d.out_w() == 1 && long(d.height) * d.width < 32768;
}

std::string PlaneAveKernelName(DataType type) {
  return Pooling::ForwardKernelName(type, PoolMethod::kAverage) + "_plane";
}

void DeclarePlaneAve(KernelWriter& w, DataType type) {
  const VectorWords vw(w.target());
  const bool q = IsQuantized(type);
  const std::string S = q ? "int" : "float", V = vw.Type(S, 8);
  const std::string load = q ? vw.Convert(V, vw.Load(8, "xp + j")) : vw.Load(8, "xp + j");
  std::string lanes = vw.Lane("s8", 0);
  for (int l = 1; l < 8; ++l) lanes = "(" + lanes + " + " + vw.Lane("s8", l) + ")";
  std::string b = "  $vector_loop(p, planes) {\n";
  b += "    const $global Dtype* xp = x + (long)p * hw;\n";
  b += "    " + V + " s8 = " + vw.Splat(V, q ? "0" : "0.0f") + ";\n";
  b += "    int j = 0;\n    for (; j + 8 <= hw; j += 8) s8 += " + load + ";\n";
  b += "    " + S + " acc = " + lanes + ";\n";
  b += "    for (; j < hw; ++j) acc += (" + S + ")Dtype_LOAD(xp, j);\n";
  if (q) {
    b += "    mp_i64 r = (mp_i64)y_zero + MP_REQUANT((Dtype_acc)(acc - hw * x_zero), "
         "rq[2 * hw - 2], rq[2 * hw - 1]);\n";
    b += "    r = Dtype_SAT(r);\n    Dtype_STORE(y, p, r);\n";
  } else {
    b += "    Dtype_STORE(y, p, acc / (float)hw);\n";
  }
  b += "  }\n";
  w.Kernel(PlaneAveKernelName(type))
      .In("Dtype", "x")
      .Out("Dtype", "y")
      .In("int", "rq")
      .Value("int", "planes")
      .Value("int", "hw")
      .Value("int", "x_zero")
      .Value("int", "y_zero")
      .VectorWidth(q ? Scalar::kI32 : Scalar::kF32, 8)
      .Body(b);
}

}  // namespace mpcaffe::libdnn::pool_internal
