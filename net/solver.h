// net/solver.h — Solver: BVLC's training loop (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam;
// learning-rate policies; L2/L1 weight decay; gradient clipping; iter_size; test nets;
// snapshot and restore as .caffemodel + .solverstate written atomically). Updates, clipping
// and the histories live on the device; the loss is the only per-iteration host read. In an MPI
// job (net/distributed.h) every rank runs the same solver on its shard of the data: rank 0's
// initial weights go to every rank, the gradients are averaged over the ranks during backward,
// the update runs identically everywhere, and rank 0 alone logs and snapshots.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "net/distributed.h"
#include "net/net.h"
#include "proto/caffe.pb.h"

namespace mpcaffe {

/// The solver definition is inconsistent (no train net, unknown type or lr policy, a state
/// file that does not fit the net). Messages name the field or file and what is wrong.
class SolverError : public Error {
 public:
  using Error::Error;
};

class Solver {
 public:
  /// Builds the train net (TRAIN phase, train_state) and the test nets (TEST phase, sharing the
  /// train net's weights) from `param`. Net files are read relative to the working directory,
  /// as BVLC does. `base` supplies the net options beyond phase, level and stages (e.g.
  /// synthetic_data to train on random inputs for timing).
  /// `comm`: the job to train in; null for Communicator::World() (data-parallel under mpirun).
  Solver(const caffe::SolverParameter& param, Device& device, const NetOptions& base = {},
         Communicator* comm = nullptr);
  /// Reads a solver .prototxt (upgraded) and builds it.
  static std::unique_ptr<Solver> FromFile(const std::string& path, Device& device,
                                          const NetOptions& base = {});

  const caffe::SolverParameter& param() const { return param_; }
  /// "SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta" or "Adam".
  const std::string& type() const { return type_; }
  Net& net() { return *net_; }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  /// Mean of the last average_loss iterations' losses.
  float smoothed_loss() const;

  /// Runs `iters` iterations: tests at test_interval, forward/backward iter_size times,
  /// display, update, snapshots at the snapshot interval.
  void Step(int iters);
  /// Restores from `resume_file` (a .solverstate) when given, runs to max_iter, snapshots
  /// (snapshot_after_train) and runs the final tests as BVLC's Solve does.
  void Solve(const std::string& resume_file = "");
  /// Runs test net `id` for its test_iter iterations; returns the mean of each output value
  /// (in the order of the net's output blobs, every element), and prints them when logging.
  /// In an MPI job the ranks share the iterations (rank r runs r, r + N, …, each on its shard)
  /// and the means are over all of them.
  std::vector<float> Test(int id);
  /// Names matching Test's values ("accuracy", "loss", "prob[3]", ...).
  std::vector<std::string> TestOutputNames(int id) const;

  /// The learning rate of the current iteration under lr_policy.
  float GetLearningRate() const;
  /// One update from the accumulated parameter diffs (normalize by iter_size, regularize,
  /// clip, the solver's rule, data −= update); the iteration counter is not advanced.
  void ApplyUpdate();
  /// The solver's per-parameter history (SGD-like: one array per parameter; AdaDelta and
  /// Adam: two, the second set after the first, as BVLC stores them), read from the device.
  std::vector<std::vector<float>> history() const;

  /// Writes <prefix>_iter_<iter>.caffemodel and .solverstate (each to a temporary file renamed
  /// into place); returns the .solverstate path. In an MPI job only rank 0 writes (the other
  /// ranks return "").
  std::string Snapshot();
  /// Reads a .solverstate (and the .caffemodel it names, resolved beside it when relative and
  /// absent); throws SolverError when its history does not fit the net. In an MPI job rank 0
  /// reads the files and sends the state to every rank.
  void Restore(const std::string& solverstate);

  /// The job this solver trains in (a job of one outside mpirun).
  Communicator& communicator() const { return *comm_; }
  /// Rank 0's parameters (and BatchNorm statistics) to every rank: after loading weights
  /// (fine-tuning) on rank 0. The constructor and Restore do it themselves.
  void BroadcastParameters();
  /// How gradients travel between the ranks (bucket size, fp16); no effect in a job of one.
  void set_allreduce_options(const AllreduceOptions& options);
  /// The gradient allreduce of an MPI job (null in a job of one): buckets, bytes, wait time.
  const GradientAllreduce* gradient_allreduce() const { return reducer_.get(); }

  /// Where progress lines go (BVLC's format); null silences the solver. Default: std::cout.
  /// Ranks other than 0 of an MPI job never log.
  void set_log(std::ostream* log) { log_ = comm_->root() ? log : nullptr; }
  /// Called after every training iteration with the iteration reached and the smoothed loss
  /// (progress displays); the loss is the one host read an iteration already makes.
  void set_iteration_callback(std::function<void(int iter, float smoothed_loss)> callback) {
    on_iteration_ = std::move(callback);
  }

 private:
  void InitHistory();
  void ClipGradients();
  /// A kernel of a solver program (built once per device through Device::GetProgram).
  Kernel SolverKernel(const std::string& source, const std::string& name);
  void UpdateSmoothedLoss(float loss, int start_iter);
  void TestAll();
  std::string SnapshotFilename(const std::string& extension) const;
  void RestoreFromFile(const std::string& solverstate);
  /// Throws DistributedError when the ranks' nets differ in their parameters.
  void CheckRanksAgree();

  caffe::SolverParameter param_;
  Device* device_;
  std::string type_;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  std::vector<vptr<float>> history_;     // on the device, one per (copy, parameter)
  std::vector<int> history_count_;       // elements of each history array
  std::vector<bool> trained_;            // per learnable parameter: ParamLearnable
  vptr<float> sumsq_;                    // clip_gradients' squared norm
  int iter_ = 0;
  int current_step_ = 0;
  std::vector<float> losses_;
  float smoothed_loss_ = 0;
  std::ostream* log_;
  std::function<void(int, float)> on_iteration_;
  Communicator* comm_;
  AllreduceOptions allreduce_options_;
  std::unique_ptr<GradientAllreduce> reducer_;  // MPI jobs of more than one rank
};

}  // namespace mpcaffe
