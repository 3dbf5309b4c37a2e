// tests/layers/recurrent_test.cc — BVLC's recurrent layers (LSTMUnit, LSTM, RNN) against plain
// C++ references in fp32 and fp16, the state carried from pass to pass and Reset, exposed states,
// a BVLC-layout caffemodel loaded into an LSTM, errors naming the layer and the field, and a small
// training net per family (LSTM, RNN) with its TEST net sharing the weights; an int8 variant keeps
// the recurrent layer in fp32 between conversions. (Finite-difference gradients: gradient_test.cc.)
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "layers/layer_registry.h"
#include "net/net.h"
#include "net/recurrent_layer.h"
#include "net/solver.h"
#include "quant/quant_params.h"
#include "tests/testing/net_support.h"
#include "tools/net_variants.h"

namespace mpcaffe {
namespace {

using test_support::NetText;
using test_support::RelativeDifference;

Device& Dev() { return DefaultDevice(); }

using Floats = std::vector<float>;

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

Floats Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Floats v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

/// y[r] += Σ_k W[r·cols + k]·x[k] for `rows` rows (W row-major rows × cols).
void MatVec(const Floats& W, int rows, int cols, const float* x, float scale, float* y) {
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int k = 0; k < cols; ++k) s += W[r * cols + k] * x[k];
    y[r] += scale * static_cast<float>(s);
  }
}

/// The recurrent state of N streams (h, and c for the LSTM), N × H each.
struct State {
  Floats h, c;
};

/// BVLC's LSTM over T steps of N streams: weights W_xc (4H × D), b_c, [W_xc_static (4H × S)],
/// W_hc (4H × H) in `w`; `xs` (N × S) when static. Returns h (T × N × H); `s` carries the state.
Floats LstmReference(const Floats& x, const Floats& cont, int T, int N, int D, int H,
                     const std::vector<Floats>& w, const Floats* xs, int S, State* s) {
  const bool st = xs != nullptr;
  const Floats& Whc = w[st ? 3 : 2];
  Floats out(static_cast<size_t>(T) * N * H), gates(4 * H), hc(H);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      const float k = cont[t * N + n];
      for (int d = 0; d < H; ++d) hc[d] = k * s->h[n * H + d];
      gates = w[1];
      MatVec(w[0], 4 * H, D, &x[(t * N + n) * D], 1.0f, gates.data());
      MatVec(Whc, 4 * H, H, hc.data(), 1.0f, gates.data());
      if (st) MatVec(w[2], 4 * H, S, &(*xs)[n * S], 1.0f, gates.data());
      for (int d = 0; d < H; ++d) {
        const float i = Sigmoid(gates[d]), f = k == 0.0f ? 0.0f : k * Sigmoid(gates[H + d]);
        const float o = Sigmoid(gates[2 * H + d]), g = std::tanh(gates[3 * H + d]);
        float& c = s->c[n * H + d];
        c = f * c + i * g;
        s->h[n * H + d] = o * std::tanh(c);
        out[(t * N + n) * H + d] = s->h[n * H + d];
      }
    }
  return out;
}

/// BVLC's RNN: weights W_xh, b_h, [W_xh_static], W_hh, W_ho, b_o. Returns o (T × N × H).
Floats RnnReference(const Floats& x, const Floats& cont, int T, int N, int D, int H,
                    const std::vector<Floats>& w, const Floats* xs, int S, State* s) {
  const size_t base = xs ? 3 : 2;
  Floats out(static_cast<size_t>(T) * N * H), a(H), hc(H), o(H);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      const float k = cont[t * N + n];
      for (int d = 0; d < H; ++d) hc[d] = k * s->h[n * H + d];
      a = w[1];
      MatVec(w[0], H, D, &x[(t * N + n) * D], 1.0f, a.data());
      MatVec(w[base], H, H, hc.data(), 1.0f, a.data());
      if (xs) MatVec(w[2], H, S, &(*xs)[n * S], 1.0f, a.data());
      for (int d = 0; d < H; ++d) s->h[n * H + d] = std::tanh(a[d]);
      o = w[base + 2];
      MatVec(w[base + 1], H, H, &s->h[n * H], 1.0f, o.data());
      for (int d = 0; d < H; ++d) out[(t * N + n) * H + d] = std::tanh(o[d]);
    }
  return out;
}

caffe::LayerParameter LayerText(const std::string& text, DataType type, caffe::Phase phase) {
  caffe::LayerParameter p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p))
    throw Error("bad test proto: " + text);
  const caffe::DataType t = DataTypeToProto(type);
  p.set_bottom_data_type(t);
  p.set_compute_data_type(t);
  p.set_top_data_type(t);
  p.set_phase(phase);
  return p;
}

/// A layer with its own bottoms (of `shapes`) and `tops` tops, set up.
struct Harness {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> blobs;
  std::vector<Blob*> bottom, top;
  Harness(const std::string& text, DataType type, const std::vector<std::vector<int>>& shapes,
          int tops, caffe::Phase phase = caffe::TEST) {
    layer = CreateLayer(LayerText(text, type, phase), Dev());
    for (const auto& s : shapes) {
      blobs.push_back(std::make_unique<Blob>(Dev(), type, s));
      bottom.push_back(blobs.back().get());
    }
    for (int t = 0; t < tops; ++t) {
      blobs.push_back(std::make_unique<Blob>(Dev(), type));
      top.push_back(blobs.back().get());
    }
    layer->SetUp(bottom, top);
  }
  std::vector<Floats> Params() {
    std::vector<Floats> w;
    for (int k = 0; k < layer->num_params(); ++k) w.push_back(layer->ParamAsFloat(k));
    return w;
  }
  Floats Run() {
    layer->Forward(bottom, top);
    return top[0]->ToFloat();
  }
};

double Tolerance(DataType t) { return t == DataType::kFloat32 ? 2e-5 : 2e-2; }

const char* kFillers = R"( weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                           bias_filler { type: "uniform" min: -0.5 max: 0.5 } )";

TEST(Recurrent, LSTMUnitMatchesTheReference) {
  const int N = 3, H = 4;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    Harness u(R"(name: "unit" type: "LSTMUnit")", t, {{1, N, H}, {1, N, 4 * H}, {1, N}}, 2);
    const Floats c0 = Random(N * H, 1), x = Random(N * 4 * H, 2, -2.0f, 2.0f), cont{1, 0, 1};
    u.bottom[0]->FromFloat(c0);
    u.bottom[1]->FromFloat(x);
    u.bottom[2]->FromFloat(cont);
    u.Run();
    Floats c(N * H), h(N * H);
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) {
        const float* g = &x[n * 4 * H];
        const float f = cont[n] * Sigmoid(g[H + d]);
        c[n * H + d] = f * c0[n * H + d] + Sigmoid(g[d]) * std::tanh(g[3 * H + d]);
        h[n * H + d] = Sigmoid(g[2 * H + d]) * std::tanh(c[n * H + d]);
      }
    EXPECT_LT(RelativeDifference(u.top[0]->ToFloat(), c), Tolerance(t)) << Name(t);
    EXPECT_LT(RelativeDifference(u.top[1]->ToFloat(), h), Tolerance(t)) << Name(t);
  }
}

// Three passes: sequences starting at step 0 (and again at step 2 in stream 0); sequences going
// on from the last pass's final state; after Reset, from zero.
TEST(Recurrent, LSTMMatchesTheReferenceAndCarriesItsState) {
  const int T = 4, N = 3, D = 5, H = 4, S = 2;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    Harness l(std::string(R"(name: "lstm" type: "LSTM" recurrent_param { num_output: 4 )") +
                  kFillers + "}",
              t, {{T, N, D}, {T, N}, {N, S}}, 1);
    const std::vector<Floats> w = l.Params();
    ASSERT_EQ(w.size(), 4u);
    const Floats xs = Random(N * S, 9);
    l.bottom[2]->FromFloat(xs);
    State s{Floats(N * H, 0.0f), Floats(N * H, 0.0f)};
    for (int pass = 0; pass < 3; ++pass) {
      const Floats x = Random(T * N * D, 10 + pass);
      Floats cont(T * N, 1.0f);
      if (pass == 0) {
        for (int n = 0; n < N; ++n) cont[n] = 0.0f;
        cont[2 * N] = 0.0f;
      }
      if (pass == 2) {
        static_cast<RecurrentLayer&>(*l.layer).Reset();
        s = State{Floats(N * H, 0.0f), Floats(N * H, 0.0f)};
      }
      l.bottom[0]->FromFloat(x);
      l.bottom[1]->FromFloat(cont);
      const Floats ref = LstmReference(x, cont, T, N, D, H, w, &xs, S, &s);
      EXPECT_LT(RelativeDifference(l.Run(), ref), Tolerance(t)) << Name(t) << " pass " << pass;
      EXPECT_EQ(l.top[0]->shape(), (std::vector<int>{T, N, H}));
    }
  }
}

TEST(Recurrent, LSTMExposedStates) {
  const int T = 3, N = 2, D = 3, H = 2;
  Harness l(std::string(R"(name: "lstmx" type: "LSTM" recurrent_param { num_output: 2
                           expose_hidden: true )") +
                kFillers + "}",
            DataType::kFloat32, {{T, N, D}, {T, N}, {1, N, H}, {1, N, H}}, 3);
  const Floats x = Random(T * N * D, 3), cont(T * N, 1.0f);
  State s{Random(N * H, 4), Random(N * H, 5)};
  l.bottom[0]->FromFloat(x);
  l.bottom[1]->FromFloat(cont);
  l.bottom[2]->FromFloat(s.h);
  l.bottom[3]->FromFloat(s.c);
  const Floats ref = LstmReference(x, cont, T, N, D, H, l.Params(), nullptr, 0, &s);
  EXPECT_LT(RelativeDifference(l.Run(), ref), 2e-5);
  EXPECT_LT(RelativeDifference(l.top[1]->ToFloat(), s.h), 2e-5);
  EXPECT_LT(RelativeDifference(l.top[2]->ToFloat(), s.c), 2e-5);
  // The exposed initial states are read each pass: no state is carried.
  EXPECT_LT(RelativeDifference(l.Run(), ref), 2e-5);
}

TEST(Recurrent, RNNMatchesTheReferenceAndCarriesItsState) {
  const int T = 3, N = 2, D = 3, H = 4, S = 3;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    Harness r(
        std::string(R"(name: "rnn" type: "RNN" recurrent_param { num_output: 4 )") + kFillers + "}",
        t, {{T, N, D}, {T, N}, {N, S}}, 1);
    const std::vector<Floats> w = r.Params();
    ASSERT_EQ(w.size(), 6u);
    const Floats xs = Random(N * S, 19);
    r.bottom[2]->FromFloat(xs);
    State s{Floats(N * H, 0.0f), {}};
    for (int pass = 0; pass < 2; ++pass) {
      const Floats x = Random(T * N * D, 20 + pass);
      Floats cont(T * N, 1.0f);
      if (pass == 0) cont[0] = cont[1] = 0.0f;
      r.bottom[0]->FromFloat(x);
      r.bottom[1]->FromFloat(cont);
      const Floats ref = RnnReference(x, cont, T, N, D, H, w, &xs, S, &s);
      EXPECT_LT(RelativeDifference(r.Run(), ref), Tolerance(t)) << Name(t) << " pass " << pass;
    }
  }
}

TEST(Recurrent, ParametersHaveBVLCsShapesAndOrder) {
  Harness l(R"(name: "l" type: "LSTM" recurrent_param { num_output: 3 })", DataType::kFloat32,
            {{2, 1, 5}, {2, 1}, {1, 4}}, 1);
  const std::vector<std::vector<int>> lstm{{12, 5}, {12}, {12, 4}, {12, 3}};
  ASSERT_EQ(l.layer->num_params(), 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(l.layer->param_blob(k).shape(), lstm[k]) << k;
  Harness r(R"(name: "r" type: "RNN" recurrent_param { num_output: 3 })", DataType::kFloat32,
            {{2, 1, 5}, {2, 1}}, 1);
  const std::vector<std::vector<int>> rnn{{3, 5}, {3}, {3, 3}, {3, 3}, {3}};
  ASSERT_EQ(r.layer->num_params(), 5);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(r.layer->param_blob(k).shape(), rnn[k]) << k;
}

const char* kLstmNet = R"(
  name: "seq"
  layer { name: "in" type: "Input" top: "x" top: "cont"
          input_param { shape { dim: 3 dim: 2 dim: 4 } shape { dim: 3 dim: 2 } } }
  layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h"
          recurrent_param { num_output: 3 } }
)";

// Weights in BVLC's layout (W_xc 12 × 4, b_c 12, W_hc 12 × 3) as a caffemodel holds them.
TEST(Recurrent, ABVLCCaffemodelLoadsAndSavesBack) {
  Net net(NetText(kLstmNet), Dev());
  const std::vector<Floats> w{Random(48, 30, -0.5f, 0.5f), Random(12, 31, -0.5f, 0.5f),
                              Random(36, 32, -0.5f, 0.5f)};
  const std::vector<std::vector<int>> shapes{{12, 4}, {12}, {12, 3}};
  caffe::NetParameter weights;
  caffe::LayerParameter* lp = weights.add_layer();
  lp->set_name("lstm");
  lp->set_type("LSTM");
  for (int k = 0; k < 3; ++k) {
    caffe::BlobProto* b = lp->add_blobs();
    for (int d : shapes[k]) b->mutable_shape()->add_dim(d);
    for (float v : w[k]) b->add_data(v);
  }
  net.CopyTrainedLayersFrom(weights);
  const Floats x = Random(24, 33), cont{0, 0, 1, 1, 1, 0};
  net.blob("x").FromFloat(x);
  net.blob("cont").FromFloat(cont);
  net.Forward();
  State s{Floats(6, 0.0f), Floats(6, 0.0f)};
  EXPECT_LT(RelativeDifference(net.blob("h").ToFloat(),
                               LstmReference(x, cont, 3, 2, 4, 3, w, nullptr, 0, &s)),
            2e-5);
  caffe::NetParameter saved;
  net.ToProto(&saved);
  const caffe::LayerParameter& back = saved.layer(1);
  ASSERT_EQ(back.blobs_size(), 3);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(Floats(back.blobs(k).data().begin(), back.blobs(k).data().end()), w[k]);
  // A blob of another shape is refused naming the layer and the blob.
  lp->mutable_blobs(2)->mutable_shape()->set_dim(1, 4);
  try {
    net.CopyTrainedLayersFrom(weights);
    ADD_FAILURE() << "a 12 × 4 W_hc was accepted";
  } catch (const NetError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'lstm', parameter blob 2"), std::string::npos)
        << e.what();
  }
}

/// The message of the error building `text` throws.
std::string BuildError(const std::string& text) {
  try {
    Net net(NetText(text), Dev());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Recurrent, BadParametersNameTheLayerAndTheField) {
  const std::string input = R"(layer { name: "in" type: "Input" top: "x" top: "bad_cont"
      top: "cont" top: "h0" input_param { shape { dim: 3 dim: 2 dim: 4 } shape { dim: 3 dim: 3 }
      shape { dim: 3 dim: 2 } shape { dim: 1 dim: 2 dim: 5 } } } )";
  const auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string e = BuildError(input + R"(layer { name: "l" type: "LSTM" bottom: "x"
      bottom: "cont" top: "h" recurrent_param { } })");
  EXPECT_TRUE(has(e, "layer 'l' (LSTM)") && has(e, "recurrent_param.num_output")) << e;
  e = BuildError(input + R"(layer { name: "l" type: "RNN" bottom: "x" bottom: "bad_cont"
      top: "o" recurrent_param { num_output: 2 } })");
  EXPECT_TRUE(has(e, "layer 'l' (RNN)") && has(e, "bottom 1 (cont)")) << e;
  e = BuildError(input + R"(layer { name: "l" type: "RNN" bottom: "x" bottom: "cont" bottom: "h0"
      top: "o" top: "hT" recurrent_param { num_output: 2 expose_hidden: true } })");
  EXPECT_TRUE(has(e, "layer 'l' (RNN)") && has(e, "bottom 2 (h_0)")) << e;
  e = BuildError(input + R"(layer { name: "l" type: "LSTM" bottom: "x" bottom: "cont" top: "h"
      recurrent_param { num_output: 2 expose_hidden: true } })");
  EXPECT_TRUE(has(e, "layer 'l' (LSTM)") && has(e, "bottom")) << e;
  e = BuildError(input + R"(layer { name: "l" type: "LSTM" bottom: "x" bottom: "cont" top: "h"
      compute_data_type: CAFFE_INT8_QUANTIZED recurrent_param { num_output: 2 } })");
  EXPECT_TRUE(has(e, "layer 'l' (LSTM)") && has(e, "does not compute in")) << e;
  e = BuildError(input + R"(layer { name: "u" type: "LSTMUnit" bottom: "h0" bottom: "h0"
      bottom: "cont" top: "c" top: "h" })");
  EXPECT_TRUE(has(e, "layer 'u' (LSTMUnit)") && has(e, "bottom 2 (cont)")) << e;
}

TEST(Recurrent, ExposedStateShapesAndTimeStepsAreChecked) {
  Harness l(R"(name: "lx" type: "LSTM" recurrent_param { num_output: 2 expose_hidden: true })",
            DataType::kFloat32, {{2, 1, 3}, {2, 1}, {1, 1, 2}, {1, 1, 2}}, 3);
  l.bottom[3]->Reshape({1, 1, 3});
  try {
    l.layer->Reshape(l.bottom, l.top);
    ADD_FAILURE() << "c_0 of 3 cells was accepted";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("bottom 3 (c_0)"), std::string::npos) << e.what();
  }
  l.bottom[3]->Reshape({1, 1, 2});
  l.bottom[0]->Reshape({3, 1, 3});
  l.bottom[1]->Reshape({3, 1});
  try {
    l.layer->Reshape(l.bottom, l.top);
    ADD_FAILURE() << "a new number of time steps was accepted";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("unrolled) for 2"), std::string::npos) << e.what();
  }
}

/// x (T × N × 3), cont, target (T × N × 1) → <type> → InnerProduct over axis 2 → EuclideanLoss.
std::string SequenceNet(const std::string& type) {
  return R"(name: "seq_)" + type + R"("
    layer { name: "in" type: "Input" top: "x" top: "cont" top: "target"
            input_param { shape { dim: 4 dim: 2 dim: 3 } shape { dim: 4 dim: 2 }
                          shape { dim: 4 dim: 2 dim: 1 } } }
    layer { name: "rec" type: ")" +
         type + R"(" bottom: "x" bottom: "cont" top: "seq"
            recurrent_param { num_output: 4 )" +
         kFillers + R"( } }
    layer { name: "out" type: "InnerProduct" bottom: "seq" top: "y"
            inner_product_param { num_output: 1 axis: 2 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "target" top: "loss"
            include { phase: TRAIN } })";
}

void FillSequence(Net& net) {
  const Floats x = Random(24, 40);
  Floats target(8), cont(8, 1.0f);
  cont[0] = cont[1] = 0.0f;
  for (int i = 0; i < 8; ++i) target[i] = 0.5f * std::sin(x[3 * i] + x[3 * i + 1]);
  net.blob("x").FromFloat(x);
  net.blob("cont").FromFloat(cont);
  if (net.has_blob("target")) net.blob("target").FromFloat(target);
}

// Each family trains in a small net (the loss falls under SGD); the layer's 3 (LSTM) or 5 (RNN)
// blobs are learnable once each; a TEST net sharing the weights computes the same sequence.
TEST(Recurrent, SmallNetsTrainAndShareWithTheTestNet) {
  for (const char* type : {"LSTM", "RNN"}) {
    caffe::SolverParameter sp;
    sp.set_type("SGD");
    sp.set_base_lr(0.1f);
    sp.set_lr_policy("fixed");
    sp.set_momentum(0.9f);
    *sp.mutable_net_param() = NetText(SequenceNet(type));
    Solver solver(sp, Dev());
    solver.set_log(nullptr);
    Net& net = solver.net();
    EXPECT_EQ(net.learnable_params().size(), std::string(type) == "LSTM" ? 5u : 7u) << type;
    FillSequence(net);
    const float before = net.Forward();
    solver.Step(40);
    const float after = net.Forward();
    EXPECT_LT(after, 0.5f * before) << type << ": loss " << before << " -> " << after;
    NetOptions test;
    test.phase = caffe::TEST;
    Net deploy(NetText(SequenceNet(type)), Dev(), test);
    deploy.ShareTrainedLayersWith(net);
    FillSequence(deploy);
    deploy.Forward();
    EXPECT_LT(RelativeDifference(deploy.blob("y").ToFloat(), net.blob("y").ToFloat()), 1e-5)
        << type;
  }
}

// `mpcaffe convert`'s placement: in an int8 variant the LSTM stays fp32 (the net converts around
// it) while the InnerProduct after it computes in int8; calibrated, it follows the fp32 net.
TEST(Recurrent, Int8VariantRunsTheLSTMInFloat) {
  const caffe::NetParameter p = NetText(SequenceNet("LSTM"));
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  EXPECT_EQ(typed.layer(1).compute_data_type(), caffe::CAFFE_FLOAT);
  EXPECT_EQ(typed.layer(2).compute_data_type(), caffe::CAFFE_INT8_QUANTIZED);
  NetOptions o;
  Net fp32(p, Dev(), o);
  FillSequence(fp32);
  fp32.Forward();
  caffe::NetParameter trained;
  fp32.ToProto(&trained);
  Net int8(typed, Dev(), o);
  int8.CopyTrainedLayersFrom(trained);
  CalibrateWithFloatVariant(int8, typed, o, 1, [](Net& f, int) { FillSequence(f); });
  FillSequence(int8);
  int8.Forward();
  const Blob& y = int8.blob("y");
  ASSERT_EQ(y.type(), DataType::kInt8Q);
  Floats real(y.count());
  quant::DequantizeTensor(y.host_data(), y.count(), int8.layer("out").TopParams(0), real.data());
  EXPECT_LT(RelativeDifference(real, fp32.blob("y").ToFloat()), 0.05);
}

}  // namespace
}  // namespace mpcaffe
