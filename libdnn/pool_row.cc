// libdnn/pool_row.cc — the row form of the vector max pooling kernel (Pooling's "_v<L>"
// kernels, family pool_vector_max): a work-item takes L neighbouring outputs of a row as one
// vector, work-groups walk the rows (pool.cc: when it runs, its lane counts and launch).
#include <functional>
#include <string>

#include "codegen/vector_words.h"
#include "libdnn/pool_internal.h"

namespace mpcaffe::libdnn::pool_internal {

/// The vector max kernel. Float types: each lane visits its window in the scalar kernel's order
/// (rows, then columns, clipped to the input) and keeps the first maximum as `v > best` does, so
/// the results are the same values, NaN included. Quantized types are stored unsigned (uchar,
/// ushort), have no NaN and one maximum value whatever the order: the lanes stay in the storage
/// type (no conversion per load), a column's in-window mask is computed once for all its rows,
/// and an element outside a lane's window counts as 0 (`val & mask`), never above the window's
/// maximum (every window holds at least one element). The same values as the scalar kernel.
void DeclareVectorMax(KernelWriter& w, DataType type, int L) {
  const bool q = IsQuantized(type);
  const VectorWords vw(w.target());
  const std::string U = type == DataType::kInt8Q ? "uchar" : "ushort";  // quantized storage
  const std::string Ls = std::to_string(L);
  // The loads' and gather's macros, named by L (a program holds int8q's kernels of 8 and 16).
  const std::string LD = "MP_LOAD" + Ls, LD2 = LD + "S2", GA = "MP_GATHER" + Ls;
  const std::string S = q ? U : "float", V = vw.Type(S, L), I8 = vw.Type("int", L);
  std::string lanes, iota;
  for (int l = 0; l < L; ++l) {
    lanes += std::string(l ? ", " : "") + "(" + S + ")Dtype_LOAD(p, " + vw.Lane("(ix)", l) + ")";
    iota += (l ? ", " : "") + std::to_string(l);
  }
  w.Define(GA + "(p, ix)", "(" + vw.Of(V, lanes) + ")");
  // L neighbouring elements, and the even ones of 2·L, as the compute vector.
  if (type == DataType::kFloat16) {
    w.Define(LD + "(p)", vw.LoadHalf(8, "(p)"));
    w.Define(LD2 + "(p)", vw.Even(vw.LoadHalf(16, "(p)")));
  } else if (type == DataType::kInt8Q && L == 16) {
    // The even bytes of 32 as the low bytes of 16 unsigned shorts: one spelling both CPU
    // runtimes compile to a load and a narrowing (0.06-0.08 ms for SqueezeNet's pool1 at
    // AVX-512 on either); the even lanes of two 16-byte moves joined stayed lane by lane on
    // Intel's runtime (0.39 ms), of two vload16 on PoCL (0.18).
    w.UseHelper(KernelHelper::kByteVectorStore);
    w.Define(LD + "(p)", vw.Load(16, "(p)"));
    w.Define(LD2 + "(p)",
             vw.Convert(vw.Type("uchar", 16), "(MP_LOAD_USHORT16(p) & (ushort)0xff)"));
  } else if (q) {
    // The even lanes of one 16-lane move (KernelHelper::kByteVectorStore's loads): PoCL 3.1 made
    // even lanes of a strided 16-lane load 8 separate 16-bit loads, each inserted by itself.
    w.UseHelper(KernelHelper::kByteVectorStore);
    w.Define(LD + "(p)", vw.Load(8, "(p)"));
    w.Define(LD2 + "(p)", vw.Even(U == "uchar" ? "MP_LOAD_UCHAR16(p)" : "MP_LOAD_USHORT16(p)"));
  } else {
    // fp32 likewise: PoCL 3.1 loads the even lanes of a 16-lane vload one by one.
    w.UseHelper(KernelHelper::kByteVectorStore);
    w.Define(LD + "(p)", vw.Load(8, "(p)"));
    w.Define(LD2 + "(p)", vw.Even("MP_LOAD_FLOAT16(p)"));
  }
  auto& k = w.Kernel(Pooling::ForwardKernelName(type, PoolMethod::kMax) + "_v" + Ls)
                .In("Dtype", "x")
                .Out("Dtype", "y");
  for (const char* name : {"rows", "H", "W", "OH", "OW", "KH", "KW", "sh", "sw", "ph", "pw",
                           "x_zero", "y_zero", "same", "mult", "shift", "elements"})
    k.Value("int", name);
  std::string body = "  const int vecs = (OW + " + std::to_string(L - 1) + ") / " + Ls + ";\n";
  body += R"(  const int v = $global_id(0);
  const int live = v < vecs;
  // The row's last vector overlaps its neighbour; a row narrower than L has one vector, its
  // lanes past OW dead (computed, not stored).
)";
  body += "  const int ox0 = max(min(v * " + Ls + ", OW - " + Ls + "), 0);\n";
  body += "  const int c0 = ox0 * sw - pw;        // the first lane's first window column\n";
  body += "  const " + I8 + " wstart = (ox0 + " + vw.Of(I8, iota) + ") * sw - pw;\n";
  body += "  const " + I8 + " ws = max(wstart, " + vw.Splat(I8, "0") + ");\n";
  body += "  const " + I8 + " we = min(min(wstart + KW, " + vw.Splat(I8, "W + pw") + "), " +
          vw.Splat(I8, "W") + ");\n";
  // Elements one window column's vector load covers: L at stride 1, 2·L at stride 2; every
  // lane's window inside the row (`full`).
  body += "  const int span = sw == 1 ? " + Ls + " : " + std::to_string(2 * L) + ";\n";
  body += "  const int full = c0 >= 0 && c0 + " + std::to_string(L - 1) + " * sw + KW <= W;\n";
  body += R"(  // The row's plane and output row, carried from row to row (no division per row).
  const int step = $num_groups(1), step_nc = step / OH, step_oy = step - step_nc * OH;
)";
  const std::string loop_head = R"(  int nc = $group_id(1) / OH, oy = $group_id(1) - nc * OH;
  for (int row = $group_id(1); row < rows;
       row += step, oy += step_oy, nc += step_nc + (oy >= OH), oy -= oy >= OH ? OH : 0) {
    int hs = oy * sh - ph;
    const int he = min(min(hs + KH, H + ph), H);
    hs = max(hs, 0);
    const $global Dtype* xp = x + nc * H * W;
    // Vector loads where every load of the window stays inside the buffer.
    const long e0 = (long)nc * H * W + (long)hs * W + c0;
    const long e1 = (long)nc * H * W + (long)(he - 1) * W + c0 + KW - 1 + span;
    const int fast = sw <= 2 && e0 >= 0 && e1 <= elements;
)";
  // The window's loops once per load form, chosen outside them: as one expression (a select
  // of the three) the compilers computed the lane-by-lane gather for every element.
  const std::string gather =
      GA + "(xr, " + vw.Clamp("ix", vw.Splat(I8, "0"), vw.Splat(I8, "W - 1")) + ")";
  // `inside`: float types' text for work-items whose lanes' windows all lie inside the row
  // (`full`), in a row loop of its own, so that the others run the masked loops' text alone.
  auto forms = [&](const std::function<std::string(const std::string&, bool)>& loops,
                   bool inside) {
    // Quantized types: where every lane's window lies inside its row (`full`, most vectors of a
    // row), no column masks.
    // The 3×3 window (most nets' max pooling) unrolled: nine loads from three rows.
    auto three = [&](const std::string& load) {
      std::string expr;
      for (int i = 8; i >= 0; --i) {
        std::string at = "r";
        if (i / 3) at += " + " + std::to_string(i / 3) + " * W";
        if (i % 3) at += " + " + std::to_string(i % 3);
        const std::string value = load + "(" + at + ")";
        expr = expr.empty() ? value : "max(" + value + ", " + expr + ")";
      }
      return "      const $global Dtype* r = xp + hs * W + c0;\n      best = " + expr + ";\n";
    };
    // Float types where every lane's window lies inside its row: the lanes' first elements
    // are one load, the rest taken where strictly greater — the scalar kernel's order and
    // values (a NaN first stays, a later NaN is never greater) without its per-element masks
    // and first-seen bookkeeping, which bound the masked loop (GoogLeNet's fp32 max pools).
    auto three_ordered = [&](const std::string& load) {
      std::string b = "      const $global Dtype* r = xp + hs * W + c0;\n      best = " + load +
                      "(r);\n";
      for (int i = 1; i < 9; ++i) {
        std::string at = "r";
        if (i / 3) at += " + " + std::to_string(i / 3) + " * W";
        if (i % 3) at += " + " + std::to_string(i % 3);
        b += "      {\n        const " + V + " val = " + load + "(" + at + ");\n        best = " +
             vw.Select("best", "val", "val > best") + ";\n      }\n";
      }
      return b;
    };
    auto ordered = [&](const std::string& load) {
      return "      best = " + load + "(xp + hs * W + c0);\n"
             "      for (int h = hs; h < he; ++h) {\n"
             "        const $global Dtype* xr = xp + h * W;\n"
             "        for (int kx = h == hs; kx < KW; ++kx) {\n"
             "          const " + V + " val = " + load + "(xr + c0 + kx);\n"
             "          best = " + vw.Select("best", "val", "val > best") + ";\n"
             "        }\n      }\n";
    };
    const std::string unmasked =
        q ? "    if (full && fast && KW == 3 && he - hs == 3 && sw == 1) {\n" +
                three(LD) + "    } else if (full && fast && KW == 3 && he - hs == 3) {\n" +
                three(LD2) + "    } else if (full && fast && sw == 1) {\n" +
                loops(LD + "(xr + c0 + kx)", false) +
                "    } else if (full && fast) {\n" + loops(LD2 + "(xr + c0 + kx)", false) +
                "    } else "
          : !inside ? "    "
                    : "    if (fast && KW == 3 && he - hs == 3 && sw == 1) {\n" +
                          three_ordered(LD) +
                          "    } else if (fast && KW == 3 && he - hs == 3) {\n" +
                          three_ordered(LD2) + "    } else if (fast && sw == 1) {\n" +
                          ordered(LD) + "    } else if (fast) {\n" +
                          ordered(LD2) + "    } else ";
    return unmasked + "if (fast && sw == 1) {\n" + loops(LD + "(xr + c0 + kx)", true) +
           "    } else if (fast) {\n" + loops(LD2 + "(xr + c0 + kx)", true) +
           "    } else {\n" + loops(gather, true) + "    }\n";
  };
  // The row loop's end: the store of the row's vector.
  std::string tail = R"(    if (!live) continue;
    const int i0 = row * OW + ox0;
)";
  if (!q) {
    tail += "    if (OW >= " + Ls + ") {\n      " +
            (type == DataType::kFloat16 ? vw.StoreHalf(8, "best", "y + i0")
                                        : vw.Store(8, "best", "y + i0")) +
            ";\n      continue;\n    }\n";
    tail += "    float lanes[8];\n    " +
            vw.Store(8, vw.Convert(vw.Type("float", 8), "best"), "lanes") +
            ";\n    for (int l = 0; l < OW; ++l) Dtype_STORE(y, i0 + l, lanes[l]);\n";
  } else {
    // Equal parameters (the common case: max pooling keeps its input's range): one store, or
    // for a row narrower than a vector (7×7 outputs) its OW lanes in a move per power of two.
    w.UseHelper(KernelHelper::kByteVectorStore);
    tail += "    if (same) {\n      if (OW >= " + Ls + ") {\n        " +
            vw.MoveStore(U, L, "best", "y + i0") + ";\n      } else {\n" +
            vw.MoveStoreFirst(U, L, "best", "y + i0", "OW", 8) + "      }\n      continue;\n    }\n";
    tail += "    int lanes[" + Ls + "];\n    " + vw.Store(L, vw.Convert(I8, "best"), "lanes") +
            ";\n";
    tail += "    for (int l = 0; l < " + Ls + " && l < OW; ++l) {\n";
    tail += R"(
      mp_i64 r = same ? $long_of_int(lanes[l]) : (mp_i64)y_zero + MP_REQUANT(lanes[l] - x_zero, mult, shift);
      r = Dtype_SAT(r);
      Dtype_STORE(y, i0 + l, r);
    }
)";
  }
  tail += "  }\n";
  if (q) {
    body += loop_head + "    " + V + " best = " + vw.Splat(V, "0") + ";\n";
    body += forms([&](const std::string& load, bool masked) {
      std::string l = "    for (int kx = 0; kx < KW; ++kx) {\n";
      if (masked)
        l += "      const " + I8 + " ix = wstart + kx;\n      const " + V + " inside = " +
             vw.As(V, vw.Convert(vw.Type(U == "uchar" ? "char" : "short", L),
                                 "ix >= ws && ix < we")) +
             ";\n";
      l += "      for (int h = hs; h < he; ++h) {\n        const $global Dtype* xr = xp + h * W;\n";
      l += "        const " + V + " val = " + load + ";\n";
      return l + "        best = max(best, " + (masked ? "val & inside" : "val") +
             ");\n      }\n    }\n";
    }, false) + tail;
  } else {
    // Each lane's first element inside the input, (hs, ws), is taken whatever its value (NaN
    // too), as the scalar kernel starts from it; then the first greater one.
    const std::string start = "    " + V + " best = " + vw.Splat(V, "0") + ";\n    " + I8 +
                              " seen = " + vw.Splat(I8, "0") + ";\n";
    auto masked = [&](const std::string& load, bool) {
      std::string l = "    for (int h = hs; h < he; ++h) {\n"
                      "      const $global Dtype* xr = xp + h * W;\n"
                      "      for (int kx = 0; kx < KW; ++kx) {\n";
      l += "        const " + I8 + " ix = wstart + kx;\n";
      l += "        const " + I8 + " ok = ix >= ws && ix < we;\n";
      l += "        const " + V + " val = " + load + ";\n";
      l += "        best = " + vw.Select("best", "val", "ok & (~seen | (val > best))") + ";\n";
      return l + "        seen |= ok;\n      }\n    }\n";
    };
    // fp32 only: PoCL 3.1's LLVM crashed compiling the fp16 text with the two loops
    // (lanes loaded from half storage), so fp16 keeps the masked loop alone. And only where a
    // work-item is a thread's loop (KernelTarget::work_item_is_thread: the CPU runtimes): where
    // work-items are SIMD lanes (llvmpipe, GPUs) the lanes of a group diverge on `full` and
    // run both loops (rusticl: 256 × 28² pools 15.6 → 54.3 ms with the split).
    if (type == DataType::kFloat32 && w.target().work_item_is_thread)
      body += "  if (full) {\n" + loop_head + start + forms(masked, true) + tail +
              "  } else {\n" + loop_head + start + forms(masked, false) + tail + "  }\n";
    else
      body += loop_head + start + forms(masked, false) + tail;
  }
  k.Body(body);
}

}  // namespace mpcaffe::libdnn::pool_internal
