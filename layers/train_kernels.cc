// layers/train_kernels.cc — bodies of the fp32 training kernels (layer backward passes, device
// reductions, solver updates), written once and emitted by KernelWriter for either dialect.
#include "layers/train_kernels.h"

#include <algorithm>
#include <stdexcept>

namespace mpcaffe {

namespace {

/// A writer whose reductions use kReduceLocalSize-wide local arrays.
KernelWriter Writer(const KernelTarget& target, const char* family) {
  KernelWriter w(target, family);
  w.Define("MP_REDUCE_LOCAL", std::to_string(kReduceLocalSize));
  return w;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

std::string ReluBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "relu_backward");
  w.UseHelper(KernelHelper::kSelect);
  w.Kernel("relu_backward")
      .Value("int", "n").In("float", "x").In("float", "dy").Out("float", "dx").Value("float", "slope")
      .Body(R"(  $loop(i, n) {
    const float g = dy[i];
    dx[i] = MP_SELECT(g * slope, g, x[i] > 0.0f);
  }
)");
  return w.Source();
}

std::string SoftmaxBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "softmax_backward");
  w.Kernel("softmax_backward")
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("float", "y").In("float", "dy").Out("float", "dx")
      .Body(R"(  $loop(j, outer * inner) {
    const int base = (j / inner) * channels * inner + j % inner;
    float dot = 0.0f;
    for (int c = 0; c < channels; ++c) dot += dy[base + c * inner] * y[base + c * inner];
    for (int c = 0; c < channels; ++c) {
      const int k = base + c * inner;
      dx[k] = (dy[k] - dot) * y[k];
    }
  }
)");
  return w.Source();
}

std::string SoftmaxLossBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "softmax_loss_backward");
  w.Kernel("softmax_loss_backward")
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("float", "prob").In("float", "label").In("float", "top_diff").In("float", "norm")
      .Out("float", "dx").Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  const float scale = top_diff[0] / norm[0];
  $loop(j, outer * inner) {
    const int l = (int)label[j];
    const int base = (j / inner) * channels * inner + j % inner;
    const int skip = (has_ignore && l == ignore_label) || l < 0 || l >= channels;
    for (int c = 0; c < channels; ++c) {
      const int k = base + c * inner;
      dx[k] = skip ? 0.0f : (prob[k] - (c == l ? 1.0f : 0.0f)) * scale;
    }
  }
)");
  return w.Source();
}

std::string MaskedMeanKernelName(DataType out_type) {
  return std::string("masked_mean_") + Name(out_type);
}

std::string MaskedMeanSource(const KernelTarget& target, DataType out_type) {
  KernelWriter w = Writer(target, "masked_mean");
  w.AddType("Otype", out_type);
  w.Kernel(MaskedMeanKernelName(out_type))
      .Value("int", "n").In("float", "v").Out("Otype", "out").Out("float", "norm")
      .Value("float", "fixed_norm").Value("int", "use_count").Value("float", "ignore_below")
      .Body(R"(  $shared float part_sum[MP_REDUCE_LOCAL];
  $shared float part_count[MP_REDUCE_LOCAL];
  const int t = $local_id(0);
  float s = 0.0f, c = 0.0f;
  for (int k = t; k < n; k += MP_REDUCE_LOCAL) {
    const float x = v[k];
    if (!(x < ignore_below)) {
      s += x;
      c += 1.0f;
    }
  }
  part_sum[t] = s;
  part_count[t] = c;
  $barrier;
  for (int h = MP_REDUCE_LOCAL / 2; h > 0; h >>= 1) {
    if (t < h) {
      part_sum[t] += part_sum[t + h];
      part_count[t] += part_count[t + h];
    }
    $barrier;
  }
  if (t == 0) {
    float d = use_count ? part_count[0] : fixed_norm;
    d = d > 1.0f ? d : 1.0f;
    norm[0] = d;
    Otype_STORE(out, 0, (Otype_c)(part_sum[0] / d));
  }
)");
  return w.Source();
}

std::string SigmoidCrossEntropyBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "sigmoid_cross_entropy_backward");
  w.Kernel("sigmoid_ce_backward")
      .Value("int", "n").In("float", "x").In("float", "target").In("float", "top_diff")
      .In("float", "norm").Out("float", "dx").Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  const float scale = top_diff[0] / norm[0];
  $loop(i, n) {
    const float t = target[i];
    const int skip = has_ignore && (int)t == ignore_label;
    dx[i] = skip ? 0.0f : (1.0f / (1.0f + exp(-x[i])) - t) * scale;
  }
)");
  return w.Source();
}

std::string EuclideanBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "euclidean_backward");
  w.Kernel("euclidean_backward")
      .Value("int", "n").In("float", "a").In("float", "b").In("float", "top_diff").Out("float", "dx")
      .Value("float", "alpha")
      .Body(R"(  const float scale = alpha * top_diff[0];
  $loop(i, n) {
    dx[i] = scale * (a[i] - b[i]);
  }
)");
  return w.Source();
}

std::string HingeLossBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "hinge_loss_backward");
  w.Kernel("hinge_backward")
      .Value("int", "num").Value("int", "dim").In("float", "x").In("float", "label")
      .In("float", "top_diff").Out("float", "dx").Value("int", "l2").Value("float", "inv_num")
      .Body(R"(  const float scale = top_diff[0] * inv_num;
  $loop(i, num * dim) {
    const int l = (int)label[i / dim];
    const float sign = i % dim == l ? -1.0f : 1.0f;
    const float m = 1.0f + sign * x[i];
    const float g = m > 0.0f ? (l2 ? 2.0f * m : 1.0f) : 0.0f;
    dx[i] = l < 0 || l >= dim ? 0.0f : sign * g * scale;
  }
)");
  return w.Source();
}

std::string MultinomialLogisticLossBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "multinomial_logistic_loss_backward");
  w.Kernel("multinomial_logistic_backward")
      .Value("int", "num").Value("int", "dim").In("float", "prob").In("float", "label")
      .In("float", "top_diff").Out("float", "dx").Value("float", "inv_num")
      .Body(R"(  const float scale = top_diff[0] * inv_num;
  $loop(i, num * dim) {
    const float p = prob[i];
    dx[i] = (int)label[i / dim] == i % dim ? -scale / (p > 1e-20f ? p : 1e-20f) : 0.0f;
  }
)");
  return w.Source();
}

std::string ContrastiveLossBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "contrastive_loss_backward");
  w.Kernel("contrastive_backward")
      .Value("int", "num").Value("int", "dim").In("float", "a").In("float", "b").In("float", "y")
      .In("float", "dist_sq").In("float", "top_diff").Out("float", "dx").Value("float", "alpha")
      .Value("float", "margin").Value("int", "legacy")
      .Body(R"(  const float s = alpha * top_diff[0];
  $loop(i, num * dim) {
    const int r = i / dim;
    const float d = a[i] - b[i];
    if ((int)y[r] != 0) {
      dx[i] = s * d;
    } else if (legacy) {
      dx[i] = margin - dist_sq[r] > 0.0f ? -s * d : 0.0f;
    } else {
      const float dist = sqrt(dist_sq[r]);
      const float m = margin - dist;
      dx[i] = m > 0.0f ? -s * m / (dist + 1e-4f) * d : 0.0f;
    }
  }
)");
  return w.Source();
}

std::string InfogainLossBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "infogain_loss_backward");
  w.Kernel("infogain_backward")
      .Value("int", "outer").Value("int", "channels").Value("int", "inner").In("float", "prob")
      .In("float", "label").In("float", "h").In("float", "top_diff").In("float", "norm")
      .Out("float", "dx").Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  const float scale = top_diff[0] / norm[0];
  $loop(j, outer * inner) {
    const int l = (int)label[j];
    const int base = (j / inner) * channels * inner + j % inner;
    const int skip = (has_ignore && l == ignore_label) || l < 0 || l >= channels;
    float row = 0.0f;
    if (!skip)
      for (int c = 0; c < channels; ++c) row += h[l * channels + c];
    for (int c = 0; c < channels; ++c) {
      const int k = base + c * inner;
      dx[k] = skip ? 0.0f : (prob[k] * row - h[l * channels + c]) * scale;
    }
  }
)");
  return w.Source();
}

std::string LrnWithinChannelBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "lrn_within_backward");
  w.Kernel("lrn_within_backward")
      .Value("int", "n").Value("int", "height").Value("int", "width").Value("int", "size")
      .Value("float", "alpha").Value("float", "beta").In("float", "x").In("float", "y")
      .In("float", "dy").In("float", "scale").Out("float", "dx")
      .Body(R"(  const int pre = (size - 1) / 2;
  $loop(i, n) {
    const int col = i % width, row = (i / width) % height;
    const int plane = i - row * width - col;
    const int r0 = max(row - pre, 0), r1 = min(row + pre + 1, height);
    const int c0 = max(col - pre, 0), c1 = min(col + pre + 1, width);
    float acc = 0.0f;
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const int k = plane + r * width + c;
        acc += dy[k] * y[k] / scale[k];
      }
    dx[i] = dy[i] * pow(scale[i], -beta) -
            2.0f * alpha * beta / (float)(size * size) * x[i] * acc;
  }
)");
  return w.Source();
}

std::string ConcatBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "concat_backward");
  w.Kernel("concat_backward")
      .Value("int", "n").In("float", "dy").Out("float", "dx")
      .Value("int", "bottom_axis").Value("int", "top_axis").Value("int", "inner").Value("int", "offset")
      .Body(R"(  $loop(i, n) {
    const int block = bottom_axis * inner;
    dx[i] = dy[(i / block) * top_axis * inner + offset * inner + i % block];
  }
)");
  return w.Source();
}

std::string EltwiseMaxBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "eltwise_max_backward");
  w.Kernel("argmax_update")
      .Value("int", "n").In("float", "x").Out("float", "best").Out("int", "arg").Value("int", "j")
      .Body(R"(  $loop(i, n) {
    const float v = x[i];
    if (j == 0 || v > best[i]) {
      best[i] = v;
      arg[i] = j;
    }
  }
)");
  w.Kernel("max_select")
      .Value("int", "n").In("float", "dy").In("int", "arg").Out("float", "dx").Value("int", "k")
      .Body(R"(  $loop(i, n) {
    dx[i] = arg[i] == k ? dy[i] : 0.0f;
  }
)");
  return w.Source();
}

std::string EltwiseProdBackwardSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "eltwise_prod_backward");
  w.Kernel("prod_quotient")
      .Value("int", "n").In("float", "dy").In("float", "y").In("float", "x").Out("float", "dx")
      .Body(R"(  $loop(i, n) {
    dx[i] = dy[i] * y[i] / x[i];
  }
)");
  return w.Source();
}

std::string ChannelSumSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "channel_sum");
  w.Kernel("channel_sum")
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("float", "a").In("float", "b").Out("float", "out")
      .Value("int", "use_b").Value("float", "alpha").Value("float", "beta")
      .Body(R"(  $shared float part[MP_REDUCE_LOCAL];
  const int t = $local_id(0);
  const int m = outer * inner;
  for (int c = $group_id(0); c < channels; c += $num_groups(0)) {
    float s = 0.0f;
    for (int k = t; k < m; k += MP_REDUCE_LOCAL) {
      const int idx = ((k / inner) * channels + c) * inner + k % inner;
      s += use_b ? a[idx] * b[idx] : a[idx];
    }
    part[t] = s;
    $barrier;
    for (int h = MP_REDUCE_LOCAL / 2; h > 0; h >>= 1) {
      if (t < h) part[t] += part[t + h];
      $barrier;
    }
    if (t == 0) out[c] = alpha * part[0] + (beta != 0.0f ? beta * out[c] : 0.0f);
    $barrier;
  }
)");
  return w.Source();
}

void LaunchChannelSum(Device& device, Kernel k, int outer, int channels, int inner,
                      DeviceMemory* a, DeviceMemory* b, DeviceMemory* out, float alpha, float beta) {
  const size_t max_groups = std::max<size_t>(64, 16 * std::max(1, device.info().compute_units));
  const size_t groups = std::min<size_t>(max_groups, std::max(1, channels));
  k.Arg(int32_t{outer}).Arg(int32_t{channels}).Arg(int32_t{inner}).ArgBuffer(a, 0, 4)
      .ArgBuffer(b ? b : a, 0, 4).ArgBuffer(out, 0, 4).Arg(int32_t{b ? 1 : 0}).Arg(alpha).Arg(beta);
  k.Launch({groups * kReduceLocalSize, 1, 1}, {static_cast<size_t>(kReduceLocalSize), 1, 1});
}

std::string BatchNormSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "batch_norm");
  w.Kernel("bn_subtract")
      .Value("int", "n").Value("int", "channels").Value("int", "inner")
      .In("float", "x").In("float", "mean").Out("float", "y")
      .Body(R"(  $loop(i, n) {
    y[i] = x[i] - mean[(i / inner) % channels];
  }
)");
  w.Kernel("bn_statistics")
      .Value("int", "channels").In("float", "mean").In("float", "var")
      .Out("float", "blob0").Out("float", "blob1").Out("float", "blob2").Out("float", "inv_std")
      .Value("float", "maf").Value("float", "correction").Value("float", "eps")
      .Body(R"(  $loop(c, channels) {
    blob0[c] = mean[c] + maf * blob0[c];
    blob1[c] = correction * var[c] + maf * blob1[c];
    inv_std[c] = 1.0f / sqrt(var[c] + eps);
    if (c == 0) blob2[0] = blob2[0] * maf + 1.0f;
  }
)");
  w.Kernel("bn_backward")
      .Value("int", "n").Value("int", "channels").Value("int", "inner")
      .In("float", "dy").In("float", "y").In("float", "s1").In("float", "s2").In("float", "inv_std")
      .Out("float", "dx")
      .Body(R"(  $loop(i, n) {
    const int c = (i / inner) % channels;
    dx[i] = (dy[i] - s2[c] - s1[c] * y[i]) * inv_std[c];
  }
)");
  return w.Source();
}

std::string BatchNormFoldKernelName(DataType param_type) {
  return std::string("bn_fold_") + Name(param_type);
}

std::string BatchNormFoldSource(const KernelTarget& target, DataType param_type) {
  if (IsQuantized(param_type))
    throw std::invalid_argument(std::string("bn_fold has no quantized variant (") + Name(param_type) + ")");
  KernelWriter w = Writer(target, "batch_norm_fold");
  w.AddType("Ptype", param_type);
  w.Kernel(BatchNormFoldKernelName(param_type))
      .Value("int", "channels").In("Ptype", "mean").In("Ptype", "var").In("Ptype", "sf")
      .Out("float", "scale").Out("float", "bias").Value("float", "eps")
      .Body(R"(  const float s = (float)Ptype_LOAD(sf, 0);
  const float f = s == 0.0f ? 0.0f : 1.0f / s;
  $loop(c, channels) {
    const float a = 1.0f / sqrt((float)Ptype_LOAD(var, c) * f + eps);
    scale[c] = a;
    bias[c] = -(float)Ptype_LOAD(mean, c) * f * a;
  }
)");
  return w.Source();
}

std::string SolverCommonSource(const KernelTarget& target) {
  KernelWriter w = Writer(target, "solver_common");
  w.Kernel("regularize")
      .Value("int", "n").In("float", "w").Out("float", "d")
      .Value("float", "norm").Value("float", "decay").Value("int", "l1")
      .Body(R"(  $loop(i, n) {
    const float v = w[i];
    const float r = l1 ? (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f)) : v;
    d[i] = d[i] * norm + (decay != 0.0f ? decay * r : 0.0f);
  }
)");
  w.Kernel("clip_scale")
      .Value("int", "n").Out("float", "d").In("float", "sumsq").Value("float", "clip")
      .Body(R"(  const float l2 = sqrt(sumsq[0]);
  if (l2 > clip) {
    const float s = clip / l2;
    $loop(i, n) { d[i] *= s; }
  }
)");
  return w.Source();
}

std::string SolverUpdateKernelName(const std::string& rule) { return "update_" + Lower(rule); }

std::string SolverUpdateSource(const KernelTarget& target, const std::string& rule) {
  KernelWriter w = Writer(target, "solver_update");
  // Each rule reads g = d[i] and the histories, and leaves the update in `up`.
  std::string step;
  if (rule == "SGD") {
    step = "h[i] = m1 * h[i] + lr * g; up = h[i];";
  } else if (rule == "Nesterov") {
    step = "const float prev = h[i]; h[i] = m1 * h[i] + lr * g; up = (1.0f + m1) * h[i] - m1 * prev;";
  } else if (rule == "AdaGrad") {
    step = "h[i] += g * g; up = lr * g / (sqrt(h[i]) + delta);";
  } else if (rule == "RMSProp") {
    step = "h[i] = m2 * h[i] + (1.0f - m2) * g * g; up = lr * g / (sqrt(h[i]) + delta);";
  } else if (rule == "AdaDelta") {
    step = "h[i] = m1 * h[i] + (1.0f - m1) * g * g; "
           "const float a = g * sqrt((u[i] + delta) / (h[i] + delta)); "
           "u[i] = m1 * u[i] + (1.0f - m1) * a * a; up = lr * a;";
  } else if (rule == "Adam") {
    step = "h[i] = m1 * h[i] + (1.0f - m1) * g; u[i] = m2 * u[i] + (1.0f - m2) * g * g; "
           "up = lr * correction * h[i] / (sqrt(u[i]) + delta);";
  } else {
    throw std::invalid_argument("unknown solver rule '" + rule +
                                "' (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)");
  }
  w.Define("MP_UPDATE_STEP", step);
  w.Kernel(SolverUpdateKernelName(rule))
      .Value("int", "n").Out("float", "w").Out("float", "d").Out("float", "h").Out("float", "u")
      .Value("float", "lr").Value("float", "m1").Value("float", "m2").Value("float", "delta")
      .Value("float", "correction").Value("float", "norm").Value("float", "decay").Value("int", "l1")
      .Body(R"(  $loop(i, n) {
    const float v = w[i];
    const float r = l1 ? (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f)) : v;
    const float g = d[i] * norm + (decay != 0.0f ? decay * r : 0.0f);
    float up;
    MP_UPDATE_STEP
    d[i] = up;
    w[i] = v - up;
  }
)");
  return w.Source();
}

}  // namespace mpcaffe
