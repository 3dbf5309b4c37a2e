// tests/dist/distributed_test.cc — data-parallel training over MPI, run by CTest under
// `mpirun -np 2`: two ranks at batch B follow one process at batch 2·B (loss at each of 20
// iterations, weights after, sharded test scores), a rank-0 snapshot resumes under 1 and 2
// ranks, calibrated ranges equal one process's bit for bit, ranks with different nets refuse
// to train, and the fp16 allreduce stays close.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "layers/lmdb_io.h"
#include "net/distributed.h"
#include "net/solver.h"
#include "proto/model_io.h"

namespace mpcaffe {
namespace {

Communicator& World() { return Communicator::World(); }
Device& Dev() { return DefaultDevice(); }

constexpr int kRecords = 80;  // 10 iterations of 8 records: an epoch

/// A temporary folder rank 0 creates, named to every rank.
std::string SharedTempDir() {
  char dir[64] = "/tmp/mpcaffe_dist_XXXXXX";
  if (World().root() && !mkdtemp(dir)) throw Error("mkdtemp failed");
  World().Broadcast(dir, sizeof dir, "the test folder's name");
  return dir;
}

/// kRecords 1×6×6 records of seeded random bytes, label r % 4 (its quadrant brighter); written by rank 0 (the
/// broadcast after it is the barrier).
std::string SharedDb(const std::string& dir) {
  const std::string path = dir + "/lmdb";
  if (World().root()) {
    LmdbWriter w(path, 16);
    std::mt19937 rng(7);
    for (int r = 0; r < kRecords; ++r) {
      caffe::Datum d;
      d.set_channels(1), d.set_height(6), d.set_width(6), d.set_label(r % 4);
      std::string bytes;
      for (int i = 0; i < 36; ++i) {  // noise, bright in the label's quadrant: learnable
        const int quadrant = (i / 6 >= 3) * 2 + (i % 6 >= 3);
        bytes.push_back(static_cast<char>((rng() & 0x7f) + (quadrant == r % 4 ? 128 : 0)));
      }
      d.set_data(bytes);
      char key[16];
      std::snprintf(key, sizeof key, "%08d", r);
      w.Put(key, d.SerializeAsString());
    }
    w.Finish();
  }
  int done = 1;
  World().Broadcast(&done, sizeof done, "the test database");
  return path;
}

/// Data → Convolution → ReLU → InnerProduct → SoftmaxWithLoss (+ Accuracy in TEST), momentum
/// SGD with weight decay: the solver state matters for resuming.
caffe::SolverParameter SolverFor(const std::string& db, int batch, int outputs = 4) {
  const std::string net =
      "name: 'tiny' "
      "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
      "  data_param { source: '" + db + "' batch_size: " + std::to_string(batch) +
      "  backend: LMDB } transform_param { scale: 0.00390625 } }"
      "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' convolution_param {"
      "  num_output: 3 kernel_size: 3 weight_filler { type: 'xavier' } } }"
      "layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' }"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip' inner_product_param {"
      "  num_output: " + std::to_string(outputs) + " weight_filler { type: 'xavier' } } }"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }"
      "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' "
      "  include { phase: TEST } }";
  caffe::SolverParameter p;
  ParseProtoFromText("net_param { " + net + " } base_lr: 0.1 momentum: 0.9 "
                     "weight_decay: 0.001 lr_policy: 'fixed' max_iter: 20 display: 0 "
                     "average_loss: 1 random_seed: 1701 test_iter: 4 "
                     "snapshot_after_train: false",
                     "distributed_test solver", &p);
  return p;
}

std::vector<float> Train(Solver& s, int iters) {
  std::vector<float> losses;
  s.set_iteration_callback([&](int, float loss) { losses.push_back(loss); });
  s.Step(iters);
  return losses;
}

std::vector<float> Weights(Solver& s) {
  std::vector<float> all;
  for (Blob* b : s.net().learnable_params()) {
    const std::vector<float> v = b->ToFloat();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double rel,
                 const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]), rel * std::max(1.0, std::fabs(double{a[i]})))
        << what << " " << i << ": " << a[i] << " vs " << b[i] << " (rank " << World().rank() << ")";
}

/// A solver of one process over every record (whatever the job).
std::unique_ptr<Solver> SingleProcess(const caffe::SolverParameter& p) {
  SetDataShard({0, 1});
  auto s = std::make_unique<Solver>(p, Dev(), NetOptions{}, &Communicator::Self());
  s->set_log(nullptr);
  SetDataShard({World().rank(), World().size()});
  return s;
}

std::unique_ptr<Solver> Distributed(const caffe::SolverParameter& p) {
  auto s = std::make_unique<Solver>(p, Dev());
  s->set_log(nullptr);
  return s;
}

class Distributed2 : public testing::Test {
 protected:
  void SetUp() override {
    if (World().size() != 2)
      GTEST_SKIP() << "needs an MPI job of 2 ranks (CTest runs it as mpirun -np 2), this one has "
                   << World().size();
    dir_ = SharedTempDir();
    db_ = SharedDb(dir_);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    int done = 1;
    World().Broadcast(&done, sizeof done, "end of test");  // nobody reads the folder any more
    if (World().root()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string dir_, db_;
};

TEST_F(Distributed2, TwoRanksAtBatchBFollowOneProcessAtBatch2B) {
  auto one = SingleProcess(SolverFor(db_, 8));
  const std::vector<float> loss1 = Train(*one, 20);
  auto two = Distributed(SolverFor(db_, 4));
  ASSERT_NE(two->gradient_allreduce(), nullptr);
  const std::vector<float> loss2 = Train(*two, 20);
  ASSERT_EQ(loss1.size(), 20u);
  ExpectClose(loss1, loss2, 1e-5, "loss at iteration");
  EXPECT_GT(loss1.front() - loss1.back(), 0.05) << "the tiny net did not learn: a weak test";
  ExpectClose(Weights(*one), Weights(*two), 1e-5, "weight");
  // Sharded test scores: 4 test batches of 4, split over the ranks, cover the same 16 records
  // as one process running them all with the same weights.
  auto ref = SingleProcess(SolverFor(db_, 4));
  caffe::NetParameter weights;
  two->net().ToProto(&weights);
  ref->net().CopyTrainedLayersFrom(weights);
  ref->net().ParamsUpdated();
  for (const auto& t : ref->test_nets()) t->ParamsUpdated();
  const std::vector<float> t1 = ref->Test(0), t2 = two->Test(0);
  ExpectClose(t1, t2, 1e-5, "test output");
  const std::vector<std::string> names = two->TestOutputNames(0);
  ASSERT_EQ(names.size(), t2.size());
  for (size_t k = 0; k < names.size(); ++k)  // correct answers are counted: exactly equal
    if (names[k] == "acc") {
      EXPECT_EQ(t1[k], t2[k]);
    }
}

TEST_F(Distributed2, Fp16AllreduceStaysCloseToFp32) {
  auto fp32 = Distributed(SolverFor(db_, 4));
  auto fp16 = Distributed(SolverFor(db_, 4));
  AllreduceOptions o;
  o.half = true;
  o.bucket_bytes = 64;  // several buckets: exercises the order and the overlap
  fp16->set_allreduce_options(o);
  EXPECT_GT(fp16->gradient_allreduce()->buckets(), 1);
  EXPECT_EQ(fp16->gradient_allreduce()->bytes_per_step() * 2,
            fp32->gradient_allreduce()->bytes_per_step());
  const std::vector<float> a = Train(*fp32, 10), b = Train(*fp16, 10);
  ExpectClose(a, b, 1e-2, "fp16-allreduce loss");
  bool differs = false;  // fp16 rounding must show somewhere, or it did not run in fp16
  const std::vector<float> wa = Weights(*fp32), wb = Weights(*fp16);
  for (size_t i = 0; i < wa.size(); ++i) differs |= wa[i] != wb[i];
  EXPECT_TRUE(differs);
}

TEST_F(Distributed2, ARank0SnapshotResumesUnderOneAndTwoRanks) {
  auto a = Distributed(SolverFor(db_, 4));
  Train(*a, 10);
  caffe::SolverParameter p = SolverFor(db_, 4);
  char path[512] = {0};
  {
    const std::string written = a->Snapshot();  // rank 0 writes, the others return ""
    EXPECT_EQ(written.empty(), !World().root());
    std::snprintf(path, sizeof path, "%s", written.c_str());
  }
  World().Broadcast(path, sizeof path, "the snapshot's path");
  const std::vector<float> cont = Train(*a, 10);  // the run without a break
  // 10 iterations are one epoch: a resumed Data layer starts where the run was.
  auto b = Distributed(SolverFor(db_, 4));
  b->Restore(path);
  EXPECT_EQ(b->iter(), 10);
  ExpectClose(cont, Train(*b, 10), 1e-5, "2-rank resume loss");
  ExpectClose(Weights(*a), Weights(*b), 1e-5, "2-rank resume weight");
  auto c = SingleProcess(SolverFor(db_, 8));
  c->Restore(path);
  EXPECT_EQ(c->iter(), 10);
  ExpectClose(cont, Train(*c, 10), 1e-5, "1-process resume loss");
  ExpectClose(Weights(*a), Weights(*c), 1e-5, "1-process resume weight");
}

TEST_F(Distributed2, CalibratedRangesEqualOneProcessBitForBit) {
  // The tiny net with int8 convolution and inner product; its filler weights.
  const caffe::NetParameter fp32 = SolverFor(db_, 4).net_param();
  caffe::NetParameter typed = fp32;
  for (auto& l : *typed.mutable_layer())
    if (l.type() == "Convolution" || l.type() == "InnerProduct")
      l.set_compute_data_type(caffe::CAFFE_INT8_QUANTIZED);
  NetOptions o;
  o.phase = caffe::TEST;
  caffe::NetParameter weights;
  Net(fp32, Dev(), o).ToProto(&weights);
  // The ranges observed over `passes` batches of the shard (reduced over the ranks or not).
  auto calibrate = [&](DataShard shard, int passes, bool reduce) {
    SetDataShard(shard);
    Net net(typed, Dev(), o);
    net.CopyTrainedLayersFrom(weights);
    EXPECT_GT(CalibrateWithFloatVariant(net, typed, o, passes, {},
                                        [&](Net& f) {
                                          if (reduce) ReduceObservedRanges(f, World());
                                        }),
              0);
    caffe::NetParameter ranges;
    net.RangesToProto(&ranges);
    SetDataShard({World().rank(), World().size()});
    EXPECT_GT(ranges.quantizer_size(), 2);
    return ranges.SerializeAsString();
  };
  // One process: 6 batches of 4 (records 0..23); two ranks: 3 batches each of their shards.
  const std::string one = calibrate({0, 1}, 6, false);
  EXPECT_EQ(one, calibrate({World().rank(), 2}, 3, true));
  EXPECT_NE(one, calibrate({World().rank(), 2}, 3, false)) << "a shard alone saw the same ranges: "
                                                              "a weak test";
}

TEST_F(Distributed2, RanksWithDifferentNetsRefuseToTrain) {
  try {
    Distributed(SolverFor(db_, 4, World().root() ? 4 : 5));
    FAIL() << "no error for ranks with different nets";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks' nets differ"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe
