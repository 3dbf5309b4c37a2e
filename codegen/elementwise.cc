// codegen/elementwise.cc — kernel bodies of the element-wise operations, written once per
// algorithm (float or quantized) and emitted through KernelWriter for either dialect.
#include "codegen/elementwise.h"

namespace mpcaffe {

namespace {

}  // namespace

std::string ElementwiseKernelName(const std::string& op, DataType type) {
  return op + "_" + Name(type);
}

std::string ConvertKernelName(DataType from, DataType to) {
  return std::string("convert_") + Name(from) + "_" + Name(to);
}

std::string ReluSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "relu");
  w.AddType("Dtype", type);
  auto& k = w.Kernel(ElementwiseKernelName("relu", type))
                .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
                .Value("float", "slope")
                .Value("int", "x_zero").Value("int", "y_zero")
                .Value("int", "mult").Value("int", "shift")
                .Value("int", "neg_mult").Value("int", "neg_shift");
  if (IsQuantized(type)) {
    w.UseRequant(type);
    k.Body(R"(  $loop(i, n) {
    int d = Dtype_LOAD(x, i) - x_zero;
    mp_i64 r = d >= 0 ? MP_REQUANT(d, mult, shift) : MP_REQUANT(d, neg_mult, neg_shift);
    r += y_zero;
    r = Dtype_SAT(r);
    Dtype_STORE(y, i, r);
  }
)");
  } else {
    w.UseHelper(KernelHelper::kSelect);
    k.Body(R"(  $loop(i, n) {
    Dtype_c v = Dtype_LOAD(x, i);
    Dtype_STORE(y, i, Dtype_SELECT(v * (Dtype_c)slope, v, v > (Dtype_c)0.0f));
  }
)");
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
    element = "    Ytype_STORE(y, i, (Ytype_c)(x_scale * (float)(Xtype_LOAD(x, i) - x_zero)));\n";
  } else if (!qx && qy) {
    element = R"(    float v = (float)Xtype_LOAD(x, i);
    int q = y_zero;
    if (!isnan(v)) {
      float r = $rint(v / y_scale) + (float)y_zero;
      r = fmin(fmax(r, (float)Ytype_QMIN), (float)Ytype_QMAX);
      q = (int)r;
    }
    Ytype_STORE(y, i, q);
)";
  } else {
    w.UseRequant(from);
    element = R"(    mp_i64 r = y_zero + MP_REQUANT(Xtype_LOAD(x, i) - x_zero, mult, shift);
    r = Ytype_SAT(r);
    Ytype_STORE(y, i, r);
)";
  }
  k.Body("  $loop(i, n) {\n" + element + "  }\n");
  if (HasVectorConvert(target, from, to)) {
    // The same arithmetic on 8 elements per step (PoCL runs the scalar form as scalar code:
    // quantizing AlexNet's batch-16 input took 6.5 ms), then the n % 8 tail one by one.
    const std::string q = to == DataType::kInt8Q || from == DataType::kInt8Q ? "uchar" : "ushort";
    std::string body = "  const int n8 = n / 8;\n  $loop(v, n8) {\n";
    if (!qx) {
      body += "    const float8 f = vload8(v, x);\n";
      body += "    float8 r = rint(f / y_scale) + (float)y_zero;\n";
      body += "    r = fmin(fmax(r, (float8)((float)Ytype_QMIN)), (float8)((float)Ytype_QMAX));\n";
      body += "    const int8 qv = select(convert_int8(r), (int8)(y_zero), isnan(f));\n";
      w.UseHelper(KernelHelper::kByteVectorStore);
      body += "    MP_STORE_" + std::string(q == "uchar" ? "UCHAR" : "USHORT") + "8(convert_" + q +
              "8(qv), y + 8 * v);\n";
    } else {
      body += "    const int8 d = convert_int8(vload8(v, x)) - x_zero;\n";
      body += "    vstore8(x_scale * convert_float8(d), v, y);\n";
    }
    body += "  }\n  $loop(t, n - n8 * 8) {\n    const int i = n8 * 8 + t;\n" + element + "  }\n";
    declare(ConvertKernelName(from, to) + "_v8").Body(body);
  }
  return w.Source();
}

bool HasVectorConvert(const KernelTarget& target, DataType from, DataType to) {
  return target.backend == Backend::kOpenCL &&
         ((from == DataType::kFloat32 && IsQuantized(to)) ||
          (IsQuantized(from) && to == DataType::kFloat32));
}

}  // namespace mpcaffe
