// codegen/elementwise.cc — kernel bodies of the element-wise operations, written once per
// algorithm (float or quantized) and emitted through KernelWriter for either dialect.
#include "codegen/elementwise.h"

#include <algorithm>

#include "codegen/vector_words.h"

namespace mpcaffe {

std::string DequantizeText(const std::string& q, const std::string& scale,
                           const std::string& zero) {
  return scale + " * (float)(" + q + " - " + zero + ")";
}

std::string QuantizeStoreText(const std::string& alias, const std::string& v,
                              const std::string& scale, const std::string& zero,
                              const std::string& dst, const std::string& at) {
  return "    {\n      const float qv = " + v + ";\n      int q = " + zero +
         ";\n      if (!isnan(qv)) {\n        float r = $rint(qv / " + scale + ") + (float)" + zero +
         ";\n        r = fmin(fmax(r, (float)" + alias + "_QMIN), (float)" + alias +
         "_QMAX);\n        q = (int)r;\n      }\n      " + alias + "_STORE(" + dst + ", " + at +
         ", q);\n    }\n";
}

std::string VectorDequantizeText(const KernelTarget& target, const std::string& p,
                                 const std::string& scale, const std::string& zero, int lanes) {
  const VectorWords v(target);
  const std::string iv = v.Type("int", lanes);
  return scale + " * " +
         v.Convert(v.Type("float", lanes),
                   v.Convert(iv, v.Load(lanes, p)) + " - " + v.Splat(iv, zero));
}

std::string VectorQuantizeStoreText(KernelWriter& w, DataType to, const std::string& alias,
                                    const std::string& value, const std::string& scale,
                                    const std::string& zero, const std::string& p,
                                    int lanes) {
  // NaN lanes (f != f) take the zero point, as the scalar text's isnan test gives. rint as
  // (s + 1.5·2^23) − 1.5·2^23 on s clamped to [QMIN − zero, QMAX − zero] first (integers: the
  // same as clamping after rounding; |s| < 2^22, so the sum's ulp is 1 and it rounds to nearest
  // even), the zero point folded into the subtrahend: PoCL calls rint lane by lane, which made
  // the fp32 → int8/int16 pass several times slower than the fp32 → fp16 one.
  const VectorWords v(w.target());
  const std::string fv = v.Type("float", lanes), iv = v.Type("int", lanes);
  std::string b = "    {\n    const " + fv + " qf = " + value + ";\n";
  b += "    const " + fv + " qs = " +
       v.Clamp("qf / " + scale, v.Splat(fv, "(float)(" + alias + "_QMIN - " + zero + ")"),
               v.Splat(fv, "(float)(" + alias + "_QMAX - " + zero + ")")) +
       ";\n";
  b += "    const " + fv + " qr = (qs + 12582912.0f) - (12582912.0f - (float)" + zero + ");\n";
  b += "    const " + iv + " q = " +
       v.Select(v.Convert(iv, "qr"), v.Splat(iv, zero), "qf != qf") + ";\n";
  const bool bytes = to == DataType::kInt8Q;
  w.UseHelper(KernelHelper::kByteVectorStore);
  b += std::string("    MP_STORE_") + (bytes ? "UCHAR" : "USHORT") + std::to_string(lanes) + "(" +
       v.Convert(v.Type(bytes ? "uchar" : "ushort", lanes), "q") + ", " + p + ");\n    }\n";
  return b;
}

std::string ElementwiseKernelName(const std::string& op, DataType type) {
  return op + "_" + Name(type);
}

std::string ConvertKernelName(DataType from, DataType to) {
  return std::string("convert_") + Name(from) + "_" + Name(to);
}

std::string ReluSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "relu");
  w.AddType("Dtype", type);
  // The scalar kernel and its vector form (HasVectorRelu) take the same arguments.
  auto declare = [&](const std::string& name) -> decltype(auto) {
    return w.Kernel(name)
        .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
        .Value("float", "slope")
        .Value("int", "x_zero").Value("int", "y_zero")
        .Value("int", "mult").Value("int", "shift")
        .Value("int", "neg_mult").Value("int", "neg_shift");
  };
  auto& k = declare(ElementwiseKernelName("relu", type));
  if (IsQuantized(type)) {
    w.UseRequant(type);
    const std::string element = R"(    int d = Dtype_LOAD(x, i) - x_zero;
    mp_i64 r = d >= 0 ? MP_REQUANT(d, mult, shift) : MP_REQUANT(d, neg_mult, neg_shift);
    r += y_zero;
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
)";
    k.Body("  $loop(i, n) {\n" + element + "  }\n");
    if (HasVectorRelu(target, type)) {
      // 8 elements per step in int lanes, each lane's multiplier and shift chosen by its sign
      // and requantized as mp_requant32 does (VectorWords::Requant: the same integers), then
      // the n % 8 tail one by one. The scalar form (a 64-bit requantization per element) made a
      // ReLU that follows no convolution — the pre-activation blocks of DenseNets and ResNet
      // v2, after their fp32 BatchNorm and Scale — slower than the int8 convolution after it
      // (docs/BENCHMARKS.md, "Default configurations").
      const VectorWords v(target);
      const std::string i8 = v.Type("int", 8), l8 = v.Type("long", 8), at = "x + 8 * v";
      const std::string storage = v.Type(TraitsOf(TraitsOf(type).storage).opencl, 8);
      std::string body = "    const " + i8 + " d = " + v.Convert(i8, v.Load(8, at)) + " - " +
              v.Splat(i8, "x_zero") + ";\n";
      body += "    const " + i8 + " m = " +
              v.Select(v.Splat(i8, "neg_mult"), v.Splat(i8, "mult"), "d >= 0") + ";\n";
      body += "    const " + i8 + " s = " +
              v.Select(v.Splat(i8, "neg_shift"), v.Splat(i8, "shift"), "d >= 0") + ";\n";
      body += v.Requant(8, "r", "d", "m", "s", 4);
      body += "    r = " + v.Clamp("r + " + v.Splat(l8, "y_zero"), v.Splat(l8, "Dtype_QMIN"),
                                   v.Splat(l8, "Dtype_QMAX")) + ";\n";
      body += "    " + v.Store(8, v.Convert(storage, "r"), "y + 8 * v") + ";\n";
      declare(ElementwiseKernelName("relu", type) + "_v8")
          .VectorWidth(Scalar::kI32, 8)
          .Body(EightLaneLoop("v", body, element));
    }
  } else {
    w.UseHelper(KernelHelper::kSelect);
    k.Body(R"(  $loop(i, n) {
    Dtype_c v = Dtype_LOAD(x, i);
    Dtype_STORE(y, i, Dtype_SELECT(v * (Dtype_c)slope, v, v > (Dtype_c)0.0f));
  }
)");
    if (HasVectorRelu(target, type)) {
      // fp32 on a CPU runtime: 8 floats per step over a contiguous range per work-item, the
      // scalar form's select (v·slope where v is not above 0: NaN and −0 as there).
      const VectorWords v(target);
      const std::string f8 = v.Type("float", 8);
      const std::string body =
          "    const " + f8 + " v = " + v.Load(8, "x + 8 * i8") + ";\n    " +
          v.Store(8, v.Select("v * slope", "v", "v > 0.0f"), "y + 8 * i8") + ";\n";
      declare(ElementwiseKernelName("relu", type) + "_v8")
          .VectorWidth(Scalar::kF32, 8)
          .Body(EightLaneLoop("i8", body,
                              "    const float v = x[i];\n    y[i] = v > 0.0f ? v : v * slope;\n"));
    }
  }
  return w.Source();
}

std::string ScaleSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "scale");
  w.AddType("Dtype", type);
  auto& k = w.Kernel(ElementwiseKernelName("scale", type))
                .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
                .Value("float", "alpha")
                .Value("int", "x_zero").Value("int", "y_zero")
                .Value("int", "mult").Value("int", "shift").Value("int", "sign");
  if (IsQuantized(type)) {
    w.UseRequant(type);
    k.Body(R"(  $loop(i, n) {
    mp_i64 r = y_zero + sign * MP_REQUANT(Dtype_LOAD(x, i) - x_zero, mult, shift);
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
  }
)");
  } else {
    k.Body(R"(  $loop(i, n) {
    float v = (float)Dtype_LOAD(x, i);
    Dtype_STORE(y, i, (Dtype_c)(alpha * v));
  }
)");
  }
  return w.Source();
}

std::string AxpbySource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "axpby");
  w.AddType("Dtype", type);
  auto& k = w.Kernel(ElementwiseKernelName("axpby", type))
                .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
                .Value("float", "a").Value("float", "b")
                .Value("int", "x_zero").Value("int", "y_zero")
                .Value("int", "mult_a").Value("int", "shift_a").Value("int", "sign_a")
                .Value("int", "mult_b").Value("int", "shift_b").Value("int", "sign_b");
  if (IsQuantized(type)) {
    w.UseRequant(type);
    k.Body(R"(  $loop(i, n) {
    mp_i64 r = y_zero + sign_a * MP_REQUANT(Dtype_LOAD(x, i) - x_zero, mult_a, shift_a) +
               sign_b * MP_REQUANT(Dtype_LOAD(y, i) - y_zero, mult_b, shift_b);
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
  }
)");
  } else {
    k.Body(R"(  $loop(i, n) {
    float v = a * (float)Dtype_LOAD(x, i) + b * (float)Dtype_LOAD(y, i);
    Dtype_STORE(y, i, (Dtype_c)v);
  }
)");
  }
  return w.Source();
}

std::string ConvertSource(const KernelTarget& target, DataType from, DataType to) {
  KernelWriter w(target, "convert");
  w.AddType("Xtype", from);
  w.AddType("Ytype", to);
  // The scalar kernel and its vector form (HasVectorConvert) take the same arguments.
  auto declare = [&](const std::string& name) -> decltype(auto) {
    return w.Kernel(name)
        .Value("int", "n").In("Xtype", "x").Out("Ytype", "y")
        .Value("float", "x_scale").Value("int", "x_zero")
        .Value("float", "y_scale").Value("int", "y_zero")
        .Value("int", "mult").Value("int", "shift");
  };
  auto& k = declare(ConvertKernelName(from, to));
  const bool qx = IsQuantized(from), qy = IsQuantized(to);
  // One element i: the scalar kernel's loop body, and the tail of the vector kernel's.
  std::string element;
  if (!qx && !qy) {
    element = "    Ytype_STORE(y, i, (Ytype_c)(float)Xtype_LOAD(x, i));\n";
  } else if (qx && !qy) {
    element = "    Ytype_STORE(y, i, (Ytype_c)(" +
              DequantizeText("Xtype_LOAD(x, i)", "x_scale", "x_zero") + "));\n";
  } else if (!qx && qy) {
    element = QuantizeStoreText("Ytype", "(float)Xtype_LOAD(x, i)", "y_scale", "y_zero", "y", "i");
  } else {
    w.UseRequant(from);
    element = R"(    mp_i64 r = y_zero + MP_REQUANT(Xtype_LOAD(x, i) - x_zero, mult, shift);
    r = Ytype_SAT(r);
    Ytype_STORE(y, i, r);
)";
  }
  k.Body("  $loop(i, n) {\n" + element + "  }\n");
  if (HasVectorConvert(target, from, to)) {
    // The same arithmetic on 8 elements per step, then the n % 8 tail one by one: PoCL runs the
    // scalar form as scalar code, and Intel's CPU runtime made the scalar fp32 → fp16 form
    // slower than a whole fp32 pass of the small nets that convert their input
    // (docs/BENCHMARKS.md, "Small nets"). Every value goes through float lanes, as the scalar
    // body's do.
    const VectorWords v(target);
    const std::string f8 = v.Type("float", 8), i8 = v.Type("int", 8), at = " + 8 * v";
    std::string body;
    if (from == DataType::kFloat32)
      body += "    const " + f8 + " f = " + v.Load(8, "x" + at) + ";\n";
    else if (from == DataType::kFloat16)
      body += "    const " + f8 + " f = " + v.LoadHalf(8, "x" + at) + ";\n";
    else
      body += "    const " + f8 + " f = " +
              VectorDequantizeText(target, "x" + at, "x_scale", "x_zero") + ";\n";
    if (to == DataType::kFloat32) {
      body += "    " + v.Store(8, "f", "y" + at) + ";\n";
    } else if (to == DataType::kFloat16) {
      body += "    " + v.StoreHalf(8, "f", "y" + at) + ";\n";
    } else {
      body += VectorQuantizeStoreText(w, to, "Ytype", "f", "y_scale", "y_zero", "y" + at);
    }
    declare(ConvertKernelName(from, to) + "_v8")
        .VectorWidth(Scalar::kF32, 8)
        .Body(EightLaneLoop("v", body, element));
  }
  return w.Source();
}

std::string EightLaneLoop(const std::string& index, const std::string& vec,
                          const std::string& one) {
  return "  const int n8 = n / 8;\n  $vector_loop(" + index + ", n8) {\n" + vec +
         "  }\n  $loop(t, n - n8 * 8) {\n    const int i = n8 * 8 + t;\n" + one + "  }\n";
}

size_t EightLaneItems(int n) { return size_t(std::max(n / 8, n % 8)); }

bool HasVectorRelu(const KernelTarget& target, DataType type) {
  return Dialect::For(target.backend).vector_builtins &&
         (IsQuantized(type) || (type == DataType::kFloat32 && target.work_item_is_thread));
}

bool HasVectorConvert(const KernelTarget& target, DataType from, DataType to) {
  return Dialect::For(target.backend).vector_builtins && from != to &&
         !(IsQuantized(from) && IsQuantized(to));
}

}  // namespace mpcaffe
