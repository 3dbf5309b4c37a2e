// layers/activation_kernels.cc — the activation family's table and its two program texts
// (forward per data type, fp32 backward), emitted by KernelWriter for either dialect.
#include "layers/activation_kernels.h"

#include <stdexcept>

#include "codegen/elementwise.h"
#include "codegen/vector_words.h"
#include "layers/layer_kernels.h"

namespace mpcaffe {

namespace {

// BVLC's semantics (caffe.proto is the contract); a, b, c are what the layer passes:
const std::vector<ActivationOp> kOps = {
    // Sigmoid: 1/(1 + e^−x).
    {"sigmoid", "1.0f / (1.0f + exp(-v))", "g * y * (1.0f - y)", false},
    // TanH.
    {"tanh", "tanh(v)", "g * (1.0f - y * y)", false},
    // AbsVal: |x|; the gradient is sign(x), 0 at 0 (caffe_sign).
    {"absval", "fabs(v)", "g * (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f))", true},
    // BNLL: log(1 + e^x) in the form that does not overflow; its derivative with e^x capped at
    // e^50 as BVLC's kBNLL_THRESHOLD does.
    {"bnll", "v > 0.0f ? v + log(1.0f + exp(-v)) : log(1.0f + exp(v))",
     "g * (exp(fmin(v, 50.0f)) / (exp(fmin(v, 50.0f)) + 1.0f))", true},
    // Clip: a = min, b = max; the gradient passes where min <= x <= max (both ends included).
    {"clip", "fmax(a, fmin(v, b))", "g * (v >= a && v <= b ? 1.0f : 0.0f)", true,
     "fmax(fmin(v, b), a)"},
    // ELU: a = alpha; for x <= 0 the derivative is α·e^x = y + α.
    {"elu", "v > 0.0f ? v : a * (exp(v) - 1.0f)", "g * (v > 0.0f ? 1.0f : y + a)", true},
    // Exp: y = base^(shift + scale·x) = b·e^(a·x) with a = ln(base)·scale, b = base^shift.
    {"exp", "b * exp(a * v)", "g * y * a", false},
    // Log: y = log_base(shift + scale·x) = c·ln(a·x + b), a = scale, b = shift, c = 1/ln(base).
    {"log", "c * log(a * v + b)", "g * c * a / (a * v + b)", true},
    // Power: y = (shift + scale·x)^power with a = power, b = scale, c = shift; the gradient is 0
    // when power·scale is 0 (BVLC's special case, which also avoids 0·∞ at a zero base). Powers
    // 1 and 2 without pow(): the base itself and its square, which the host's std::pow returns
    // (OpenCL's pow may be 16 ulp off, and PoCL computes it a value at a time).
    {"power", "(a == 1.0f ? b * v + c : a == 2.0f ? (b * v + c) * (b * v + c) : pow(b * v + c, a))",
     "(a * b == 0.0f ? 0.0f : g * a * b * pow(b * v + c, a - 1.0f))", true,
     "(a == 1.0f ? b * v + c : a == 2.0f ? (b * v + c) * (b * v + c) : pow(b * v + c, MP_F8(a)))"},
    // Swish: y = x·σ(βx), a = β; dy/dx = βy + σ(βx)(1 − βy).
    {"swish", "v / (1.0f + exp(-a * v))",
     "g * (a * y + (1.0f - a * y) / (1.0f + exp(-a * v)))", true},
    // Threshold: a = threshold; y = x > threshold. BVLC has no backward pass for it.
    {"threshold", "v > a ? 1.0f : 0.0f", nullptr, false, "v > a ? MP_F8(1.0f) : MP_F8(0.0f)"},
};

}  // namespace

const std::vector<ActivationOp>& ActivationOps() { return kOps; }

const ActivationOp& ActivationOpNamed(const std::string& name) {
  for (const auto& op : kOps)
    if (name == op.name) return op;
  throw std::invalid_argument("unknown activation '" + name + "'");
}

std::string ActivationKernelName(const std::string& op, DataType type) {
  return op + "_" + Name(type);
}

std::string ActivationBackwardKernelName(const std::string& op) { return op + "_backward"; }

bool HasVectorActivation(const KernelTarget& target, DataType type) {
  return type == DataType::kFloat32 && target.vector_builtins && target.work_item_is_thread;
}

std::string ActivationLaunchName(const KernelTarget& target, const std::string& op,
                                 DataType type) {
  return ActivationKernelName(op, type) + (HasVectorActivation(target, type) ? "_v8" : "");
}

std::string ActivationSource(const KernelTarget& target, DataType type) {
  if (IsQuantized(type))
    throw std::invalid_argument(std::string("the activation kernels compute in float types, not ") +
                                Name(type));
  KernelWriter w(target, "activation");
  w.AddType("Dtype", type);
  for (const auto& op : kOps)
    w.Kernel(ActivationKernelName(op.name, type))
        .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
        .Value("float", "a").Value("float", "b").Value("float", "c")
        .Body(std::string(R"(  $loop(i, n) {
    const float v = (float)Dtype_LOAD(x, i);
    Dtype_STORE(y, i, (Dtype_c)()") + op.forward + R"());
  }
)");
  const bool vec = HasVectorActivation(target, type);
  const VectorWords vw(target);
  const std::string f8 = vec ? vw.Type("float", 8) : "";
  if (vec) {
    w.Define("MP_F8(x)", vw.Splat(f8, "(x)"));
    for (const auto& op : kOps)
      w.Kernel(ActivationKernelName(op.name, type) + "_v8")
          .Value("int", "n").In("Dtype", "x").Out("Dtype", "y")
          .Value("float", "a").Value("float", "b").Value("float", "c")
          .VectorWidth(Scalar::kF32, 8)
          .Body(EightLaneLoop(
              "i8",
              "    const " + f8 + " v = " + vw.Load(8, "x + 8 * i8") + ";\n    " +
                  vw.Store(8, std::string("(") +
                                  (op.vector_forward ? op.vector_forward : op.forward) + ")",
                           "y + 8 * i8") + ";\n",
              std::string("    const float v = x[i];\n    y[i] = ") + op.forward + ";\n"));
  }
  // prelu and bias, and their _v8 forms: (n, channels, inner, x, the per-channel `param`, y).
  auto channel_kernel = [&](const std::string& name, const char* param) -> KernelBuilder& {
    return w.Kernel(name)
        .Value("int", "n").Value("int", "channels").Value("int", "inner")
        .In("Dtype", "x").In("Dtype", param).Out("Dtype", "y");
  };
  channel_kernel(ActivationKernelName("prelu", type), "slope")
      .Body(R"(  $loop(i, n) {
    const float v = (float)Dtype_LOAD(x, i);
    const float s = (float)Dtype_LOAD(slope, (i / inner) % channels);
    Dtype_STORE(y, i, (Dtype_c)(v > 0.0f ? v : s * v));
  }
)");
  if (vec) {
    channel_kernel(ActivationKernelName("prelu", type) + "_v8", "slope")
        .VectorWidth(Scalar::kF32, 8)
        .Body(ChannelPlanesVectorLoop(
            "    const float s = slope[c];\n",
            "      const " + f8 + " v = " + vw.Load(8, "x + i") + ";\n      " +
                vw.Store(8, "(v > 0.0f ? v : s * v)", "y + i") + ";\n",
            "      const float v = x[i];\n      y[i] = v > 0.0f ? v : s * v;\n"));
    channel_kernel(ActivationKernelName("bias", type) + "_v8", "bias")
        .VectorWidth(Scalar::kF32, 8)
        .Body(ChannelPlanesVectorLoop(
            "    const float s = bias[c];\n",
            "      " + vw.Store(8, vw.Load(8, "x + i") + " + s", "y + i") + ";\n",
            "      y[i] = x[i] + s;\n"));
  }
  channel_kernel(ActivationKernelName("bias", type), "bias")
      .Body(R"(  $loop(i, n) {
    const float v = (float)Dtype_LOAD(x, i) + (float)Dtype_LOAD(bias, (i / inner) % channels);
    Dtype_STORE(y, i, (Dtype_c)v);
  }
)");
  return w.Source();
}

std::string ActivationBackwardSource(const KernelTarget& target) {
  KernelWriter w(target, "activation_backward");
  for (const auto& op : kOps) {
    if (!op.backward) continue;
    w.Kernel(ActivationBackwardKernelName(op.name))
        .Value("int", "n").In("float", "x_in").In("float", "y_in").In("float", "dy")
        .Out("float", "dx").Value("float", "a").Value("float", "b").Value("float", "c")
        .Body(std::string(R"(  $loop(i, n) {
    const float v = x_in[i];
    const float y = y_in[i];
    const float g = dy[i];
    dx[i] = )") + op.backward + R"(;
  }
)");
  }
  // In place dx is dy: both reads come before the writes.
  w.Kernel(ActivationBackwardKernelName("prelu"))
      .Value("int", "n").Value("int", "channels").Value("int", "inner")
      .In("float", "x").In("float", "slope").In("float", "dy").Out("float", "dx").Out("float", "t")
      .Body(R"(  $loop(i, n) {
    const float v = x[i];
    const float g = dy[i];
    t[i] = v > 0.0f ? 0.0f : g * v;
    dx[i] = v > 0.0f ? g : g * slope[(i / inner) % channels];
  }
)");
  return w.Source();
}

}  // namespace mpcaffe
