// layers/loss_kernels.cc — bodies of the loss and accuracy kernels (loss_kernels.h), in float.
#include "layers/loss_kernels.h"

#include "layers/layer_kernels.h"

namespace mpcaffe {

std::string SoftmaxLossSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "softmax_loss");
  KernelWriter w(target, "softmax_loss");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("softmax_loss", type))
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("Dtype", "prob").In("Dtype", "label").Out("float", "loss")
      .Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  $loop(j, outer * inner) {
    const int l = (int)(float)Dtype_LOAD(label, j);
    if (has_ignore && l == ignore_label) {
      loss[j] = -1.0f;
    } else if (l < 0 || l >= channels) {
      loss[j] = $uint_as_float(0x7fc00000u);  // NaN: a label outside the classes shows in the loss
    } else {
      const int base = (j / inner) * channels * inner + j % inner;
      float p = (float)Dtype_LOAD(prob, base + l * inner);
      p = p > 1.17549435e-38f ? p : 1.17549435e-38f;
      loss[j] = -log(p);
    }
  }
)");
  return w.Source();
}

std::string SigmoidCrossEntropySource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "sigmoid_ce");
  KernelWriter w(target, "sigmoid_cross_entropy");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("sigmoid_ce", type))
      .Value("int", "n").In("Dtype", "x").In("Dtype", "target").Out("float", "loss")
      .Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  $loop(i, n) {
    const float v = (float)Dtype_LOAD(x, i);
    const float t = (float)Dtype_LOAD(target, i);
    if (has_ignore && (int)t == ignore_label) {
      loss[i] = -1.0f;
    } else {
      const float l = log(1.0f + exp(-fabs(v))) - v * (t - (v >= 0.0f ? 1.0f : 0.0f));
      loss[i] = l > 0.0f ? l : 0.0f;
    }
  }
)");
  return w.Source();
}

std::string AccuracySource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "accuracy");
  KernelWriter w(target, "accuracy");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("accuracy", type))
      .Value("int", "outer").Value("int", "channels").Value("int", "inner")
      .In("Dtype", "x").In("Dtype", "label").Out("float", "correct")
      .Value("int", "top_k").Value("int", "ignore_label").Value("int", "has_ignore")
      .Body(R"(  $loop(j, outer * inner) {
    const int l = (int)(float)Dtype_LOAD(label, j);
    if (has_ignore && l == ignore_label) {
      correct[j] = -1.0f;
    } else {
      const int base = (j / inner) * channels * inner + j % inner;
      const float v = (float)Dtype_LOAD(x, base + l * inner);
      int higher = 0;
      for (int c = 0; c < channels; ++c)
        higher += (float)Dtype_LOAD(x, base + c * inner) > v ? 1 : 0;
      correct[j] = higher < top_k ? 1.0f : 0.0f;
    }
  }
)");
  return w.Source();
}

std::string SquaredDifferenceSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "sqdiff");
  KernelWriter w(target, "squared_difference");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("sqdiff", type))
      .Value("int", "n").In("Dtype", "a").In("Dtype", "b").Out("float", "d")
      .Body(R"(  $loop(i, n) {
    float v = (float)Dtype_LOAD(a, i) - (float)Dtype_LOAD(b, i);
    d[i] = v * v;
  }
)");
  return w.Source();
}

std::string HingeLossSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "hinge");
  KernelWriter w(target, "hinge_loss");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("hinge", type))
      .Value("int", "num").Value("int", "dim").In("Dtype", "x").In("Dtype", "label")
      .Out("float", "v").Value("int", "l2")
      .Body(R"(  $loop(i, num * dim) {
    const int l = (int)(float)Dtype_LOAD(label, i / dim);
    if (l < 0 || l >= dim) {
      v[i] = $uint_as_float(0x7fc00000u);  // NaN: a label outside the classes shows in the loss
    } else {
      const float s = (float)Dtype_LOAD(x, i);
      float m = 1.0f + (i % dim == l ? -s : s);
      m = m > 0.0f ? m : 0.0f;
      v[i] = l2 ? m * m : m;
    }
  }
)");
  return w.Source();
}

std::string MultinomialLogisticLossSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "multinomial_logistic");
  KernelWriter w(target, "multinomial_logistic_loss");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("multinomial_logistic", type))
      .Value("int", "num").Value("int", "dim").In("Dtype", "prob").In("Dtype", "label")
      .Out("float", "loss")
      .Body(R"(  $loop(r, num) {
    const int l = (int)(float)Dtype_LOAD(label, r);
    if (l < 0 || l >= dim) {
      loss[r] = $uint_as_float(0x7fc00000u);  // NaN: a label outside the classes shows in the loss
    } else {
      const float p = (float)Dtype_LOAD(prob, r * dim + l);
      loss[r] = -log(p > 1e-20f ? p : 1e-20f);
    }
  }
)");
  return w.Source();
}

std::string ContrastiveLossSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "contrastive");
  KernelWriter w(target, "contrastive_loss");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("contrastive", type))
      .Value("int", "num").Value("int", "dim").In("Dtype", "a").In("Dtype", "b").In("Dtype", "y")
      .Out("float", "loss").Out("float", "dist_sq").Value("float", "margin").Value("int", "legacy")
      .Body(R"(  $loop(r, num) {
    float d2 = 0.0f;
    for (int c = 0; c < dim; ++c) {
      const float d = (float)Dtype_LOAD(a, r * dim + c) - (float)Dtype_LOAD(b, r * dim + c);
      d2 += d * d;
    }
    dist_sq[r] = d2;
    if ((int)(float)Dtype_LOAD(y, r) != 0) {
      loss[r] = d2;
    } else if (legacy) {
      const float m = margin - d2;
      loss[r] = m > 0.0f ? m : 0.0f;
    } else {
      float m = margin - sqrt(d2);
      m = m > 0.0f ? m : 0.0f;
      loss[r] = m * m;
    }
  }
)");
  return w.Source();
}

std::string InfogainLossSource(const KernelTarget& target, DataType type) {
  RequireFloat(type, "infogain");
  KernelWriter w(target, "infogain_loss");
  w.AddType("Dtype", type);
  w.Kernel(LayerKernelName("infogain", type))
      .Value("int", "outer").Value("int", "channels").Value("int", "inner").In("Dtype", "prob")
      .In("Dtype", "label").In("Dtype", "h").Out("float", "loss").Value("int", "ignore_label")
      .Value("int", "has_ignore")
      .Body(R"(  $loop(j, outer * inner) {
    const int l = (int)(float)Dtype_LOAD(label, j);
    if (has_ignore && l == ignore_label) {
      loss[j] = -3.4e38f;  // below any loss: masked_mean's ignore_below mark
    } else if (l < 0 || l >= channels) {
      loss[j] = $uint_as_float(0x7fc00000u);  // NaN: a label outside the classes shows in the loss
    } else {
      const int base = (j / inner) * channels * inner + j % inner;
      float sum = 0.0f;
      for (int c = 0; c < channels; ++c) {
        const float p = (float)Dtype_LOAD(prob, base + c * inner);
        sum -= (float)Dtype_LOAD(h, l * channels + c) * log(p > 1e-20f ? p : 1e-20f);
      }
      loss[j] = sum;
    }
  }
)");
  return w.Source();
}

}  // namespace mpcaffe
