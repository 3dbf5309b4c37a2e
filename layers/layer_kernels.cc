// layers/layer_kernels.cc — bodies of the non-libdnn layer kernels, written once and emitted by
// KernelWriter; float types compute in float, quantized paths requantize like quant/.
#include "layers/layer_kernels.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "codegen/typed_buffer.h"
#include "codegen/vector_words.h"

namespace mpcaffe {

void RequireFloat(DataType type, const std::string& op) {
  if (IsQuantized(type))
    throw std::invalid_argument("kernel " + op + " has no quantized variant (" + Name(type) + ")");
}

namespace {

/// MP_COPY_STORE(from, to): y[to] = x[from], requantized from x's (x_zero) to y's (y_zero, mult,
/// shift) range for quantized types; Concat, Slice and the gather family copy with it.
void DefineCopyStore(KernelWriter& w, DataType type) {
  if (IsQuantized(type)) {
    w.UseRequant(type);
    w.Define("MP_COPY_STORE(from, to)",
             "mp_i64 r = y_zero + MP_REQUANT(Dtype_LOAD(x, from) - x_zero, mult, shift); "
             "r = Dtype_SAT(r); "
             "Dtype_STORE(y, to, r);");
  } else {
    w.Define("MP_COPY_STORE(from, to)", "Dtype_STORE(y, to, Dtype_LOAD(x, from));");
  }
}

}  // namespace

std::string LayerKernelName(const std::string& op, DataType type) {
  return op + "_" + Name(type);
}

std::string SoftmaxRowsKernelName(DataType type) { return LayerKernelName("softmax_rows", type); }
std::string SoftmaxVectorKernelName(DataType type) { return LayerKernelName("softmax_v8", type); }

bool HasVectorSoftmax(const KernelTarget& target, DataType type) {
  return type == DataType::kFloat32 && target.vector_builtins && target.work_item_is_thread;
}

std::string ChannelPlanesVectorLoop(const std::string& plane, const std::string& vec,
                                   const std::string& one) {
  return "  const long g = $global_size(0);\n"
         "  const long per = ((n + g - 1) / g + 7) / 8 * 8;\n"
         "  int i = (int)min((long)n, (long)$global_id(0) * per);\n"
         "  const int e = (int)min((long)n, (long)i + per);\n"
         "  while (i < e) {\n"
         "    const int p = i / inner;\n"
         "    const int pe = (int)min((long)e, (long)(p + 1) * inner);\n"
         "    const int c = p % channels;\n" +
         plane + "    for (; i + 8 <= pe; i += 8) {\n" + vec + "    }\n" +
         "    for (; i < pe; ++i) {\n" + one + "    }\n  }\n";
}

std::string ChannelAffineKernelName(DataType type, DataType param_type) {
  return std::string("channel_affine_") + Name(type) + "_" + Name(param_type);
}

bool HasVectorChannelAffine(const KernelTarget& target, DataType type, DataType param_type) {
  return target.vector_builtins && target.work_item_is_thread &&
         param_type == DataType::kFloat32 &&
         (type == DataType::kFloat32 || IsQuantized(type));
}

std::string ChannelAffineLaunchName(const KernelTarget& target, DataType type,
                                    DataType param_type) {
  return ChannelAffineKernelName(type, param_type) +
         (HasVectorChannelAffine(target, type, param_type) ? "_v8" : "");
}

size_t ChannelPlanesVectorItems(int n) { return size_t(std::max(1, n / 1024)); }

std::string SoftmaxSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "softmax");
  KernelWriter w(target, "softmax");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("softmax", type))
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("Dtype", "x").Out("Dtype", "y")
      .Body(R"(  $loop(j, outer * inner) {
    const int base = (j / inner) * channels * inner + j % inner;
    float m = (float)Dtype_LOAD(x, base);
    for (int c = 1; c < channels; ++c) {
      float v = (float)Dtype_LOAD(x, base + c * inner);
      m = v > m ? v : m;
    }
    float sum = 0.0f;
    for (int c = 0; c < channels; ++c) sum += exp((float)Dtype_LOAD(x, base + c * inner) - m);
    for (int c = 0; c < channels; ++c) {
      float v = exp((float)Dtype_LOAD(x, base + c * inner) - m) / sum;
      Dtype_STORE(y, base + c * inner, (Dtype_c)v);
    }
  }
)");
  if (HasVectorSoftmax(target, type)) {
    // Contiguous rows (inner 1) on a CPU runtime: each work-item's row in vectors of 8 floats,
    // the channels % 8 tail one by one. PoCL runs the per-row kernel's exp as scalar calls,
    // 24 µs of a 1000-class row there (2 µs on Intel's runtime, which widens them itself).
    const VectorWords v(target);
    const std::string f8 = v.Type("float", 8), at = "xr + 8 * c";
    auto over_lanes = [&](bool max, const std::string& x) {
      std::string r = v.Lane(x, 0);
      for (int i = 1; i < 8; ++i)
        r = max ? "fmax(" + r + ", " + v.Lane(x, i) + ")" : r + " + " + v.Lane(x, i);
      return r;
    };
    w.Kernel(SoftmaxVectorKernelName(type))
        .Value("int", "outer").Value("int", "channels").Value("int", "inner")
        .In("Dtype", "x").Out("Dtype", "y")
        .VectorWidth(Scalar::kF32, 8)
        .Body("  $loop(j, outer) {\n"
              "    const $global float* xr = x + (long)j * channels;\n"
              "    $global float* yr = y + (long)j * channels;\n"
              "    const int c8 = channels / 8;\n"
              "    float m = xr[0];\n"
              "    if (c8 > 0) {\n"
              "      " + f8 + " mv = " + v.Load(8, "xr") + ";\n"
              "      for (int c = 1; c < c8; ++c) mv = fmax(mv, " + v.Load(8, at) + ");\n"
              "      m = " + over_lanes(true, "mv") + ";\n"
              "    }\n"
              "    for (int c = 8 * c8; c < channels; ++c) m = fmax(m, xr[c]);\n"
              "    " + f8 + " sv = " + v.Splat(f8, "0.0f") + ";\n"
              "    for (int c = 0; c < c8; ++c) sv += exp(" + v.Load(8, at) + " - m);\n"
              "    float sum = " + over_lanes(false, "sv") + ";\n"
              "    for (int c = 8 * c8; c < channels; ++c) sum += exp(xr[c] - m);\n"
              "    for (int c = 0; c < c8; ++c)\n"
              "      " + v.Store(8, "exp(" + v.Load(8, at) + " - m) / sum", "yr + 8 * c") + ";\n"
              "    for (int c = 8 * c8; c < channels; ++c) yr[c] = exp(xr[c] - m) / sum;\n"
              "  }\n");
  }
  // A work-group of MP_SOFTMAX_LOCAL work-items per row (the launch's groups are the rows):
  // the row's maximum and its sum of exponentials reduced in local memory, each work-item
  // walking every MP_SOFTMAX_LOCAL-th channel (neighbouring work-items read neighbouring
  // channels where inner is 1).
  w.Define("MP_SOFTMAX_LOCAL", std::to_string(kLaunch1DLocalSize));
  w.Kernel(SoftmaxRowsKernelName(type))
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("Dtype", "x").Out("Dtype", "y")
      .Body(R"(  $shared float part[MP_SOFTMAX_LOCAL];
  const int t = $local_id(0), j = $group_id(0);
  const int base = (j / inner) * channels * inner + j % inner;
  float m = (float)Dtype_LOAD(x, base);  // channel 0: in the row, a start for any work-item
  for (int c = t; c < channels; c += MP_SOFTMAX_LOCAL) {
    const float v = (float)Dtype_LOAD(x, base + c * inner);
    m = v > m ? v : m;
  }
  part[t] = m;
  $barrier;
  for (int h = MP_SOFTMAX_LOCAL / 2; h > 0; h >>= 1) {
    if (t < h) part[t] = part[t + h] > part[t] ? part[t + h] : part[t];
    $barrier;
  }
  const float top = part[0];
  $barrier;
  float s = 0.0f;
  for (int c = t; c < channels; c += MP_SOFTMAX_LOCAL)
    s += exp((float)Dtype_LOAD(x, base + c * inner) - top);
  part[t] = s;
  $barrier;
  for (int h = MP_SOFTMAX_LOCAL / 2; h > 0; h >>= 1) {
    if (t < h) part[t] += part[t + h];
    $barrier;
  }
  const float sum = part[0];
  for (int c = t; c < channels; c += MP_SOFTMAX_LOCAL) {
    const float v = exp((float)Dtype_LOAD(x, base + c * inner) - top) / sum;
    Dtype_STORE(y, base + c * inner, (Dtype_c)v);
  }
)");
  return w.Source();
}

std::string ConcatSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "concat");
  w.AddType("Dtype", type);
  auto& k = w.Kernel(LayerKernelName("concat", type))
                .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
                .Value("int", "bottom_axis").Value("int", "top_axis").Value("int", "inner")
                .Value("int", "offset").Value("int", "x_zero").Value("int", "y_zero")
                .Value("int", "mult").Value("int", "shift");
  k.Body(R"(  $loop(i, n) {
    const int block = bottom_axis * inner;
    const int t = (i / block) * top_axis * inner + offset * inner + i % block;
    MP_CONCAT_STORE
  }
)");
  // Slice, the mirror image: top element i from the bottom's channel offset + (i's channel).
  w.Kernel(LayerKernelName("slice", type))
      .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
      .Value("int", "bottom_axis").Value("int", "top_axis").Value("int", "inner")
      .Value("int", "offset").Value("int", "x_zero").Value("int", "y_zero")
      .Value("int", "mult").Value("int", "shift")
      .Body(R"(  $loop(i, n) {
    const int block = top_axis * inner;
    const int s = (i / block) * bottom_axis * inner + offset * inner + i % block;
    MP_COPY_STORE(s, i)
  }
)");
  DefineCopyStore(w, type);
  w.Define("MP_CONCAT_STORE", "MP_COPY_STORE(i, t)");
  if (HasVectorConcat(target, type)) {
    w.UseHelper(KernelHelper::kByteVectorStore);
    // PoCL runs the scalar form's requantization (mp_requant32's branches) as scalar code, many
    // times fp32's copy (docs/BENCHMARKS.md, "Default configurations").
    auto& v = w.Kernel(LayerKernelName("concat", type) + "_v16")
                  .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
                  .Value("int", "bottom_axis").Value("int", "top_axis").Value("int", "inner")
                  .Value("int", "offset").Value("int", "x_zero").Value("int", "y_zero")
                  .Value("int", "mult").Value("int", "shift");
    const VectorWords vw(target);
    const std::string i16 = vw.Type("int", 16), l16 = vw.Type("long", 16);
    v.Body(std::string(R"(  const int block = bottom_axis * inner;
  const int steps = (n + 15) / 16;
  $loop(s, steps) {
    const int i0 = s * 16;
    const int o = i0 / block, r0 = i0 - o * block;
    if (r0 + 16 <= block && i0 + 16 <= n) {
)") + "      const " + i16 + " d = " + vw.Convert(i16, vw.Load(16, "x + i0")) + " - x_zero;\n" +
           vw.Requant(16, "q", "d", vw.Splat(i16, "mult"), vw.Splat(i16, "shift"), 6) +
           "      q = " + vw.Clamp("q + y_zero", vw.Splat(l16, "Dtype_QMIN"), vw.Splat(l16, "Dtype_QMAX")) +
           ";\n      MP_STORE_UCHAR16(" + vw.Convert(vw.Type("uchar", 16), "q") +
           ", y + o * top_axis * inner + offset * inner + r0);\n" + R"(    } else {
      for (int i = i0; i < min(i0 + 16, n); ++i) {
        const int t = (i / block) * top_axis * inner + offset * inner + i % block;
        MP_CONCAT_STORE
      }
    }
  }
)");
  }
  return w.Source();
}

std::string GatherSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "gather");
  w.AddType("Dtype", type);
  // MP_GATHER_START(j, s): s = base + Σ coord_k(j)·s_k, innermost dimension first.
  std::string start = "int r_ = (j); s = base;";
  for (int k = kGatherAxes - 1; k >= 0; --k) {
    const std::string d = "d" + std::to_string(k), st = "s" + std::to_string(k);
    start += " s += (r_ % " + d + ") * " + st + "; r_ /= " + d + ";";
  }
  w.Define("MP_GATHER_START(j, s)", "{ " + start + " }");
  auto strides = [](KernelBuilder& k) -> KernelBuilder& {
    k.Value("int", "base");
    for (int i = 0; i < kGatherAxes; ++i) k.Value("int", "d" + std::to_string(i));
    for (int i = 0; i < kGatherAxes; ++i) k.Value("int", "s" + std::to_string(i));
    return k;
  };
  strides(w.Kernel(LayerKernelName("gather", type))
              .Value("int", "n").In("Dtype", "x").Out("Dtype", "y"))
      .Value("int", "x_zero").Value("int", "y_zero").Value("int", "mult").Value("int", "shift")
      .Body(R"(  $loop(i, n) {
    int s;
    MP_GATHER_START(i, s)
    MP_COPY_STORE(s, i)
  }
)");
  // Rows picked by an index list (Filter, BatchReindex, Embed): row r of y is row idx[r] of x.
  w.Kernel(LayerKernelName("rows", type))
      .Value("int", "n").Value("int", "inner").In("int", "idx").In("Dtype", "x").Out("Dtype", "y")
      .Value("int", "x_zero").Value("int", "y_zero").Value("int", "mult").Value("int", "shift")
      .Body(R"(  $loop(i, n) {
    const int row = i / inner;  // (MP_COPY_STORE declares r)
    MP_COPY_STORE(idx[row] * inner + (i - row * inner), i)
  }
)");
  DefineCopyStore(w, type);
  if (IsQuantized(type)) return w.Source();
  w.Kernel(LayerKernelName("embed", type))
      .Value("int", "n").Value("int", "dim").In("int", "idx").In("Dtype", "w").In("Dtype", "bias")
      .Value("int", "has_bias").Out("Dtype", "y")
      .Body(R"(  $loop(i, n) {
    const int r = i / dim, d = i - r * dim;
    float v = (float)Dtype_LOAD(w, idx[r] * dim + d);
    if (has_bias) v += (float)Dtype_LOAD(bias, d);
    Dtype_STORE(y, i, (Dtype_c)v);
  }
)");
  strides(w.Kernel(LayerKernelName("reduce", type))
              .Value("int", "n").In("Dtype", "x").Out("Dtype", "y"))
      .Value("int", "count").Value("int", "step").Value("int", "op").Value("float", "coeff")
      .Body(R"(  $loop(j, n) {
    int s;
    MP_GATHER_START(j, s)
    float sum = 0.0f;
    for (int k = 0; k < count; ++k) {
      const float v = (float)Dtype_LOAD(x, s + k * step);
      sum += op == 0 ? v : op == 1 ? fabs(v) : v * v;
    }
    Dtype_STORE(y, j, (Dtype_c)(coeff * sum));
  }
)");
  // Each pass picks the largest (value, index) pair below the previous pick.
  w.Kernel(LayerKernelName("argmax", type))
      .Value("int", "n").Value("int", "channels").Value("int", "inner").Value("int", "top_k")
      .Value("int", "out_max_val").Value("int", "has_axis").In("Dtype", "x").Out("Dtype", "y")
      .Body(R"(  $loop(p, n) {
    const int o = p / inner, r = p % inner;
    const int base = o * channels * inner + r;
    float prev_v = 0.0f;
    int prev_c = -1;
    for (int j = 0; j < top_k; ++j) {
      float best_v = 0.0f;
      int best_c = -1;
      for (int c = 0; c < channels; ++c) {
        const float v = (float)Dtype_LOAD(x, base + c * inner);
        const int below = prev_c < 0 || v < prev_v || (v == prev_v && c < prev_c);
        const int above = best_c < 0 || v > best_v || (v == best_v && c > best_c);
        if (below && above) {
          best_v = v;
          best_c = c;
        }
      }
      prev_v = best_v;
      prev_c = best_c;
      if (has_axis) {
        const float out = out_max_val ? best_v : (float)best_c;
        Dtype_STORE(y, (o * top_k + j) * inner + r, (Dtype_c)out);
      } else if (out_max_val) {
        Dtype_STORE(y, o * 2 * top_k + j, (Dtype_c)((float)best_c));
        Dtype_STORE(y, o * 2 * top_k + top_k + j, (Dtype_c)best_v);
      } else {
        Dtype_STORE(y, o * top_k + j, (Dtype_c)((float)best_c));
      }
    }
  }
)");
  w.Kernel(LayerKernelName("mvn", type))
      .Value("int", "groups").Value("int", "dim").Value("float", "eps")
      .Value("int", "normalize_variance").In("Dtype", "x").Out("Dtype", "y")
      .Body(R"(  $loop(g, groups) {
    const int base = g * dim;
    float sum = 0.0f;
    for (int k = 0; k < dim; ++k) sum += (float)Dtype_LOAD(x, base + k);
    const float mean = sum / dim;
    float scale = 1.0f;
    if (normalize_variance) {
      float sq = 0.0f;
      for (int k = 0; k < dim; ++k) {
        const float d = (float)Dtype_LOAD(x, base + k) - mean;
        sq += d * d;
      }
      scale = 1.0f / (sqrt(sq / dim) + eps);
    }
    for (int k = 0; k < dim; ++k)
      Dtype_STORE(y, base + k, (Dtype_c)(((float)Dtype_LOAD(x, base + k) - mean) * scale));
  }
)");
  if (type != DataType::kFloat32) return w.Source();
  w.Kernel("mvn_backward_fp32")
      .Value("int", "groups").Value("int", "dim").Value("float", "eps")
      .Value("int", "normalize_variance").In("float", "x").In("float", "y").In("float", "dy")
      .Out("float", "dx")
      .Body(R"(  $loop(g, groups) {
    const int base = g * dim;
    float sum_dy = 0.0f, sum_ydy = 0.0f, sum_x = 0.0f;
    for (int k = 0; k < dim; ++k) {
      sum_dy += dy[base + k];
      sum_ydy += y[base + k] * dy[base + k];
      sum_x += x[base + k];
    }
    float scale = 1.0f;
    if (normalize_variance) {
      const float mean = sum_x / dim;
      float sq = 0.0f;
      for (int k = 0; k < dim; ++k) sq += (x[base + k] - mean) * (x[base + k] - mean);
      scale = 1.0f / (sqrt(sq / dim) + eps);
    } else {
      sum_ydy = 0.0f;
    }
    for (int k = 0; k < dim; ++k)
      dx[base + k] = (dy[base + k] - (sum_dy + y[base + k] * sum_ydy) / dim) * scale;
  }
)");
  strides(w.Kernel("scatter_fp32").Value("int", "n").In("float", "x").Out("float", "y"))
      .Body(R"(  $loop(i, n) {
    int s;
    MP_GATHER_START(i, s)
    y[s] = x[i];
  }
)");
  // Each dx row k sums the dy rows m with idx[m] == k (no atomics: every sum has one writer).
  w.Kernel("rows_backward_fp32")
      .Value("int", "n").Value("int", "inner").Value("int", "count").In("int", "idx")
      .In("float", "dy").Out("float", "dx").Value("int", "accumulate")
      .Body(R"(  $loop(i, n) {
    const int k = i / inner, d = i - k * inner;
    float s = 0.0f;
    for (int m = 0; m < count; ++m)
      if (idx[m] == k) s += dy[m * inner + d];
    dx[i] = accumulate ? dx[i] + s : s;
  }
)");
  w.Kernel("reduce_backward_fp32")
      .Value("int", "n").In("float", "x").In("float", "dy").Out("float", "dx")
      .Value("int", "inner").Value("int", "op").Value("float", "coeff")
      .Body(R"(  $loop(i, n) {
    const float v = x[i];
    const float sign = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f);
    const float d = op == 0 ? 1.0f : op == 1 ? sign : 2.0f * v;
    dx[i] = coeff * dy[i / inner] * d;
  }
)");
  return w.Source();
}

bool HasVectorConcat(const KernelTarget& target, DataType type) {
  return target.vector_builtins && type == DataType::kInt8Q;
}

std::string EltwiseSource(const KernelTarget& target, const std::string& op, DataType type) {
  RequireFloat(type, "eltwise_" + op);
  KernelWriter w(target, "eltwise");
  w.AddType("Dtype", type);
  if (op == "prod")
    w.Define("MP_ELTWISE(a, b)", "((a) * (b))");
  else if (op == "max")
    w.Define("MP_ELTWISE(a, b)", "((a) > (b) ? (a) : (b))");
  else
    throw std::invalid_argument("unknown eltwise op '" + op + "' (prod, max)");
  w.Kernel(LayerKernelName("eltwise_" + op, type))
      .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
      .Body(R"(  $loop(i, n) {
    float a = (float)Dtype_LOAD(y, i);
    float b = (float)Dtype_LOAD(x, i);
    Dtype_STORE(y, i, (Dtype_c)MP_ELTWISE(a, b));
  }
)");
  return w.Source();
}

std::string ChannelAffineSource(const KernelTarget& target, DataType type, DataType param_type) {
  RequireFloat(param_type, "channel_affine");
  KernelWriter w(target, "channel_affine");
  w.AddType("Dtype", type);
  w.AddType("Ptype", param_type);
  // The scalar kernel and its _v8 form take the same arguments: (n, channels, inner, x, y,
  // scale, bias) and the type's tail (quantized: x_zero, lo, hi; float: has_bias, relu).
  const bool q = IsQuantized(type);
  auto declare = [&](const std::string& suffix) -> KernelBuilder& {
    auto& k = w.Kernel(ChannelAffineKernelName(type, param_type) + suffix)
                  .Value("int", "n").Value("int", "channels").Value("int", "inner")
                  .In("Dtype", "x").Out("Dtype", "y").In("Ptype", "scale").In("Ptype", "bias");
    return q ? k.Value("int", "x_zero").Value("float", "lo").Value("float", "hi")
             : k.Value("int", "has_bias").Value("int", "relu");
  };
  if (q) {
    // Quantized values in and out (a BatchNorm or Scale between int8 layers, its Scale and
    // ReLU fused): q_y = clamp(rint((q_x − x_zero)·scale[c] + bias[c]), lo, hi), the factors
    // composed on the host from the layer's own, x's scale and y's scale and zero point (bias
    // includes y_zero; a fused ReLU raises lo to y_zero). One rounding where the fp32 layer
    // between two conversions took two, and one pass over bytes instead of four
    // (docs/BENCHMARKS.md, "Default configurations"). $fma: the same float as the reference's
    // std::fma wherever fma() is the hardware's. Clamped to the integers lo and hi first, then
    // rounded to nearest even as (v + 1.5·2^23) − 1.5·2^23 (|v| < 2^22): the same integer as
    // rint then clamp, without PoCL's lane-by-lane rint.
    declare("")
        .Body(R"(  const int planes = n / inner;
  for (int p = $global_id(1); p < planes; p += $global_size(1)) {
    const int c = p % channels;
    const float s = (float)Ptype_LOAD(scale, c);
    const float b = (float)Ptype_LOAD(bias, c);
    const long base = (long)p * inner;
    for (int j = $global_id(0); j < inner; j += $global_size(0)) {
      const float v = fmin(fmax($fma((float)(Dtype_LOAD(x, base + j) - x_zero), s, b), lo), hi);
      Dtype_STORE(y, base + j, (int)((v + 12582912.0f) - 12582912.0f));
    }
  }
)");
    if (HasVectorChannelAffine(target, type, param_type)) {
      const VectorWords v(target);
      const std::string f8 = v.Type("float", 8), i8 = v.Type("int", 8);
      const std::string storage = v.Type(TraitsOf(TraitsOf(type).storage).opencl, 8);
      const std::string q = v.Convert(f8, v.Convert(i8, v.Load(8, "x + i")) + " - " +
                                              v.Splat(i8, "x_zero"));
      declare("_v8")
          .VectorWidth(Scalar::kF32, 8)
          .Body(ChannelPlanesVectorLoop(
              "    const float s = (float)Ptype_LOAD(scale, c);\n"
              "    const float b = (float)Ptype_LOAD(bias, c);\n"
              "    const " + f8 + " s8 = " + v.Splat(f8, "s") + ", b8 = " + v.Splat(f8, "b") + ";\n",
              "      const " + f8 + " r = fmin(fmax($fma(" + q + ", s8, b8), lo), hi);\n"
              "      " + v.Store(8, v.Convert(storage, "(r + 12582912.0f) - 12582912.0f"), "y + i") + ";\n",
              "      const float r = fmin(fmax($fma((float)(Dtype_LOAD(x, i) - x_zero), s, b), lo), hi);\n"
              "      Dtype_STORE(y, i, (int)((r + 12582912.0f) - 12582912.0f));\n"));
    }
    return w.Source();
  }
  RequireFloat(type, "channel_affine");
  declare("")
      // A plane of `inner` values per step of dimension 1, its channel's scale and bias read
      // once; dimension 0 walks the plane (a division per value made it 8x slower on PoCL).
      // `relu`: a fused ReLU of slope 0, spelled as the ReLU layer's (v > 0 ? v : v·0).
      .Body(R"(  const int planes = n / inner;
  for (int p = $global_id(1); p < planes; p += $global_size(1)) {
    const int c = p % channels;
    const float s = (float)Ptype_LOAD(scale, c);
    const float b = has_bias ? (float)Ptype_LOAD(bias, c) : 0.0f;
    const long base = (long)p * inner;
    for (int j = $global_id(0); j < inner; j += $global_size(0)) {
      float v = (float)Dtype_LOAD(x, base + j) * s;
      if (has_bias) v += b;
      if (relu) v = v > 0.0f ? v : v * 0.0f;
      Dtype_STORE(y, base + j, (Dtype_c)v);
    }
  }
)");
  if (HasVectorChannelAffine(target, type, param_type)) {
    const VectorWords v(target);
    const std::string f8 = v.Type("float", 8);
    declare("_v8")
        .VectorWidth(Scalar::kF32, 8)
        .Body(ChannelPlanesVectorLoop(
            "    const float s = (float)Ptype_LOAD(scale, c);\n"
            "    const float b = has_bias ? (float)Ptype_LOAD(bias, c) : 0.0f;\n",
            "      " + f8 + " v = " + v.Load(8, "x + i") + " * s;\n"
            "      if (has_bias) v += b;\n"
            "      if (relu) v = " + v.Select("v * 0.0f", "v", "v > 0.0f") + ";\n"
            "      " + v.Store(8, "v", "y + i") + ";\n",
            "      float v = x[i] * s;\n"
            "      if (has_bias) v += b;\n"
            "      if (relu) v = v > 0.0f ? v : v * 0.0f;\n"
            "      y[i] = v;\n"));
  }
  return w.Source();
}

QuantizedChannelFactors QuantizedChannelAffineFactors(DataType type, const std::vector<float>& a,
                                                      const std::vector<float>& b, float x_scale,
                                                      float y_scale, int y_zero, bool relu) {
  if (!IsQuantized(type)) throw std::invalid_argument("quantized channel_affine needs a quantized type");
  if (a.size() != b.size())
    throw std::invalid_argument("channel_affine: " + std::to_string(a.size()) + " scales, " +
                                std::to_string(b.size()) + " shifts");
  QuantizedChannelFactors f;
  f.scale.resize(a.size());
  f.bias.resize(a.size());
  for (size_t c = 0; c < a.size(); ++c) {
    f.scale[c] = static_cast<float>(double(a[c]) * x_scale / y_scale);
    f.bias[c] = static_cast<float>(double(b[c]) / y_scale + y_zero);
  }
  const DataTypeTraits& t = TraitsOf(type);
  f.lo = static_cast<float>(relu ? std::max<int64_t>(t.qmin, y_zero) : t.qmin);
  f.hi = static_cast<float>(t.qmax);
  return f;
}

void QuantizedChannelAffineReference(DataType type, int n, int channels, int inner,
                                     const void* x, void* y, const QuantizedChannelFactors& f,
                                     int x_zero) {
  for (int i = 0; i < n; ++i) {
    const int c = (i / inner) % channels;
    const float v = std::fma(static_cast<float>(LoadQ(type, x, i) - x_zero), f.scale[c], f.bias[c]);
    StoreQ(type, y, i, static_cast<int64_t>(std::fmin(std::fmax(std::nearbyint(v), f.lo), f.hi)));
  }
}

std::string DropoutSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "dropout");
  KernelWriter w(target, "dropout");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("dropout", type))
      .Value("int", "n").In("Dtype", "x").In("mp_u32", "mask").Out("Dtype", "y")
      .Value("mp_u32", "threshold").Value("float", "scale")
      .Body(R"(  $loop(i, n) {
    float v = mask[i] > threshold ? (float)Dtype_LOAD(x, i) * scale : 0.0f;
    Dtype_STORE(y, i, (Dtype_c)v);
  }
)");
  return w.Source();
}

std::string LrnWithinChannelSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "lrn_within");
  KernelWriter w(target, "lrn_within");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("lrn_within", type))
      .Value("int", "n").Value("int", "height").Value("int", "width").Value("int", "size")
      .Value("float", "alpha").Value("float", "beta").In("Dtype", "x").Out("Dtype", "y")
      .Out("float", "scale").Value("int", "keep_scale")
      .Body(R"(  const int pre = (size - 1) / 2;
  $loop(i, n) {
    const int col = i % width, row = (i / width) % height;
    const int plane = i - row * width - col;
    const int r0 = max(row - pre, 0), r1 = min(row - pre + size, height);
    const int c0 = max(col - pre, 0), c1 = min(col - pre + size, width);
    float sum = 0.0f;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = (float)Dtype_LOAD(x, plane + r * width + c);
        sum += v * v;
      }
    const float s = 1.0f + alpha / (float)(size * size) * sum;
    if (keep_scale) scale[i] = s;
    Dtype_STORE(y, i, (Dtype_c)((float)Dtype_LOAD(x, i) * pow(s, -beta)));
  }
)");
  return w.Source();
}

std::string LstmUnitSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "lstm_unit");
  KernelWriter w(target, "lstm_unit");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("lstm_unit", type))
      .Value("int", "n").Value("int", "dim").In("Dtype", "c_prev").In("Dtype", "x")
      .In("Dtype", "cont").Out("Dtype", "c").Out("Dtype", "h")
      .Body(R"(  $loop(k, n) {
    const int r = k / dim;
    const int xk = r * 4 * dim + (k - r * dim);
    const float gi = 1.0f / (1.0f + exp(-(float)Dtype_LOAD(x, xk)));
    const float keep = (float)Dtype_LOAD(cont, r);
    const float gf = keep == 0.0f ? 0.0f : keep / (1.0f + exp(-(float)Dtype_LOAD(x, xk + dim)));
    const float go = 1.0f / (1.0f + exp(-(float)Dtype_LOAD(x, xk + 2 * dim)));
    const float gg = tanh((float)Dtype_LOAD(x, xk + 3 * dim));
    const float cv = gf * (float)Dtype_LOAD(c_prev, k) + gi * gg;
    Dtype_STORE(c, k, (Dtype_c)cv);
    Dtype_STORE(h, k, (Dtype_c)(go * tanh(cv)));
  }
)");
  if (type != DataType::kFloat32) return w.Source();
  w.Kernel("lstm_unit_backward_fp32")
      .Value("int", "n").Value("int", "dim").In("float", "c_prev").In("float", "x")
      .In("float", "cont").In("float", "c").In("float", "dc").In("float", "dh")
      .Out("float", "dc_prev").Out("float", "dx")
      .Body(R"(  $loop(k, n) {
    const int r = k / dim;
    const int xk = r * 4 * dim + (k - r * dim);
    const float gi = 1.0f / (1.0f + exp(-x[xk]));
    const float sf = 1.0f / (1.0f + exp(-x[xk + dim]));
    const float keep = cont[r];
    const float gf = keep == 0.0f ? 0.0f : keep * sf;
    const float go = 1.0f / (1.0f + exp(-x[xk + 2 * dim]));
    const float gg = tanh(x[xk + 3 * dim]);
    const float tc = tanh(c[k]);
    const float dct = dc[k] + dh[k] * go * (1.0f - tc * tc);
    dc_prev[k] = dct * gf;
    dx[xk] = dct * gg * gi * (1.0f - gi);
    dx[xk + dim] = dct * c_prev[k] * gf * (1.0f - sf);
    dx[xk + 2 * dim] = dh[k] * tc * go * (1.0f - go);
    dx[xk + 3 * dim] = dct * gi * (1.0f - gg * gg);
  }
)");
  return w.Source();
}

}  // namespace mpcaffe
