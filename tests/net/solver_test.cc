// tests/net/solver_test.cc — Net::Backward (loss weights, lr_mult 0, propagate_down, shared
// parameters, net-level finite differences) and the Solver (each update rule against a
// hand-computed step, lr policies, clipping, iter_size, snapshot/restore, the celsius net).
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "layers/layer.h"
#include "net/net.h"
#include "net/solver.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

template <typename M>
M Parse(const std::string& text) {
  M m;
  if (!google::protobuf::TextFormat::ParseFromString(text, &m)) throw Error("bad test proto: " + text);
  return m;
}

// y = w·x + b against a target t, loss (y − t)²/2 over a batch of 1: the 2-parameter problem.
const char* kLinearNet = R"(
  name: "linear"
  layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 1 dim: 1 } } }
  layer { name: "t" type: "Input" top: "t" input_param { shape { dim: 1 dim: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
          inner_product_param { num_output: 1 } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
)";

std::unique_ptr<Solver> LinearSolver(const std::string& extra, float w, float b) {
  caffe::SolverParameter sp = Parse<caffe::SolverParameter>(extra);
  *sp.mutable_net_param() = Parse<caffe::NetParameter>(kLinearNet);
  auto solver = std::make_unique<Solver>(sp, Dev());
  solver->set_log(nullptr);
  Net& net = solver->net();
  net.blob("x").FromFloat({2.0f});
  net.blob("t").FromFloat({1.0f});
  net.layer("ip").blobs()[0]->FromFloat({w});
  net.layer("ip").blobs()[1]->FromFloat({b});
  net.ParamsUpdated();
  return solver;
}

std::pair<float, float> WB(Solver& s) {
  return {s.net().layer("ip").ParamAsFloat(0)[0], s.net().layer("ip").ParamAsFloat(1)[0]};
}

TEST(NetBackward, LinearGradientsAndLossWeight) {
  caffe::NetParameter p = Parse<caffe::NetParameter>(kLinearNet);
  p.mutable_layer(3)->add_loss_weight(3.0f);
  NetOptions o;
  o.phase = caffe::TRAIN;
  Net net(p, Dev(), o);
  net.blob("x").FromFloat({2.0f});
  net.blob("t").FromFloat({1.0f});
  net.layer("ip").blobs()[0]->FromFloat({0.5f});
  net.layer("ip").blobs()[1]->FromFloat({0.25f});
  net.ParamsUpdated();
  net.ClearParamDiffs();
  const float loss = net.ForwardBackward();
  const float r = 0.5f * 2 + 0.25f - 1;  // residual 0.25
  EXPECT_NEAR(loss, 3 * r * r / 2, 1e-6);
  ASSERT_EQ(net.learnable_params().size(), 2u);
  EXPECT_NEAR(net.learnable_params()[0]->ToFloat().size(), 1u, 0);
  EXPECT_NEAR(static_cast<const float*>(net.learnable_params()[0]->host_diff())[0], 3 * r * 2, 1e-6);
  EXPECT_NEAR(static_cast<const float*>(net.learnable_params()[1]->host_diff())[0], 3 * r, 1e-6);
  // The Input layers and the target need no gradient.
  EXPECT_FALSE(net.layer_need_backward(net.layer_index("x")));
  EXPECT_TRUE(net.layer_need_backward(net.layer_index("ip")));
  EXPECT_FALSE(net.bottom_need_backward()[net.layer_index("ip")][0]);
}

TEST(NetBackward, MatchesFiniteDifferencesThroughAHiddenLayer) {
  const char* text = R"(
    name: "mlp" force_backward: true
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 3 dim: 4 } } }
    layer { name: "t" type: "Input" top: "t" input_param { shape { dim: 3 dim: 2 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
            inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 }
                                  bias_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "act" type: "TanH" bottom: "h" top: "h" }
    layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
            inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
  )";
  NetOptions o;
  o.phase = caffe::TRAIN;
  Net net(Parse<caffe::NetParameter>(text), Dev(), o);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(12), t(6);
  for (auto& v : x) v = u(rng);
  for (auto& v : t) v = u(rng);
  net.blob("x").FromFloat(x);
  net.blob("t").FromFloat(t);
  net.ClearParamDiffs();
  net.ForwardBackward();
  // force_backward: the input gets a gradient too.
  const std::vector<float> dx(static_cast<const float*>(net.blob("x").host_diff()),
                              static_cast<const float*>(net.blob("x").host_diff()) + 12);
  const float h = 1e-2f;
  for (int k = 0; k < 12; k += 5) {
    std::vector<float> xp = x, xm = x;
    xp[k] += h, xm[k] -= h;
    net.blob("x").FromFloat(xp);
    const float lp = net.Forward();
    net.blob("x").FromFloat(xm);
    const float lm = net.Forward();
    EXPECT_NEAR(dx[k], (lp - lm) / (2 * h), 2e-3) << k;
  }
  net.blob("x").FromFloat(x);
  for (size_t p = 0; p < net.learnable_params().size(); ++p) {
    Blob& b = *net.learnable_params()[p];
    const std::vector<float> g(static_cast<const float*>(b.host_diff()),
                               static_cast<const float*>(b.host_diff()) + b.count());
    std::vector<float> w = b.ToFloat();
    for (int k = 0; k < b.count(); k += 3) {
      const float orig = w[k];
      w[k] = orig + h;
      b.FromFloat(w);
      net.ParamsUpdated();
      const float lp = net.Forward();
      w[k] = orig - h;
      b.FromFloat(w);
      net.ParamsUpdated();
      const float lm = net.Forward();
      w[k] = orig;
      b.FromFloat(w);
      net.ParamsUpdated();
      EXPECT_NEAR(g[k], (lp - lm) / (2 * h), 2e-3) << net.learnable_param_names()[p] << "[" << k << "]";
    }
  }
}

TEST(NetBackward, LrMultZeroPropagateDownAndSharing) {
  const char* text = R"(
    name: "shared"
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "t" type: "Input" top: "t" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "a" type: "InnerProduct" bottom: "x" top: "h"
            param { name: "w" } param { lr_mult: 0 }
            inner_product_param { num_output: 3 weight_filler { type: "uniform" } } }
    layer { name: "b" type: "InnerProduct" bottom: "h" top: "y" propagate_down: false
            param { name: "w" } param { lr_mult: 2 decay_mult: 0 }
            inner_product_param { num_output: 3 } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
  )";
  NetOptions o;
  o.phase = caffe::TRAIN;
  Net net(Parse<caffe::NetParameter>(text), Dev(), o);
  // "w" is one blob; a's bias has lr_mult 0 (not learned): w, then b's bias.
  EXPECT_EQ(net.layer("a").blobs()[0].get(), net.layer("b").blobs()[0].get());
  ASSERT_EQ(net.learnable_params().size(), 3u);
  EXPECT_EQ(net.params_lr()[1], 0.0f);
  EXPECT_EQ(net.params_lr()[2], 2.0f);
  EXPECT_EQ(net.params_weight_decay()[2], 0.0f);
  // propagate_down: false on b, so nothing flows into a: a needs no backward at all.
  EXPECT_FALSE(net.bottom_need_backward()[net.layer_index("b")][0]);
  net.blob("x").FromFloat({1, 2, 3, -1, 0, 2});
  net.blob("t").FromFloat({0, 0, 0, 1, 1, 1});
  net.ClearParamDiffs();
  net.ForwardBackward();
  const std::vector<float> h = net.blob("h").ToFloat();
  const std::vector<float> y = net.blob("y").ToFloat();
  const std::vector<float> t = {0, 0, 0, 1, 1, 1};
  // dW (shared) comes from b only: Σ_n (y − t)_n,i h_n,j / num.
  const float* dw = static_cast<const float*>(net.layer("b").blobs()[0]->host_diff());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      float g = 0;
      for (int n = 0; n < 2; ++n) g += (y[n * 3 + i] - t[n * 3 + i]) * h[n * 3 + j] / 2;
      EXPECT_NEAR(dw[i * 3 + j], g, 1e-5);
    }
  const float* dbias_a = static_cast<const float*>(net.layer("a").blobs()[1]->host_diff());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(dbias_a[i], 0.0f);
}

// ---- Update rules ------------------------------------------------------------------------

struct Hand {  // BVLC's rules, written out for two scalars over two steps
  std::string type;
  float lr, mom, mom2 = 0.999f, delta = 1e-8f, rms = 0.99f, decay = 0;
  float h[2] = {0, 0}, u[2] = {0, 0};
  void Step(int iter, float* p, const float* g_in) {
    for (int i = 0; i < 2; ++i) {
      float g = g_in[i] + decay * p[i];
      float d;
      if (type == "SGD") {
        d = h[i] = mom * h[i] + lr * g;
      } else if (type == "Nesterov") {
        const float prev = h[i];
        h[i] = mom * h[i] + lr * g;
        d = (1 + mom) * h[i] - mom * prev;
      } else if (type == "AdaGrad") {
        h[i] += g * g;
        d = lr * g / (std::sqrt(h[i]) + delta);
      } else if (type == "RMSProp") {
        h[i] = rms * h[i] + (1 - rms) * g * g;
        d = lr * g / (std::sqrt(h[i]) + delta);
      } else if (type == "AdaDelta") {
        h[i] = mom * h[i] + (1 - mom) * g * g;
        const float up = g * std::sqrt((u[i] + delta) / (h[i] + delta));
        u[i] = mom * u[i] + (1 - mom) * up * up;
        d = lr * up;
      } else {
        h[i] = mom * h[i] + (1 - mom) * g;
        u[i] = mom2 * u[i] + (1 - mom2) * g * g;
        const float c = std::sqrt(1 - std::pow(mom2, iter + 1)) / (1 - std::pow(mom, iter + 1));
        d = lr * c * h[i] / (std::sqrt(u[i]) + delta);
      }
      p[i] -= d;
    }
  }
};

TEST(Solver, EachUpdateRuleMatchesAHandComputedStep) {
  for (const std::string type : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    const float mom = type == "AdaDelta" ? 0.95f : 0.9f;
    const float lr = type == "AdaDelta" ? 1.0f : 0.1f;
    std::ostringstream sp;
    sp << "type: '" << type << "' base_lr: " << lr << " momentum: " << mom
       << " lr_policy: 'fixed' weight_decay: 0.01 max_iter: 10";
    auto solver = LinearSolver(sp.str(), 0.5f, 0.25f);
    Hand hand{type, lr, mom};
    hand.decay = 0.01f;
    float p[2] = {0.5f, 0.25f};
    for (int it = 0; it < 3; ++it) {
      const float r = p[0] * 2 + p[1] - 1;
      const float g[2] = {r * 2, r};
      hand.Step(it, p, g);
      solver->Step(1);
      const auto [w, b] = WB(*solver);
      EXPECT_NEAR(w, p[0], 1e-5 * std::max(1.0f, std::fabs(p[0]))) << type << " iter " << it;
      EXPECT_NEAR(b, p[1], 1e-5 * std::max(1.0f, std::fabs(p[1]))) << type << " iter " << it;
    }
    EXPECT_EQ(solver->iter(), 3);
  }
}

TEST(Solver, L1DecayClippingAndIterSize) {
  // L1: g + decay·sign(w); clip: the joint L2 norm scaled to clip_gradients.
  auto s = LinearSolver("type: 'SGD' base_lr: 1 lr_policy: 'fixed' weight_decay: 0.1 "
                        "regularization_type: 'L1' clip_gradients: 0.1 iter_size: 2", 0.5f, -0.25f);
  const float r = 0.5f * 2 - 0.25f - 1;  // -0.25
  float g[2] = {r * 2 + 0.1f, r - 0.1f};  // iter_size 2 sums two equal passes, then divides by 2
  const float norm = std::sqrt(g[0] * g[0] + g[1] * g[1]);
  for (float& x : g) x *= 0.1f / norm;
  s->Step(1);
  const auto [w, b] = WB(*s);
  EXPECT_NEAR(w, 0.5f - g[0], 1e-6);
  EXPECT_NEAR(b, -0.25f - g[1], 1e-6);
}

TEST(Solver, LearningRatePolicies) {
  auto lr_at = [](const std::string& extra, int iter) {
    caffe::SolverParameter sp = Parse<caffe::SolverParameter>("base_lr: 0.1 max_iter: 100 " + extra);
    *sp.mutable_net_param() = Parse<caffe::NetParameter>(kLinearNet);
    Solver s(sp, Dev());
    s.set_log(nullptr);
    // Advance the counter through real (tiny) steps.
    s.Step(iter);
    return s.GetLearningRate();
  };
  EXPECT_FLOAT_EQ(lr_at("lr_policy: 'fixed'", 5), 0.1f);
  EXPECT_FLOAT_EQ(lr_at("lr_policy: 'step' gamma: 0.5 stepsize: 2", 5), 0.1f * 0.25f);
  EXPECT_FLOAT_EQ(lr_at("lr_policy: 'exp' gamma: 0.9", 3), 0.1f * 0.729f);
  EXPECT_NEAR(lr_at("lr_policy: 'inv' gamma: 0.1 power: 0.75", 4), 0.1 * std::pow(1.4, -0.75), 1e-7);
  EXPECT_FLOAT_EQ(lr_at("lr_policy: 'multistep' gamma: 0.1 stepvalue: 2 stepvalue: 4", 3), 0.01f);
  EXPECT_NEAR(lr_at("lr_policy: 'poly' power: 2", 10), 0.1 * 0.81, 1e-7);
  EXPECT_NEAR(lr_at("lr_policy: 'sigmoid' gamma: -0.5 stepsize: 4", 2), 0.1 / (1 + std::exp(-1.0)), 1e-7);
  EXPECT_THROW(lr_at("lr_policy: 'bogus'", 0), SolverError);
}

TEST(Solver, SnapshotRestoreContinuesIdentically) {
  char dir[] = "/tmp/mpcaffe_solver_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string sp = std::string("type: 'Adam' base_lr: 0.05 momentum: 0.9 lr_policy: 'step' "
                                     "gamma: 0.5 stepsize: 3 snapshot_prefix: '") + dir + "/lin'";
  auto full = LinearSolver(sp, 0.5f, 0.25f);
  full->Step(6);
  auto first = LinearSolver(sp, 0.5f, 0.25f);
  first->Step(3);
  const std::string state = first->Snapshot();
  EXPECT_EQ(state, std::string(dir) + "/lin_iter_3.solverstate");
  auto resumed = LinearSolver(sp, -3.0f, 7.0f);  // different start: the snapshot must win
  resumed->Restore(state);
  EXPECT_EQ(resumed->iter(), 3);
  resumed->Step(3);
  EXPECT_EQ(WB(*resumed), WB(*full));
  // A state of another solver type does not fit.
  auto sgd = LinearSolver("type: 'SGD' base_lr: 0.1 lr_policy: 'fixed'", 0, 0);
  EXPECT_THROW(sgd->Restore(state), SolverError);
  std::remove((std::string(dir) + "/lin_iter_3.solverstate").c_str());
  std::remove((std::string(dir) + "/lin_iter_3.caffemodel").c_str());
  rmdir(dir);
}

TEST(Solver, CelsiusNetLearnsFahrenheit) {
  // The paper's example: one InnerProduct learns F = 1.8·C + 32 (inputs and targets scaled by 1/100).
  const char* net = R"(
    name: "celsius"
    layer { name: "c" type: "Input" top: "c" input_param { shape { dim: 8 dim: 1 } } }
    layer { name: "f" type: "Input" top: "f" input_param { shape { dim: 8 dim: 1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "c" top: "y"
            inner_product_param { num_output: 1 weight_filler { type: "xavier" } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "f" top: "loss" }
  )";
  caffe::SolverParameter sp = Parse<caffe::SolverParameter>(
      "type: 'SGD' base_lr: 0.5 momentum: 0.9 lr_policy: 'fixed' max_iter: 300 test_iter: 1 "
      "test_interval: 300 test_initialization: false snapshot_after_train: false");
  *sp.mutable_net_param() = Parse<caffe::NetParameter>(net);
  Solver s(sp, Dev());
  std::ostringstream log;
  s.set_log(&log);
  std::vector<float> c, f;
  for (int i = 0; i < 8; ++i) {
    c.push_back((-40.0f + 20.0f * i) / 100);
    f.push_back((1.8f * (-40.0f + 20.0f * i) + 32) / 100);
  }
  s.net().blob("c").FromFloat(c);
  s.net().blob("f").FromFloat(f);
  s.test_nets()[0]->blob("c").FromFloat(c);
  s.test_nets()[0]->blob("f").FromFloat(f);
  s.Solve();
  EXPECT_NEAR(s.net().layer("ip").ParamAsFloat(0)[0], 1.8f, 1e-3);
  EXPECT_NEAR(s.net().layer("ip").ParamAsFloat(1)[0], 0.32f, 1e-3);
  // The test net shares the weights: its loss is the trained loss.
  EXPECT_LT(s.Test(0)[0], 1e-6);
  EXPECT_NE(log.str().find("Test net output #0: loss = "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("Optimization Done."), std::string::npos);
}

// The paper's Listing 2.2: its celsius net_float.prototxt (InnerProduct → fp32→fp32 Quantizer →
// EuclideanLoss) trained one random sample per step with the paper's Adam settings; the
// Quantizer passes the gradient straight through, also with its quantizers in PSEUDO mode.
TEST(Solver, PaperCelsiusFloatNetTrainsThroughTheQuantizer) {
  const std::string path = mpcaffe::test_support::SharedDir().string() +
                           "/models/paper_examples/celsius_farenheit/net_float.prototxt";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " not found";
  for (const auto mode : {quant::QuantizerMode::kPassive, quant::QuantizerMode::kPseudo}) {
    caffe::SolverParameter sp = Parse<caffe::SolverParameter>(
        "base_lr: 1.0 momentum: 0.99 weight_decay: 0.00005 lr_policy: 'inv' gamma: 0.01 "
        "power: 0.75 max_iter: 400 type: 'Adam' display: 0 snapshot_after_train: false");
    sp.set_train_net(path);
    Solver s(sp, Dev());
    s.set_log(nullptr);
    s.net().SetQuantMode(mode);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> pick(-273, 999);
    float first_loss = 0, last_loss = 0;
    const int iters = 400;  // of the paper's 2000: the slope is learned, the offset on its way
    for (int i = 0; i < iters; ++i) {
      const float c = static_cast<float>(pick(rng));
      s.net().blob("celsius").FromFloat({c});
      s.net().blob("farenheit").FromFloat({c * 1.8f + 32.0f});
      s.Step(1);
      if (i < 20) first_loss += s.smoothed_loss() / 20;
      if (i >= iters - 20) last_loss += s.smoothed_loss() / 20;
    }
    const float w = s.net().layer("neuron").ParamAsFloat(0)[0];
    const float b = s.net().layer("neuron").ParamAsFloat(1)[0];
    // From w = b = 0 (constant fillers): the gradient reached the InnerProduct through the
    // Quantizer, the slope is learned and the loss fell by more than 20×.
    EXPECT_NEAR(w, 1.8f, 0.06f) << "mode " << static_cast<int>(mode);
    EXPECT_GT(b, 5.0f) << "mode " << static_cast<int>(mode);
    EXPECT_LT(b, 40.0f) << "mode " << static_cast<int>(mode);
    EXPECT_LT(last_loss, first_loss * 0.05f) << "mode " << static_cast<int>(mode);
  }
}

TEST(Solver, ErrorsNameTheProblem) {
  caffe::SolverParameter sp = Parse<caffe::SolverParameter>("type: 'Momentum' base_lr: 0.1");
  *sp.mutable_net_param() = Parse<caffe::NetParameter>(kLinearNet);
  try {
    Solver s(sp, Dev());
    FAIL();
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("Momentum"), std::string::npos);
  }
  caffe::SolverParameter none = Parse<caffe::SolverParameter>("base_lr: 0.1");
  EXPECT_THROW(Solver(none, Dev()), SolverError);
}

}  // namespace
}  // namespace mpcaffe
