// tests/net/views_test.cc — inference views (net/net_memory.cc): Split and TEST-phase Dropout
// tops sharing their bottom's data, Concat inputs written by their producers straight into their
// slices of the output. Small nets of our own (an inception-style block, a SqueezeNet-style
// fire module, a residual block with a Split and a Dropout, a DenseNet block of Concats of
// Concats) with random weights: at optimizer
// level 1 every blob the user can read holds what the unoptimized net writes (fp32 within 1e-5
// relative; int8 bit-exact where the rounding points are the same), with fewer kernel launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "device/settings.h"
#include "layers/layer.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "tools/net_variants.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

using test_support::NetText;
using test_support::RelativeDifference;
using test_support::SineInput;

// 1×1, 1×1→3×3, 1×1→5×5 and 3×3 max pool→1×1 branches into a Concat (8 + 12 + 4 + 4 channels of
// 16×16: every slice starts at a multiple of 128 bytes in fp32, fp16 and int8), then a Dropout
// writing a new blob and a 1×1 convolution.
const char* kInception = R"(
name: "inception"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 6 dim: 16 dim: 16 } } }
layer { name: "stem" type: "Convolution" bottom: "data" top: "stem"
        convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "stem/relu" type: "ReLU" bottom: "stem" top: "stem" }
layer { name: "b1" type: "Convolution" bottom: "stem" top: "b1"
        convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "b1/relu" type: "ReLU" bottom: "b1" top: "b1" }
layer { name: "b3r" type: "Convolution" bottom: "stem" top: "b3r"
        convolution_param { num_output: 6 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "b3r/relu" type: "ReLU" bottom: "b3r" top: "b3r" }
layer { name: "b3" type: "Convolution" bottom: "b3r" top: "b3"
        convolution_param { num_output: 12 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "b3/relu" type: "ReLU" bottom: "b3" top: "b3" }
layer { name: "b5r" type: "Convolution" bottom: "stem" top: "b5r"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "b5r/relu" type: "ReLU" bottom: "b5r" top: "b5r" }
layer { name: "b5" type: "Convolution" bottom: "b5r" top: "b5"
        convolution_param { num_output: 4 kernel_size: 5 pad: 2 weight_filler { type: "msra" } } }
layer { name: "b5/relu" type: "ReLU" bottom: "b5" top: "b5" }
layer { name: "pool" type: "Pooling" bottom: "stem" top: "pool"
        pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "pp" type: "Convolution" bottom: "pool" top: "pp"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "pp/relu" type: "ReLU" bottom: "pp" top: "pp" }
layer { name: "cat" type: "Concat" bottom: "b1" bottom: "b3" bottom: "b5" bottom: "pp" top: "cat" }
layer { name: "drop" type: "Dropout" bottom: "cat" top: "drop" dropout_param { dropout_ratio: 0.4 } }
layer { name: "head" type: "Convolution" bottom: "drop" top: "head"
        convolution_param { num_output: 6 kernel_size: 1 weight_filler { type: "msra" } } }
)";

// SqueezeNet's fire module: a 1×1 squeeze read by a 1×1 and a 3×3 expand (a Split), their
// ReLUs, a Concat; twice (the second followed by an in-place Dropout, as SqueezeNet's fire9),
// then a 1×1 convolution.
const char* kFire = R"(
name: "fire"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 8 dim: 16 dim: 16 } } }
layer { name: "f1/squeeze" type: "Convolution" bottom: "data" top: "f1/squeeze"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" }
                            bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "f1/squeeze/relu" type: "ReLU" bottom: "f1/squeeze" top: "f1/squeeze" }
layer { name: "f1/e1" type: "Convolution" bottom: "f1/squeeze" top: "f1/e1"
        convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "f1/e1/relu" type: "ReLU" bottom: "f1/e1" top: "f1/e1" }
layer { name: "f1/e3" type: "Convolution" bottom: "f1/squeeze" top: "f1/e3"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "f1/e3/relu" type: "ReLU" bottom: "f1/e3" top: "f1/e3" }
layer { name: "f1/cat" type: "Concat" bottom: "f1/e1" bottom: "f1/e3" top: "f1/cat" }
layer { name: "f2/squeeze" type: "Convolution" bottom: "f1/cat" top: "f2/squeeze"
        convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "f2/squeeze/relu" type: "ReLU" bottom: "f2/squeeze" top: "f2/squeeze" }
layer { name: "f2/e1" type: "Convolution" bottom: "f2/squeeze" top: "f2/e1"
        convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: "msra" } } }
layer { name: "f2/e1/relu" type: "ReLU" bottom: "f2/e1" top: "f2/e1" }
layer { name: "f2/e3" type: "Convolution" bottom: "f2/squeeze" top: "f2/e3"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "f2/e3/relu" type: "ReLU" bottom: "f2/e3" top: "f2/e3" }
layer { name: "f2/cat" type: "Concat" bottom: "f2/e1" bottom: "f2/e3" top: "f2/cat" }
layer { name: "f2/drop" type: "Dropout" bottom: "f2/cat" top: "f2/cat" }
layer { name: "out" type: "Convolution" bottom: "f2/cat" top: "out"
        convolution_param { num_output: 5 kernel_size: 1 weight_filler { type: "msra" } } }
)";

// A residual block: the block input is read by the branch and by the sum (a Split), then a
// Dropout writing a new blob, a Flatten, a Reshape and an InnerProduct.
const char* kResidual = R"(
name: "residual"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "c1/relu" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "a" type: "Convolution" bottom: "c1" top: "a"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "a/relu" type: "ReLU" bottom: "a" top: "a" }
layer { name: "b" type: "Convolution" bottom: "a" top: "b"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "sum" type: "Eltwise" bottom: "b" bottom: "c1" top: "sum" }
layer { name: "sum/relu" type: "ReLU" bottom: "sum" top: "sum" }
layer { name: "drop" type: "Dropout" bottom: "sum" top: "drop" }
layer { name: "flat" type: "Flatten" bottom: "drop" top: "flat" }
layer { name: "shape" type: "Reshape" bottom: "flat" top: "shape"
        reshape_param { shape { dim: 0 dim: 8 dim: -1 } } }
layer { name: "fc" type: "InnerProduct" bottom: "shape" top: "fc"
        inner_product_param { num_output: 5 weight_filler { type: "msra" } } }
)";

// A dense block (DenseNet): three layers, each a pre-activation BatchNorm, Scale and ReLU into
// a new blob and a 3×3 convolution whose 8 channels are concatenated onto the block's running
// output; the running output is read by the next layer and by the next Concat (a Split), so each
// Concat takes the one before it through a Split's top. Then a 1×1 transition convolution.
const std::string kDense = [] {
  std::string s = R"(
name: "dense"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 16 dim: 16 } } }
layer { name: "stem" type: "Convolution" bottom: "data" top: "stem"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "gaussian" std: 0.1 } } })";
  std::string x = "stem";
  for (int k = 1; k <= 3; ++k) {
    const std::string l = "l" + std::to_string(k), cat = "cat" + std::to_string(k);
    s += "\nlayer { name: '" + l + "/bn' type: 'BatchNorm' bottom: '" + x + "' top: '" + l +
         "/bn' batch_norm_param { use_global_stats: true } }";
    s += "\nlayer { name: '" + l + "/scale' type: 'Scale' bottom: '" + l + "/bn' top: '" + l +
         "/bn' scale_param { bias_term: true } }";
    s += "\nlayer { name: '" + l + "/relu' type: 'ReLU' bottom: '" + l + "/bn' top: '" + l +
         "/bn' }";
    s += "\nlayer { name: '" + l + "/conv' type: 'Convolution' bottom: '" + l + "/bn' top: '" +
         l + "/conv' convolution_param { num_output: 8 kernel_size: 3 pad: 1 "
         "weight_filler { type: 'msra' } } }";
    // The last Concat takes the new channels first: the one before it then sits at an offset
    // in the block's output, and so do its own inputs.
    const std::string prev = "bottom: '" + x + "'", added = "bottom: '" + l + "/conv'";
    s += "\nlayer { name: '" + cat + "' type: 'Concat' " +
         (k < 3 ? prev + " " + added : added + " " + prev) + " top: '" + cat + "' }";
    x = cat;
  }
  return s + "\nlayer { name: 'trans' type: 'Convolution' bottom: '" + x +
         "' top: 'trans' convolution_param { num_output: 6 kernel_size: 1 "
         "weight_filler { type: 'msra' } } }\n";
}();

struct Case {
  const char* name;
  const char* text;
};
// The inception block on 7×7 planes: its slices start at channels 8, 20 and 24, bytes 1568,
// 3920 and 4704 in fp32 (392, 980 and 1176 in int8), none a multiple of OpenCL's 128-byte base
// address alignment: those inputs keep their own memory and are copied into their slices.
const std::string kInception7 = [] {
  std::string s = kInception;
  const std::string from = "dim: 16 dim: 16", to = "dim: 7 dim: 7";
  s.replace(s.find(from), from.size(), to);
  return s;
}();
const Case kCases[] = {{"inception", kInception},
                       {"fire", kFire},
                       {"residual", kResidual},
                       {"inception 7x7", kInception7.c_str()},
                       {"dense block", kDense.c_str()}};

/// A net at `optimize` with `trained`'s weights and ranges, after one forward pass; the kernel
/// launches of a second pass in `launches`.
std::unique_ptr<Net> RunAt(const caffe::NetParameter& param, int optimize,
                         const caffe::NetParameter& trained, uint64_t* launches = nullptr,
                         int reduced_memory = -1) {
  NetOptions o;
  o.optimize = optimize;
  o.reduced_memory = reduced_memory;
  auto net = std::make_unique<Net>(param, Dev(), o);
  net->CopyTrainedLayersFrom(trained);
  Blob& in = *net->input_blobs()[0];
  in.FromFloat(SineInput(in));
  net->Forward();
  if (launches) {
    in.FromFloat(SineInput(in));  // under reduced memory the input's memory is reused after use
    const DeviceCounters before = GetDeviceCounters();
    net->Forward();
    *launches = GetDeviceCounters().launches - before.launches;
  }
  return net;
}

/// Layers of a type that ran as views (of those that can: an in-place layer has nothing to share).
int Views(const Net& net, const std::string& type, int* of = nullptr) {
  int views = 0, n = 0;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (net.layers()[i]->type() != type) continue;
    const auto& lp = net.layers()[i]->layer_param();
    if (lp.bottom_size() == 1 && lp.top_size() == 1 && lp.bottom(0) == lp.top(0)) continue;
    ++n;
    views += net.runs_as_view(int(i));
  }
  if (of) *of = n;
  return views;
}

/// The observed range of quantizer `name` in `net`.
std::pair<double, double> QuantRange(Net& net, const std::string& name) {
  caffe::NetParameter r;
  net.RangesToProto(&r);
  for (const auto& q : r.quantizer())
    if (q.name() == name) return std::make_pair(q.observed_min(), q.observed_max());
  ADD_FAILURE() << "no range for " << name;
  return std::make_pair(0.0, 0.0);
}

/// Blob `out` of an int8 net as real values (by the last layer's top quantization).
std::vector<float> RealOutput(Net& net, const std::string& out) {
  std::vector<float> v = net.blob(out).ToFloat();
  if (!IsQuantized(net.blob(out).type())) return v;
  const Affine q = net.layers().back()->TopAffine(0);
  for (float& x : v) x = q.scale * (x - float(q.zero_point));
  return v;
}

/// Random weights, saved (the same values for every variant).
caffe::NetParameter Weights(const caffe::NetParameter& p) {
  NetOptions off;
  off.optimize = 0;
  Net source(p, Dev(), off);
  caffe::NetParameter trained;
  source.ToProto(&trained);
  return trained;
}

TEST(Views, Fp32EveryBlobMatchesTheUnoptimizedNetWithFewerLaunches) {
  for (const Case& c : kCases) {
    const caffe::NetParameter p = NetText(c.text);
    const caffe::NetParameter trained = Weights(p);
    for (int reduced : {0, 1}) {
      uint64_t l0 = 0, l1 = 0;
      auto off = RunAt(p, 0, trained, &l0, reduced);
      auto on = RunAt(p, 1, trained, &l1, reduced);
      int concats = 0, splits = 0, drops = 0, concat_inputs = 0;
      const int concat_views = Views(*on, "Concat", &concats);
      const int split_views = Views(*on, "Split", &splits);
      const int drop_views = Views(*on, "Dropout", &drops);
      int flats = 0, reshapes = 0;
      EXPECT_EQ(Views(*on, "Flatten", &flats), flats) << c.name;
      EXPECT_EQ(Views(*on, "Reshape", &reshapes), reshapes) << c.name;
      for (const auto& l : on->layers())
        if (l->type() == std::string("Concat")) concat_inputs += l->layer_param().bottom_size();
      EXPECT_EQ(concat_views, concats) << c.name;
      EXPECT_EQ(split_views, splits) << c.name;
      EXPECT_EQ(drop_views, drops) << c.name;
      EXPECT_EQ(Views(*off, "Concat") + Views(*off, "Split") + Views(*off, "Dropout") +
                    Views(*off, "Flatten") + Views(*off, "Reshape"),
                0);
      // Every blob the user can read (reduced memory: the outputs) holds the unoptimized value.
      double worst = 0;
      std::string worst_blob;
      for (const std::string& name : off->blob_names()) {
        if (reduced && name != off->output_blobs()[0]->name()) continue;
        ASSERT_TRUE(on->has_blob(name)) << c.name << ": " << name;
        const double rel = RelativeDifference(on->blob(name).ToFloat(), off->blob(name).ToFloat());
        if (rel >= worst) worst = rel, worst_blob = name;
      }
      std::printf("%s fp32%s: %d/%d Concat, %d/%d Split, %d/%d Dropout, %d/%d Flatten, %d/%d "
                  "Reshape as views; launches %llu -> %llu; largest relative difference %.3g "
                  "('%s')\n",
                  c.name, reduced ? " reduced memory" : "", concat_views, concats, split_views,
                  splits, drop_views, drops, Views(*on, "Flatten"), flats, Views(*on, "Reshape"),
                  reshapes, (unsigned long long)l0, (unsigned long long)l1, worst,
                  worst_blob.c_str());
      EXPECT_LT(worst, 1e-5) << c.name << " blob " << worst_blob;
      // Each Concat input's copy kernel is gone (and the fused ReLUs' launches).
      EXPECT_LE(l1 + concat_inputs, l0) << c.name;
      // A second pass after the user changes the input follows it (views stay in place).
      for (Net* n : {off.get(), on.get()}) {
        Blob& in = *n->input_blobs()[0];
        std::vector<float> x = SineInput(in);
        for (float& v : x) v = -0.5f * v + 0.1f;
        in.FromFloat(x);
        n->Forward();
      }
      const std::string out = off->output_blobs()[0]->name();
      EXPECT_LT(RelativeDifference(on->blob(out).ToFloat(), off->blob(out).ToFloat()), 1e-5);
    }
  }
}

// A Concat whose slices do not all start where the device can place a buffer: the first input
// is a view of its slice, the others keep their memory and are copied into theirs by the net
// (no Concat kernel), and the top holds what the Concat writes (the kCases loops above check
// every blob's values and the launches).
TEST(Views, ConcatCopiesOnlyTheSlicesTheDeviceCannotPlace) {
  const caffe::NetParameter p = NetText(kInception7);
  const caffe::NetParameter trained = Weights(p);
  auto off = RunAt(p, 0, trained);
  auto on = RunAt(p, 1, trained);
  ASSERT_EQ(Views(*on, "Concat"), 1);
  const size_t align = Dev().info().sub_memory_align;
  size_t offset = 0;
  int placed = 0, copied = 0;
  for (const char* b : {"b1", "b3", "b5", "pp"}) {
    const bool view = on->blob(b).data_memory()->parent() != nullptr;
    EXPECT_EQ(view, offset % align == 0) << b << " at byte " << offset;
    (view ? placed : copied) += 1;
    offset += on->blob(b).bytes();
  }
  EXPECT_GE(placed, 1);
  EXPECT_GE(copied, 1) << "no slice is unplaced at this alignment (" << align << " bytes)";
  EXPECT_LT(RelativeDifference(on->blob("cat").ToFloat(), off->blob("cat").ToFloat()), 1e-5);
}

// At batch 2 a channel slice is two strided pieces: the Concat copies (and is still right).
TEST(Views, ConcatOfStridedSlicesCopies) {
  caffe::NetParameter p = NetText(kInception);
  p.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, 2);
  const caffe::NetParameter trained = Weights(p);
  auto off = RunAt(p, 0, trained);
  auto on = RunAt(p, 1, trained);
  EXPECT_EQ(Views(*on, "Concat"), 0);
  EXPECT_EQ(Views(*on, "Dropout"), 1);
  EXPECT_LT(RelativeDifference(on->blob("head").ToFloat(), off->blob("head").ToFloat()), 1e-5);
  // Back to batch 1: the Concat becomes a view after the reshape.
  for (Net* n : {off.get(), on.get()}) {
    Blob& in = *n->input_blobs()[0];
    in.Reshape({1, 6, 16, 16});
    n->Reshape();
    in.FromFloat(SineInput(in));
    n->Forward();
  }
  EXPECT_EQ(Views(*on, "Concat"), 1);
  EXPECT_LT(RelativeDifference(on->blob("head").ToFloat(), off->blob("head").ToFloat()), 1e-5);
}

// BVLC's Net::Forward reshapes every layer for its bottoms: an input blob reshaped by the caller
// (pycaffe's net.blobs['data'].reshape(...) then net.forward()) gives every blob the new batch,
// growing and shrinking, with and without views and reduced memory, and the values of a net
// built at that batch.
TEST(Views, ForwardReshapesForAResizedInput) {
  const caffe::NetParameter p = NetText(kInception);
  const caffe::NetParameter trained = Weights(p);
  for (int optimize : {0, 1}) {
    for (int reduced : {0, 1}) {
      NetOptions o;
      o.optimize = optimize;
      o.reduced_memory = reduced;
      Net net(p, Dev(), o);
      net.CopyTrainedLayersFrom(trained);
      for (int batch : {3, 1, 2}) {
        Blob& in = *net.input_blobs()[0];
        in.Reshape({batch, 6, 16, 16});
        in.FromFloat(SineInput(in));
        net.Forward();
        caffe::NetParameter q = p;
        q.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, batch);
        auto fresh = RunAt(q, optimize, trained, nullptr, reduced);
        for (const Blob* top : net.output_blobs()) {
          SCOPED_TRACE("optimize " + std::to_string(optimize) + " reduced " +
                       std::to_string(reduced) + " batch " + std::to_string(batch) + " " +
                       top->name());
          EXPECT_EQ(top->shape(), fresh->blob(top->name()).shape());
          EXPECT_LT(RelativeDifference(top->ToFloat(), fresh->blob(top->name()).ToFloat()), 1e-6);
        }
        for (const auto& name : {"stem", "b1", "cat"}) {
          ASSERT_TRUE(net.has_blob(name)) << name;
          EXPECT_EQ(net.blob(name).shape()[0], batch) << name;
        }
      }
    }
  }
}

/// The calibrated ranges of `p` (an observing fp32 pass over the test input).
caffe::NetParameter Calibrated(const caffe::NetParameter& p) {
  NetOptions off;
  off.optimize = 0;
  Net observe(p, Dev(), off);
  observe.SetQuantMode(quant::QuantizerMode::kObserve);
  Blob& in = *observe.input_blobs()[0];
  in.FromFloat(SineInput(in));
  observe.Forward();
  caffe::NetParameter trained;
  observe.ToProto(&trained);
  return trained;
}

// int8. With calibrated ranges a Split's tops have their bottom's range (its consumers observed
// the same values), so the Splits are views; a Concat's inputs have ranges of their own, so its
// requantizing copy stays. With one range for every activation (as a calibration that gives a
// Concat's inputs its output's range would), the Concats are views too and the optimized net
// is bit-exact against the unoptimized one (no fusion removes a rounding step then).
TEST(Views, Int8SplitsAlwaysConcatsWhenTheyShareTheScaleBitExact) {
  for (const Case& c : kCases) {
    const caffe::NetParameter p = NetText(c.text);
    const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
    caffe::NetParameter trained = Calibrated(p);
    {
      auto off = RunAt(typed, 0, trained);
      auto on = RunAt(typed, 1, trained);
      int splits = 0, concats = 0;
      EXPECT_EQ(Views(*on, "Split", &splits), splits) << c.name;
      Views(*on, "Concat", &concats);
      EXPECT_EQ(Views(*on, "Concat"), 0) << c.name << ": calibrated inputs have other scales";
      const std::string out = off->output_blobs()[0]->name();
      std::printf("%s int8 calibrated: %d/%d Split as views, Concats copy; output difference %.3g "
                  "of its range\n",
                  c.name, Views(*on, "Split"), splits,
                  RelativeDifference(on->blob(out).ToFloat(), off->blob(out).ToFloat()));
    }
    for (auto& q : *trained.mutable_quantizer()) {
      if (q.name().find("/blob") != std::string::npos) continue;  // weights keep theirs
      q.set_observed_min(-2.0);
      q.set_observed_max(2.0);
    }
    uint64_t l0 = 0, l1 = 0;
    auto off = RunAt(typed, 0, trained, &l0);
    auto on = RunAt(typed, 1, trained, &l1);
    int concats = 0, splits = 0, drops = 0;
    EXPECT_EQ(Views(*on, "Concat", &concats), concats) << c.name;
    EXPECT_EQ(Views(*on, "Split", &splits), splits) << c.name;
    EXPECT_EQ(Views(*on, "Dropout", &drops), drops) << c.name;
    int flats = 0, reshapes = 0;
    EXPECT_EQ(Views(*on, "Flatten", &flats), flats) << c.name;
    EXPECT_EQ(Views(*on, "Reshape", &reshapes), reshapes) << c.name;
    int differing = 0;
    for (const std::string& name : off->blob_names()) {
      ASSERT_TRUE(on->has_blob(name)) << name;
      const std::vector<float> a = on->blob(name).ToFloat(), b = off->blob(name).ToFloat();
      if (a == b) continue;
      ++differing;
      ADD_FAILURE() << c.name << ": int8 blob '" << name << "' differs";
    }
    std::printf("%s int8 one range: %d/%d Concat, %d/%d Split, %d/%d Dropout as views; launches "
                "%llu -> %llu; %d blobs differ\n",
                c.name, Views(*on, "Concat"), concats, Views(*on, "Split"), splits,
                Views(*on, "Dropout"), drops, (unsigned long long)l0, (unsigned long long)l1,
                differing);
    EXPECT_LT(l1, l0) << c.name;
  }
}

// fp16 and int16 (one range for every activation): the views are on and every blob is what the
// unoptimized net writes, bit for bit.
TEST(Views, Fp16AndInt16AreBitExact) {
  for (DataType t : {DataType::kFloat16, DataType::kInt16Q}) {
    if (t == DataType::kFloat16 && !Dev().info().fp16) {
      std::printf("fp16 part skipped: %s has no cl_khr_fp16\n", Dev().Describe().c_str());
      continue;
    }
    for (const Case& c : kCases) {
      // The optimizer runs the dense block's BatchNorm, Scale and ReLU as one kernel of float
      // factors composed on the host, where the unoptimized net rounds to half after the
      // BatchNorm's own device-folded factors and again after the Scale: not the same fp16 bits
      // (tests/net/optimizer_test.cc holds that fusion to the unfused layers). Its views are
      // checked in fp32, int8 and int16.
      if (t == DataType::kFloat16 && c.text == kDense.c_str()) continue;
      const caffe::NetParameter p = NetText(c.text);
      const caffe::NetParameter typed = tools::TypedVariant(p, t, Dev());
      caffe::NetParameter trained = Calibrated(p);
      for (auto& q : *trained.mutable_quantizer()) {
        if (q.name().find("/blob") != std::string::npos) continue;
        q.set_observed_min(-2.0);
        q.set_observed_max(2.0);
      }
      auto off = RunAt(typed, 0, trained);
      auto on = RunAt(typed, 1, trained);
      int concats = 0, splits = 0;
      EXPECT_EQ(Views(*on, "Concat", &concats), concats) << c.name << " " << Name(t);
      EXPECT_EQ(Views(*on, "Split", &splits), splits) << c.name << " " << Name(t);
      for (const std::string& name : off->blob_names())
        EXPECT_EQ(on->blob(name).ToFloat(), off->blob(name).ToFloat())
            << c.name << " " << Name(t) << ": blob '" << name << "' differs";
    }
  }
}

/// The inception block in int8, every activation's range [-2, 2] (its Concat a view at level
/// 1): the unoptimized net and the level-1 one, after one pass each.
std::pair<std::unique_ptr<Net>, std::unique_ptr<Net>> Int8InceptionOneRange() {
  const caffe::NetParameter p = NetText(kInception);
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  caffe::NetParameter trained = Calibrated(p);
  for (auto& q : *trained.mutable_quantizer()) {
    if (q.name().find("/blob") != std::string::npos) continue;
    q.set_observed_min(-2.0);
    q.set_observed_max(2.0);
  }
  return {RunAt(typed, 0, trained), RunAt(typed, 1, trained)};
}

// The views are decided again when a quantizer of a live net changes (Net::UpdateViews keeps
// its answer only while every quantizer and shape stands still): a Concat running as a view
// whose input range is then set apart from its output's requantizes that input from the next
// pass on, bit for bit as the unoptimized net given the same range, and runs as a view again
// once the ranges agree.
TEST(Views, Int8ConcatFollowsARangeChangedBetweenPasses) {
  auto nets = Int8InceptionOneRange();  // lambdas below capture them: no structured binding
  std::unique_ptr<Net>& off = nets.first;
  std::unique_ptr<Net>& on = nets.second;
  ASSERT_EQ(Views(*on, "Concat"), 1);
  auto concat_input = [](Net& net) -> quant::Quantizer& {
    for (const auto& l : net.layers())
      if (std::string(l->type()) == "Concat") return l->bottom_quantizer(0);
    throw std::runtime_error("no Concat");
  };
  auto same_blobs = [&](const char* when) {
    for (const std::string& name : off->blob_names())
      EXPECT_EQ(on->blob(name).ToFloat(), off->blob(name).ToFloat())
          << when << ": blob '" << name << "' differs";
  };
  for (const double half : {5.0, 2.0}) {  // apart from the output's [-2, 2], then the same
    for (Net* net : {off.get(), on.get()}) {
      concat_input(*net).SetObserved(-half, half);
      Blob& in = *net->input_blobs()[0];
      in.FromFloat(SineInput(in));
      net->Forward();
    }
    EXPECT_EQ(Views(*on, "Concat"), half == 2.0 ? 1 : 0) << "input range +-" << half;
    same_blobs(half == 2.0 ? "ranges agreeing again" : "input range apart");
  }
}

// A convolution's kernels follow its quantizers changed between passes of a live net
// (Prepare skips rebuilding them only while every quantizer, shape and fused layer stands
// still: PrepareStamp): the 3x3 branch's output range set to [-3, 3] on its convolution and
// ReLU (fused into it at level 1), every blob as the unoptimized net given the same ranges.
TEST(Views, Int8ConvolutionFollowsARangeChangedBetweenPasses) {
  auto nets = Int8InceptionOneRange();  // lambdas below capture them: no structured binding
  std::unique_ptr<Net>& off = nets.first;
  std::unique_ptr<Net>& on = nets.second;
  const std::vector<float> before = on->blob("b3").ToFloat();
  for (Net* net : {off.get(), on.get()}) {
    for (const auto& l : net->layers()) {
      if (l->name() == "b3") l->top_quantizer(0).SetObserved(-3.0, 3.0);
      if (l->name() == "b3/relu") {
        l->bottom_quantizer(0).SetObserved(-3.0, 3.0);
        l->top_quantizer(0).SetObserved(-3.0, 3.0);
      }
    }
    Blob& in = *net->input_blobs()[0];
    in.FromFloat(SineInput(in));
    net->Forward();
  }
  EXPECT_NE(on->blob("b3").ToFloat(), before) << "the new range changed no code";
  for (const std::string& name : off->blob_names())
    EXPECT_EQ(on->blob(name).ToFloat(), off->blob(name).ToFloat())
        << "blob '" << name << "' differs";
}

// While quantizers observe (calibration), every layer runs: the ranges of a Split's and a
// Concat's quantizers are the ones the unoptimized net records.
TEST(Views, ObservingNetRunsEveryCopy) {
  const caffe::NetParameter p = NetText(kFire);
  const caffe::NetParameter want = Calibrated(p);
  NetOptions o;
  o.optimize = 1;
  Net observe(p, Dev(), o);
  observe.SetQuantMode(quant::QuantizerMode::kObserve);
  Blob& in = *observe.input_blobs()[0];
  in.FromFloat(SineInput(in));
  observe.Forward();
  EXPECT_EQ(Views(observe, "Concat") + Views(observe, "Split"), 0);
  caffe::NetParameter got;
  observe.ToProto(&got);
  ASSERT_EQ(got.quantizer_size(), want.quantizer_size());
  for (int i = 0; i < got.quantizer_size(); ++i) {
    EXPECT_EQ(got.quantizer(i).name(), want.quantizer(i).name());
    EXPECT_EQ(got.quantizer(i).observed_min(), want.quantizer(i).observed_min())
        << got.quantizer(i).name();
    EXPECT_EQ(got.quantizer(i).observed_max(), want.quantizer(i).observed_max())
        << got.quantizer(i).name();
  }
}

// int8 calibration (CalibrateWithFloatVariant) gives a Concat's inputs its output's range when it
// chooses every range involved (net/net_quantization.cc): at optimizer level 1 the Concats run
// as views. Against the same net with separate ranges (requantizing copies) the first Concat's
// output moves by at most one quantization step (one rounding instead of two), and the net's
// output stays about as close to the fp32 net's (printed). A range the user gave for one
// producer keeps that Concat's ranges apart (and its copy).
TEST(Views, Int8CalibrationSharesConcatRanges) {
  struct Shared {
    const Case* c;
    const char* first_concat;  // read by nothing quantized before it
    const char* producer;      // the top quantizer of a producer not holding the maximum
  };
  const Shared cases[] = {{&kCases[0], "cat", "pp/relu/top0"},
                          {&kCases[1], "f1/cat", "f1/e3/relu/top0"}};
  for (const Shared& s : cases) {
    const caffe::NetParameter p = NetText(s.c->text);
    const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
    const caffe::NetParameter weights = Weights(p);
    auto calibrated = [&](int optimize, const caffe::NetParameter& given) {
      NetOptions o;
      o.optimize = optimize;
      auto net = std::make_unique<Net>(typed, Dev(), o);
      net->CopyTrainedLayersFrom(weights);
      net->CopyTrainedLayersFrom(given);
      Blob& in = *net->input_blobs()[0];
      in.FromFloat(SineInput(in));
      EXPECT_GT(CalibrateWithFloatVariant(*net, typed, o), 0);
      net->Forward();
      return net;
    };
    const std::string cat_top = std::string(s.first_concat) + "/top0";
    auto shared = calibrated(1, caffe::NetParameter());
    // Separate ranges: calibrated at level 0 (no views, so no sharing), loaded at level 1 (the
    // same fusions as `shared`; a loaded range is never changed).
    caffe::NetParameter separate;
    calibrated(0, caffe::NetParameter())->RangesToProto(&separate);
    caffe::NetParameter loaded = weights;
    *loaded.mutable_quantizer() = separate.quantizer();
    auto apart = RunAt(typed, 1, loaded);
    int concats = 0;
    EXPECT_EQ(Views(*shared, "Concat", &concats), concats) << s.c->name;
    EXPECT_EQ(Views(*apart, "Concat"), 0) << s.c->name;
    EXPECT_EQ(QuantRange(*shared, s.producer), QuantRange(*shared, cat_top)) << s.c->name;
    EXPECT_NE(QuantRange(*apart, s.producer), QuantRange(*apart, cat_top)) << s.c->name;
    ASSERT_EQ(QuantRange(*shared, cat_top), QuantRange(*apart, cat_top)) << s.c->name;
    // Stored integers (ToFloat of a quantized blob), on the same grid in both nets.
    const std::vector<float> a = shared->blob(s.first_concat).ToFloat();
    const std::vector<float> b = apart->blob(s.first_concat).ToFloat();
    int moved = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_LE(std::abs(a[i] - b[i]), 1.0f) << s.c->name << " element " << i;
      moved += a[i] != b[i];
    }
    auto fp32 = RunAt(p, 0, weights);
    const std::string out = fp32->output_blobs()[0]->name();
    const std::vector<float> want = fp32->blob(out).ToFloat();
    const double e_shared = RelativeDifference(RealOutput(*shared, out), want);
    const double e_apart = RelativeDifference(RealOutput(*apart, out), want);
    std::printf("%s int8 calibrated: %d/%d Concats as views; '%s' moved by one step in %d of %zu "
                "elements; output vs fp32 %.3g of its range (separate ranges %.3g)\n",
                s.c->name, Views(*shared, "Concat"), concats, s.first_concat, moved, a.size(),
                e_shared, e_apart);
    EXPECT_LE(e_shared, e_apart + 0.02) << s.c->name;
    EXPECT_LT(e_shared, 0.1) << s.c->name;

    // A range given for one producer: that Concat's ranges stay as observed, and it copies.
    caffe::NetParameter given;
    caffe::QuantizerParameter* q = given.add_quantizer();
    q->set_name(s.producer);
    q->set_observed_min(0.0);
    q->set_observed_max(1.5);
    auto user = calibrated(1, given);
    EXPECT_EQ(QuantRange(*user, s.producer), std::make_pair(0.0, 1.5)) << s.c->name;
    EXPECT_EQ(QuantRange(*user, cat_top), QuantRange(*apart, cat_top)) << s.c->name;
    EXPECT_FALSE(user->runs_as_view(user->layer_index(s.first_concat))) << s.c->name;
  }
}

// A dense block in int8 (kDense): each Concat takes the one before it through a Split that also
// feeds the next layer's BatchNorm. With trained-like statistics (unit variance: the block's
// values of one magnitude) the calibration gives the whole block one range (the Concats', their
// producers', the Splits' and the BatchNorms' inputs), so every Concat and Split runs as a view
// — the block written in place once — and the output stays as close to fp32 as with separate
// ranges (each Concat then a requantizing copy). With the filler's zero statistics each layer
// multiplies its values by about 300: one range would round the first layers' values to zero,
// so the Splits keep their own ranges (and copy) and each Concat shares with its inputs only.
TEST(Views, Int8CalibrationSharesOneRangeOverADenseBlock) {
  const caffe::NetParameter p = NetText(kDense);
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  caffe::NetParameter unit = Weights(p);
  for (auto& l : *unit.mutable_layer())
    if (l.type() == "BatchNorm")
      for (int b = 1; b < l.blobs_size(); ++b)
        for (float& v : *l.mutable_blobs(b)->mutable_data()) v = 1.0f;  // variance, factor
  for (bool one_magnitude : {true, false})
    for (int level : {1, 2}) {
      const caffe::NetParameter weights = one_magnitude ? unit : Weights(p);
      const std::string what = std::string(one_magnitude ? "unit" : "zero") + " statistics, level " +
                               std::to_string(level);
      auto calibrated = [&](int optimize) {
        NetOptions o;
        o.optimize = optimize;
        auto net = std::make_unique<Net>(typed, Dev(), o);
        net->CopyTrainedLayersFrom(weights);
        Blob& in = *net->input_blobs()[0];
        in.FromFloat(SineInput(in));
        EXPECT_GT(CalibrateWithFloatVariant(*net, typed, o), 0);
        net->Forward();
        return net;
      };
      auto shared = calibrated(level);
      caffe::NetParameter separate;
      calibrated(0)->RangesToProto(&separate);
      caffe::NetParameter loaded = weights;
      *loaded.mutable_quantizer() = separate.quantizer();
      auto apart = RunAt(typed, level, loaded);
      int concats = 0, splits = 0;
      EXPECT_EQ(Views(*shared, "Concat", &concats), 3) << what;
      EXPECT_EQ(concats, 3);
      const int split_views = Views(*shared, "Split", &splits);
      EXPECT_GE(splits, 2) << what;
      EXPECT_EQ(Views(*apart, "Concat"), 0) << what;
      if (one_magnitude) {
        EXPECT_EQ(split_views, splits) << what;
        EXPECT_EQ(QuantRange(*shared, "cat1/top0"), QuantRange(*shared, "cat3/top0")) << what;
        EXPECT_EQ(QuantRange(*shared, "stem/top0"), QuantRange(*shared, "cat3/top0")) << what;
      } else {
        EXPECT_EQ(split_views, 0) << what;
        EXPECT_NE(QuantRange(*shared, "cat1/top0"), QuantRange(*shared, "cat3/top0")) << what;
      }
      auto fp32 = RunAt(p, 0, weights);
      const std::string out = fp32->output_blobs()[0]->name();
      const std::vector<float> want = fp32->blob(out).ToFloat();
      const double e_shared = RelativeDifference(RealOutput(*shared, out), want);
      const double e_apart = RelativeDifference(RealOutput(*apart, out), want);
      std::printf("dense block int8, %s: %d/%d Splits and 3/3 Concats as views; output vs fp32 "
                  "%.3g of its range (separate ranges %.3g)\n",
                  what.c_str(), split_views, splits, e_shared, e_apart);
      EXPECT_LE(e_shared, e_apart + 0.02) << what;
      EXPECT_LT(e_shared, 0.1) << what;
    }
}

}  // namespace
}  // namespace mpcaffe
