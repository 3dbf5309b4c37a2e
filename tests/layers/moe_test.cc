// tests/layers/moe_test.cc — the MOE layer: fixed-gate forward equals the hand-mixed expert
// outputs (every dtype), grouped == full_forward, fp32 finite-difference gradients through the
// experts and the gating net, equation 1.11 on a hand-made batch, noisy gating (TRAIN) versus
// deterministic gating (TEST), nested weights and ranges in the caffemodel, the nested
// parameters in the solver's list. The paper's ImageNet-MOE nets (whole nets): tests/net.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

#include "net/moe_layer.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "device/settings.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

caffe::NetParameter Text(const std::string& text) {
  return test_support::NetText(text, "<moe test>");
}

std::string TypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "CAFFE_FLOAT";
    case DataType::kFloat16: return "CAFFE_HALF";
    case DataType::kInt16Q: return "CAFFE_INT16_QUANTIZED";
    default: return "CAFFE_INT8_QUANTIZED";
  }
}

/// `bottom/compute/top_data_type: t` fields.
std::string Types(DataType t) {
  const std::string n = TypeName(t);
  return " bottom_data_type: " + n + " compute_data_type: " + n + " top_data_type: " + n + " ";
}

/// A small MOE net: fp32 Input (B × in) → MOE (dtype t) with a gating net (InnerProduct →
/// Softmax in fp32) and `nets` expert nets (InnerProduct → in-place ReLU), the first repeated
/// `instances` times; tops moe, observed, expected (+ lb_loss when `loss_top`).
std::string SmallMoe(DataType t, int batch, int in, int experts_out, int nets, int instances,
                     int k, bool full, bool loss_top = false, const std::string& gating_extra = "") {
  std::ostringstream s;
  s << "name: \"small_moe\"\n"
    << "layer { name: \"data\" type: \"Input\" top: \"data\" input_param { shape { dim: " << batch
    << " dim: " << in << " } } }\n"
    << "layer { name: \"moe\" type: \"MOE\" bottom: \"data\" top: \"moe\" top: \"observed\" top: \"expected\" "
    << (loss_top ? "top: \"lb_loss\" " : "") << Types(t) << "\n moe_param {\n  select_experts: " << k
    << "\n  full_forward: " << (full ? "true" : "false") << "\n  gating_net {\n"
    << "   layer { name: \"g_in\" type: \"Input\" top: \"g_in\"" << Types(t)
    << " input_param { shape { dim: " << (gating_extra.empty() ? 1 : batch) << " dim: " << in << " } } }\n"
    << "   layer { name: \"g_fc\" type: \"InnerProduct\" bottom: \"g_in\" top: \"g_fc\"" << Types(t)
    << " inner_product_param { num_output: " << (nets - 1 + instances)
    << " weight_filler { type: \"gaussian\" std: 1 } bias_filler { type: \"constant\" value: 0 } } }\n"
    << gating_extra
    << "   layer { name: \"g_sm\" type: \"Softmax\" bottom: \"" << (gating_extra.empty() ? "g_fc" : "g_noisy")
    << "\" top: \"g_sm\"" << Types(DataType::kFloat32) << " }\n  }\n";
  for (int n = 0; n < nets; ++n) {
    const std::string p = "e" + std::to_string(n) + "_";
    s << "  expert_net {\n"
      << "   layer { name: \"" << p << "in\" type: \"Input\" top: \"" << p << "in\"" << Types(t)
      << " input_param { shape { dim: 1 dim: " << in << " } } }\n"
      << "   layer { name: \"" << p << "fc\" type: \"InnerProduct\" bottom: \"" << p << "in\" top: \"" << p
      << "fc\"" << Types(t) << " inner_product_param { num_output: " << experts_out
      << " weight_filler { type: \"gaussian\" std: 0.5 } bias_filler { type: \"gaussian\" std: 0.5 } } }\n"
      << "   layer { name: \"" << p << "relu\" type: \"ReLU\" bottom: \"" << p << "fc\" top: \"" << p << "fc\""
      << Types(t) << " }\n  }\n";
    if (n == 0) s << "  expert_instances: " << instances << "\n";
    else s << "  expert_instances: 1\n";
  }
  s << " }\n}\n";
  return s.str();
}

MoeLayer& Moe(Net& net) { return dynamic_cast<MoeLayer&>(net.layer("moe")); }

std::vector<float> RandomInput(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

/// Builds the net for `t` with the fp32 net's weights; quantized types are calibrated.
std::unique_ptr<Net> BuildTyped(const std::string& text, const caffe::NetParameter& weights,
                                const std::vector<float>& input, caffe::Phase phase = caffe::TEST) {
  NetOptions o;
  o.phase = phase;
  auto net = std::make_unique<Net>(Text(text), Dev(), o);
  net->CopyTrainedLayersFrom(weights);
  net->blob("data").FromFloat(input);
  if (!net->QuantizersWithoutRange().empty()) CalibrateWithFloatVariant(*net, Text(text), o);
  return net;
}

// ---- Host references ------------------------------------------------------------------------

TEST(Moe, SelectTopKRenormalizesAndBreaksTiesByIndex) {
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f,   // top-2: 1, 3
                                0.25f, 0.25f, 0.25f, 0.25f};  // ties: 0, 1
  const std::vector<float> g = SelectTopK(p, 2, 4, 2);
  EXPECT_NEAR(g[1], 0.4f / 0.7f, 1e-6);
  EXPECT_NEAR(g[3], 0.3f / 0.7f, 1e-6);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_NEAR(g[4], 0.5f, 1e-6);
  EXPECT_NEAR(g[5], 0.5f, 1e-6);
  EXPECT_EQ(g[6] + g[7], 0.0f);
}

TEST(Moe, LoadBalancingLossIsEquation1_11) {
  // N = 4 experts, K = 2, B = 2: counts 2, 1, 1, 0 → (1/4)·[(0.5−1)² + 0 + 0 + 0.5²] = 0.125.
  EXPECT_NEAR(LoadBalancingLoss({2, 1, 1, 0}, 2, 2), 0.125, 1e-12);
  EXPECT_NEAR(LoadBalancingLoss({1, 1, 1, 1}, 2, 2), 0.0, 1e-12);
}

// ---- Forward --------------------------------------------------------------------------------

/// Fixed gates (gating weights 0, biases 2, −1, 1, 0 → every sample picks experts 0 and 2 with
/// weights e²/(e²+e) and e/(e²+e)): the top equals the mix of the experts' outputs, in every
/// dtype, in both modes; fp32 also matches a host InnerProduct+ReLU reference.
TEST(Moe, FixedGatesGiveTheHandMixedExpertOutputsInEveryDtype) {
  const int B = 3, in = 6, out = 5;
  const std::vector<float> x = RandomInput(B * in, 11);
  // fp32 net with the fixed gating weights → the weights every dtype starts from.
  NetOptions o;
  caffe::NetParameter weights;
  std::vector<std::vector<float>> w(4), bias(4);
  {
    Net ref(Text(SmallMoe(DataType::kFloat32, B, in, out, 2, 3, 2, true)), Dev(), o);
    Net& gating = *Moe(ref).nested_nets()[0];
    gating.layer("g_fc").SetParamFromFloat(0, std::vector<float>(4 * in, 0.0f));
    gating.layer("g_fc").SetParamFromFloat(1, {2.0f, -1.0f, 1.0f, 0.0f});
    ref.ToProto(&weights);
    for (int e = 0; e < 4; ++e) {
      Net& ex = *Moe(ref).nested_nets()[1 + e];
      Layer& fc = ex.layers()[1]->type() == std::string("InnerProduct") ? *ex.layers()[1] : *ex.layers()[2];
      w[e] = fc.ParamAsFloat(0);
      bias[e] = fc.ParamAsFloat(1);
    }
  }
  const float e2 = std::exp(2.0f), e1 = std::exp(1.0f);
  const float g0 = e2 / (e2 + e1), g2 = e1 / (e2 + e1);
  for (DataType t : kAllDataTypes) {
    for (bool full : {true, false}) {
      SCOPED_TRACE(std::string(Name(t)) + (full ? " full_forward" : " grouped"));
      auto net = BuildTyped(SmallMoe(t, B, in, out, 2, 3, 2, full), weights, x);
      net->blob("data").FromFloat(x);
      net->Forward();
      MoeLayer& moe = Moe(*net);
      // Selection and weights.
      const std::vector<float>& g = moe.gates();
      for (int b = 0; b < B; ++b) {
        EXPECT_NEAR(g[b * 4 + 0], g0, IsQuantized(t) ? 2e-2 : 2e-3);
        EXPECT_NEAR(g[b * 4 + 2], g2, IsQuantized(t) ? 2e-2 : 2e-3);
        EXPECT_EQ(g[b * 4 + 1], 0.0f);
        EXPECT_EQ(g[b * 4 + 3], 0.0f);
      }
      EXPECT_EQ(moe.counts(), (std::vector<int>{B, 0, B, 0}));
      // The mix of the experts' own outputs (grouped: expert rows are the samples in order).
      const std::vector<float> y = test_support::RealValues(*net, "moe");
      std::vector<std::vector<float>> ex_out(4);
      for (int e : {0, 2}) {
        Net& ex = *moe.nested_nets()[1 + e];
        ex_out[e] = test_support::RealValues(ex, ex.output_blobs()[0]->name());
        ASSERT_EQ(ex_out[e].size(), static_cast<size_t>(B * out));
      }
      float scale = 1e-6f;
      for (float v : y) scale = std::max(scale, std::fabs(v));
      const float tol = t == DataType::kFloat32 ? 1e-5f * scale
                        : t == DataType::kFloat16 ? 2e-3f * scale
                        : t == DataType::kInt16Q ? 1e-3f * scale : 2.5e-2f * scale;
      for (int b = 0; b < B; ++b)
        for (int d = 0; d < out; ++d) {
          const float mixed = g[b * 4 + 0] * ex_out[0][b * out + d] + g[b * 4 + 2] * ex_out[2][b * out + d];
          EXPECT_NEAR(y[b * out + d], mixed, tol) << "b " << b << " d " << d;
          // Independent host reference (fp32 weights, exact gates).
          float r0 = bias[0][d], r2 = bias[2][d];
          for (int i = 0; i < in; ++i) {
            r0 += w[0][d * in + i] * x[b * in + i];
            r2 += w[2][d * in + i] * x[b * in + i];
          }
          const float host = g0 * std::max(r0, 0.0f) + g2 * std::max(r2, 0.0f);
          const float host_tol = t == DataType::kFloat32 ? 1e-5f * scale
                                 : t == DataType::kFloat16 ? 5e-3f * scale
                                 : t == DataType::kInt16Q ? 2e-3f * scale : 6e-2f * scale;
          EXPECT_NEAR(y[b * out + d], host, host_tol) << "b " << b << " d " << d;
        }
      const std::vector<float> observed = net->blob("observed").ToFloat();
      const std::vector<float> expected = net->blob("expected").ToFloat();
      EXPECT_EQ(observed, (std::vector<float>{1.0f, 0.0f, 1.0f, 0.0f}));
      EXPECT_EQ(expected, std::vector<float>(4, 0.5f));
    }
  }
}

/// Random gating (samples choose different experts; some experts get no sample): grouped and
/// full_forward give the same top, bit for bit, in every dtype (experts are added in index
/// order either way, and each row of an expert GEMM does not depend on the batch).
TEST(Moe, GroupedEqualsFullForwardInEveryDtype) {
  const int B = 9, in = 7, out = 6;
  const std::vector<float> x = RandomInput(B * in, 23);
  caffe::NetParameter weights;
  {
    Net ref(Text(SmallMoe(DataType::kFloat32, B, in, out, 3, 2, 2, true)), Dev());
    ref.ToProto(&weights);
  }
  for (DataType t : kAllDataTypes) {
    SCOPED_TRACE(Name(t));
    auto full = BuildTyped(SmallMoe(t, B, in, out, 3, 2, 2, true), weights, x);
    auto grouped = BuildTyped(SmallMoe(t, B, in, out, 3, 2, 2, false), weights, x);
    // The grouped net takes the full net's ranges so both quantize alike.
    caffe::NetParameter ranges;
    full->ToProto(&ranges);
    grouped->CopyTrainedLayersFrom(ranges);
    full->blob("data").FromFloat(x);
    grouped->blob("data").FromFloat(x);
    full->Forward();
    grouped->Forward();
    EXPECT_EQ(Moe(*full).gates(), Moe(*grouped).gates());
    int used = 0, unused = 0;
    for (int c : Moe(*full).counts()) (c ? used : unused)++;
    EXPECT_GE(used, 2);
    const std::vector<float> a = full->blob("moe").ToFloat(), b = grouped->blob("moe").ToFloat();
    ASSERT_EQ(a.size(), b.size());
    float max_diff = 0;
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    EXPECT_EQ(max_diff, 0.0f) << "max |full − grouped|";
  }
}

/// MPCAFFE_MOE_QUEUES while alive (restored after).
class QueuesEnv : public ScopedSettings {
 public:
  explicit QueuesEnv(const char* value) { (*this)->moe_queues = value; }
};

/// The experts on queues of their own (the default) give the same bytes as all on one queue:
/// forward in every dtype and both modes, and the fp32 gradients.
TEST(Moe, ExpertsOnTheirOwnQueuesMatchOneQueue) {
  const int B = 11, in = 6, out = 5;
  const std::vector<float> x = RandomInput(B * in, 41);
  caffe::NetParameter weights;
  {
    Net ref(Text(SmallMoe(DataType::kFloat32, B, in, out, 3, 2, 2, false)), Dev());
    ref.ToProto(&weights);
  }
  for (bool full : {false, true}) {
    for (DataType t : kAllDataTypes) {
      SCOPED_TRACE(std::string(Name(t)) + (full ? " full_forward" : " grouped"));
      const std::string text = SmallMoe(t, B, in, out, 3, 2, 2, full);
      auto parallel = BuildTyped(text, weights, x);
      std::unique_ptr<Net> serial;
      {
        QueuesEnv one("1");
        serial = BuildTyped(text, weights, x);
      }
      EXPECT_EQ(Moe(*parallel).num_queues(), 4);
      EXPECT_EQ(Moe(*serial).num_queues(), 0);
      caffe::NetParameter ranges;
      parallel->ToProto(&ranges);
      serial->CopyTrainedLayersFrom(ranges);
      for (int round = 0; round < 2; ++round) {
        const std::vector<float> xr = RandomInput(B * in, 50 + round);
        parallel->blob("data").FromFloat(xr);
        serial->blob("data").FromFloat(xr);
        parallel->Forward();
        serial->Forward();
        EXPECT_EQ(Moe(*parallel).gates(), Moe(*serial).gates());
        EXPECT_EQ(parallel->blob("moe").ToFloat(), serial->blob("moe").ToFloat());
      }
    }
  }
  // fp32 TRAIN: the bottom's and every parameter's gradient, bit for bit.
  NetOptions o;
  o.phase = caffe::TRAIN;
  const std::string text = SmallMoe(DataType::kFloat32, B, in, out, 3, 2, 2, false);
  Net parallel(Text(text), Dev(), o);
  QueuesEnv one("0");
  Net serial(Text(text), Dev(), o);
  serial.CopyTrainedLayersFrom(weights);
  parallel.CopyTrainedLayersFrom(weights);
  std::vector<float> dy = RandomInput(B * out, 7);
  for (Net* net : {&parallel, &serial}) {
    net->blob("data").FromFloat(x);
    net->Forward();
    net->ClearParamDiffs();
    std::memcpy(net->blob("moe").mutable_host_diff(), dy.data(), dy.size() * 4);
    for (const char* top : {"observed", "expected"}) {
      Blob& b = net->blob(top);
      std::fill_n(static_cast<float*>(b.mutable_host_diff()), b.count(), 0.0f);
    }
    const int li = net->layer_index("moe");
    Moe(*net).Backward(net->top_vecs()[li], {true}, net->bottom_vecs()[li]);
  }
  auto diff = [](Blob& b) {
    const float* d = static_cast<const float*>(b.host_diff());
    return std::vector<float>(d, d + b.count());
  };
  EXPECT_EQ(diff(parallel.blob("data")), diff(serial.blob("data")));
  ASSERT_EQ(parallel.learnable_params().size(), serial.learnable_params().size());
  for (size_t p = 0; p < parallel.learnable_params().size(); ++p)
    EXPECT_EQ(diff(*parallel.learnable_params()[p]), diff(*serial.learnable_params()[p]))
        << parallel.learnable_param_names()[p];
}

// ---- Load balancing -------------------------------------------------------------------------

/// A hand-made batch: one-hot samples and a gating weight matrix that sends sample b to chosen
/// experts; the count tops are c_i/B and K/N, the loss top is eq. 1.11, and BVLC's
/// EuclideanLoss between the count tops is half of it.
TEST(Moe, LoadBalancingTopsMatchEquation1_11OnAHandMadeBatch) {
  const int B = 4, in = 4, N = 4, K = 2;
  std::string text = SmallMoe(DataType::kFloat32, B, in, 3, 1, N, K, false, true);
  text += "layer { name: \"reg\" type: \"EuclideanLoss\" bottom: \"observed\" bottom: \"expected\" top: \"reg\" }\n";
  Net net(Text(text), Dev());
  // Logits: sample b (one-hot at b) prefers experts pick[b][0], pick[b][1].
  const int pick[B][2] = {{0, 1}, {0, 2}, {0, 1}, {3, 0}};
  std::vector<float> wg(N * in, 0.0f);
  for (int b = 0; b < B; ++b) {
    wg[pick[b][0] * in + b] = 5.0f;
    wg[pick[b][1] * in + b] = 4.0f;
  }
  Net& gating = *Moe(net).nested_nets()[0];
  gating.layer("g_fc").SetParamFromFloat(0, wg);
  std::vector<float> x(B * in, 0.0f);
  for (int b = 0; b < B; ++b) x[b * in + b] = 1.0f;
  net.blob("data").FromFloat(x);
  net.Forward();
  const std::vector<int> counts = {4, 2, 1, 1};
  EXPECT_EQ(Moe(net).counts(), counts);
  double l = 0;
  for (int c : counts) l += std::pow(double(K) / N - double(c) / B, 2);
  l /= N;  // (0.5−1)² + (0.5−0.5)² + 2·(0.5−0.25)² = 0.375; / 4 = 0.09375
  EXPECT_NEAR(l, 0.09375, 1e-12);
  EXPECT_NEAR(net.blob("lb_loss").ToFloat()[0], l, 1e-7);
  EXPECT_EQ(net.blob("observed").ToFloat(), (std::vector<float>{1.0f, 0.5f, 0.25f, 0.25f}));
  EXPECT_NEAR(net.blob("reg").ToFloat()[0], 0.5 * l, 1e-7);
}

// ---- Gradients ------------------------------------------------------------------------------

/// Central differences (step 1e-2) of Σ c·top against the layer's backward, for the bottom and
/// for parameters of the gating net and of the experts; coordinates whose perturbation changes
/// the expert selection or an expert's ReLU pattern are skipped (the objective is not
/// differentiable there).
TEST(Moe, Fp32GradientsThroughExpertsAndGating) {
  for (bool full : {false, true}) {
    SCOPED_TRACE(full ? "full_forward" : "grouped");
    const int B = 5, in = 4, out = 3;
    NetOptions o;
    o.phase = caffe::TRAIN;
    Net net(Text(SmallMoe(DataType::kFloat32, B, in, out, 2, 2, 2, full)), Dev(), o);
    MoeLayer& moe = Moe(net);
    const int li = net.layer_index("moe");
    // The nested parameters are the net's (the solver updates them): 2 per InnerProduct.
    EXPECT_EQ(net.learnable_params().size(), 2u * (1 + 3));
    net.blob("data").FromFloat(RandomInput(B * in, 3));
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> c(B * out);
    for (auto& v : c) v = u(rng);
    auto objective = [&]() {
      net.Forward();
      const std::vector<float> y = net.blob("moe").ToFloat();
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += c[i] * y[i];
      return l;
    };
    objective();
    net.ClearParamDiffs();
    std::memcpy(net.blob("moe").mutable_host_diff(), c.data(), c.size() * 4);
    for (const char* t : {"observed", "expected"}) {
      Blob& b = net.blob(t);
      std::fill_n(static_cast<float*>(b.mutable_host_diff()), b.count(), 0.0f);
    }
    moe.Backward(net.top_vecs()[li], {true}, net.bottom_vecs()[li]);
    const std::vector<float> dx = [&] {
      Blob& b = *net.bottom_vecs()[li][0];
      const float* d = static_cast<const float*>(b.host_diff());
      return std::vector<float>(d, d + b.count());
    }();
    int checked = 0, skipped = 0;
    // The expert selection and the experts' ReLU patterns: where a perturbation changes either,
    // the objective has a kink between the two evaluations.
    auto pattern = [&] {
      std::vector<uint8_t> s;
      for (float g : moe.gates()) s.push_back(g > 0);
      for (Net* n : moe.nested_nets())
        for (const char* name : {"e0_fc", "e1_fc"})
          if (n->has_blob(name))
            for (float y : n->blob(name).ToFloat()) s.push_back(y > 0);
      return s;
    };
    auto check = [&](Blob& b, float analytic, int i, const std::string& what) {
      std::vector<float> v = b.ToFloat();
      const float keep = v[i];
      v[i] = keep + 1e-2f;
      b.FromFloat(v);
      net.ParamsUpdated();
      const double up = objective();
      const std::vector<uint8_t> sel_up = pattern();
      v[i] = keep - 1e-2f;
      b.FromFloat(v);
      net.ParamsUpdated();
      const double down = objective();
      const std::vector<uint8_t> sel_down = pattern();
      v[i] = keep;
      b.FromFloat(v);
      net.ParamsUpdated();
      if (sel_up != sel_down) {
        ++skipped;
        return;
      }
      const double numeric = (up - down) / 2e-2;
      const double scale = std::max({std::fabs(numeric), std::fabs(double(analytic)), 1.0});
      EXPECT_NEAR(analytic, numeric, 2e-3 * scale) << what << " [" << i << "]";
      ++checked;
    };
    Blob& data = *net.bottom_vecs()[li][0];
    for (int i = 0; i < data.count(); ++i) check(data, dx[i], i, "bottom");
    // Gating and expert parameters: the analytic diffs were accumulated by the backward above.
    for (size_t p = 0; p < net.learnable_params().size(); ++p) {
      Blob& b = *net.learnable_params()[p];
      const float* d = static_cast<const float*>(b.host_diff());
      const std::vector<float> diff(d, d + b.count());
      for (int i = 0; i < b.count(); i += 3) check(b, diff[i], i, net.learnable_param_names()[p]);
    }
    EXPECT_GE(checked, 30);
    EXPECT_LT(skipped, checked / 4);
  }
}

// ---- Noise ----------------------------------------------------------------------------------

/// Gating with the paper's noise (multiplicative Noise on a second InnerProduct, additive
/// w_c·N(0, 10) from DummyData through a grouped 1×1 convolution): TRAIN draws new noise each
/// Forward; TEST is deterministic and equals the gating without noise.
TEST(Moe, NoisyGatingInTrainDeterministicInTest) {
  const int B = 16, in = 5, N = 4;
  const std::string extra =
      "   layer { name: \"g_fc_noise\" type: \"InnerProduct\" bottom: \"g_in\" top: \"g_fc_noise\""
      " inner_product_param { num_output: 4 weight_filler { type: \"gaussian\" std: 1 } } }\n"
      "   layer { name: \"g_relu\" type: \"ReLU\" bottom: \"g_fc_noise\" top: \"g_fc_noise\" }\n"
      "   layer { name: \"g_noise\" type: \"Noise\" bottom: \"g_fc_noise\" top: \"g_noise\" noise_param { mu: 0 sigma: 1 } }\n"
      "   layer { name: \"g_sum1\" type: \"Eltwise\" bottom: \"g_fc\" bottom: \"g_noise\" top: \"g_sum1\" }\n"
      "   layer { name: \"g_dummy\" type: \"DummyData\" top: \"g_dummy\" dummy_data_param {"
      " data_filler { type: \"gaussian\" std: 10 } shape { dim: 16 dim: 4 dim: 1 dim: 1 } } }\n"
      "   layer { name: \"g_dummy_conv\" type: \"Convolution\" bottom: \"g_dummy\" top: \"g_dummy_conv\""
      " convolution_param { num_output: 4 kernel_size: 1 group: 4 weight_filler { type: \"constant\" value: 1 } } }\n"
      "   layer { name: \"g_dummy_flat\" type: \"Reshape\" bottom: \"g_dummy_conv\" top: \"g_dummy_flat\""
      " reshape_param { shape { dim: 16 dim: 4 } } }\n"
      "   layer { name: \"g_noisy\" type: \"Eltwise\" bottom: \"g_sum1\" bottom: \"g_dummy_flat\" top: \"g_noisy\" }\n";
  const std::string text = SmallMoe(DataType::kFloat32, B, in, 3, 1, N, 1, false, false, extra);
  const std::vector<float> x = RandomInput(B * in, 5);
  caffe::NetParameter weights;
  std::vector<float> test_gates;
  {
    Net test(Text(text), Dev());
    test.ToProto(&weights);
    test.blob("data").FromFloat(x);
    test.Forward();
    test_gates = Moe(test).gates();
    const std::vector<float> y = test.blob("moe").ToFloat();
    test.Forward();
    EXPECT_EQ(Moe(test).gates(), test_gates);
    EXPECT_EQ(test.blob("moe").ToFloat(), y);
  }
  // Without the noise layers (same g_fc weights): the same TEST gates.
  {
    Net plain(Text(SmallMoe(DataType::kFloat32, B, in, 3, 1, N, 1, false)), Dev());
    plain.CopyTrainedLayersFrom(weights);
    plain.blob("data").FromFloat(x);
    plain.Forward();
    EXPECT_EQ(Moe(plain).gates(), test_gates);
  }
  NetOptions o;
  o.phase = caffe::TRAIN;
  Net train(Text(text), Dev(), o);
  train.CopyTrainedLayersFrom(weights);
  train.blob("data").FromFloat(x);
  train.Forward();
  const std::vector<float> first = Moe(train).gates();
  train.Forward();
  EXPECT_NE(Moe(train).gates(), first);
  EXPECT_NE(first, test_gates);
  // The noise weights (g_fc_noise, g_dummy_conv) are trainable parameters of the outer net.
  int noise_params = 0;
  for (const auto& n : train.learnable_param_names())
    noise_params += n.find("g_fc_noise") != std::string::npos || n.find("g_dummy_conv") != std::string::npos;
  EXPECT_GE(noise_params, 3);
}

// ---- Weights and ranges ---------------------------------------------------------------------

/// Nested weights and calibrated nested ranges go into the caffemodel and come back: an int8
/// net loaded from it needs no calibration and gives the same output.
TEST(Moe, NestedWeightsAndRangesRoundTripThroughTheCaffemodel) {
  const int B = 4, in = 6, out = 5;
  const std::string text = SmallMoe(DataType::kInt8Q, B, in, out, 2, 2, 2, false);
  const std::vector<float> x = RandomInput(B * in, 31);
  caffe::NetParameter weights;
  {
    Net ref(Text(SmallMoe(DataType::kFloat32, B, in, out, 2, 2, 2, false)), Dev());
    ref.ToProto(&weights);
  }
  auto a = BuildTyped(text, weights, x);
  EXPECT_TRUE(a->QuantizersWithoutRange().empty());
  a->blob("data").FromFloat(x);
  a->Forward();
  const std::vector<float> ya = a->blob("moe").ToFloat();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("moe_test_" + std::to_string(getpid()) + ".caffemodel")).string();
  a->Save(path);
  Net b(Text(text), Dev());
  EXPECT_FALSE(b.QuantizersWithoutRange().empty());
  b.CopyTrainedLayersFrom(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(b.QuantizersWithoutRange().empty());
  b.blob("data").FromFloat(x);
  b.Forward();
  EXPECT_EQ(b.blob("moe").ToFloat(), ya);
  // Expert instances keep their own weights: instance 1 of expert_net 0 differs from instance 0.
  EXPECT_NE(Moe(b).nested_nets()[1]->layer("e0_fc").ParamAsFloat(0),
            Moe(b).nested_nets()[2]->layer("e0_fc_i1").ParamAsFloat(0));
}

TEST(Moe, QuantModeReachesNestedQuantizers) {
  Net net(Text(SmallMoe(DataType::kFloat32, 2, 3, 2, 1, 2, 1, true)), Dev());
  net.SetQuantMode(quant::QuantizerMode::kObserve);
  net.blob("data").FromFloat(RandomInput(6, 1));
  net.Forward();
  for (Net* n : Moe(net).nested_nets())
    for (const auto& l : n->layers())
      for (quant::Quantizer* q : l->quantizers()) {
        EXPECT_EQ(q->mode(), quant::QuantizerMode::kObserve) << q->name();
        if (l->type() != std::string("Input")) {
          EXPECT_TRUE(q->has_observed()) << q->name();
        }
      }
}

TEST(Moe, ErrorsNameTheLayerAndWhatIsWrong) {
  std::string text = SmallMoe(DataType::kFloat32, 2, 3, 2, 1, 2, 3, true);  // K = 3 > N = 2
  try {
    Net net(Text(text), Dev());
    FAIL() << "select_experts beyond the expert count was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'moe'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("select_experts"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe
