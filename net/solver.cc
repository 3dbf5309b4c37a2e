// net/solver.cc — the Solver: BVLC's training loop, update rules, learning-rate policies and
// snapshot / restore. Parameter updates run as generated device kernels on the fp32 parameter
// blobs (layers/train_kernels.h); the histories stay on the device.
#include "net/solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <set>
#include <sstream>

#include "layers/layer.h"
#include "layers/train_kernels.h"
#include "proto/model_io.h"

namespace mpcaffe {
namespace {

std::string CanonicalType(const caffe::SolverParameter& p) {
  const std::string t = p.type();
  for (const char* known : {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"})
    if (t == known) return t;
  throw SolverError("solver type '" + t +
                    "' is unknown (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)");
}

NetOptions OptionsFor(const NetOptions& base, const caffe::NetState& state, caffe::Phase phase) {
  NetOptions o = base;
  o.phase = phase;
  o.reduced_memory = 0;  // test nets share the train net's blobs' lifetimes with the solver
  o.level = state.level();
  for (const auto& s : state.stage()) o.stages.push_back(s);
  return o;
}

bool Exists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

}  // namespace

Solver::Solver(const caffe::SolverParameter& param, Device& device, const NetOptions& base,
               Communicator* comm)
    : param_(param), device_(&device), log_(&std::cout) {
  // The job first: initialising MPI gives the Data layers built below the rank's shard.
  comm_ = comm ? comm : &Communicator::World();
  if (!comm_->root()) log_ = nullptr;
  type_ = CanonicalType(param_);
  if (param_.random_seed() >= 0) SetRandomSeed(static_cast<uint64_t>(param_.random_seed()));
  // Train net: exactly one of net, net_param, train_net, train_net_param.
  const int sources = param_.has_net() + param_.has_net_param() + param_.has_train_net() +
                      param_.has_train_net_param();
  if (sources != 1)
    throw SolverError("the solver must name exactly one train net (net, net_param, train_net or "
                      "train_net_param), it names " + std::to_string(sources));
  caffe::NetParameter train;
  if (param_.has_train_net_param()) train = param_.train_net_param();
  else if (param_.has_train_net()) train = ReadNetParameterText(param_.train_net());
  else if (param_.has_net_param()) train = param_.net_param();
  else train = ReadNetParameterText(param_.net());
  net_ = std::make_unique<Net>(train, device, OptionsFor(base, param_.train_state(), caffe::TRAIN));

  // Test nets: test_net_param, test_net, then the general net once per remaining test_iter.
  std::vector<caffe::NetParameter> tests;
  for (const auto& p : param_.test_net_param()) tests.push_back(p);
  for (const auto& f : param_.test_net()) tests.push_back(ReadNetParameterText(f));
  const bool general = param_.has_net() || param_.has_net_param();
  if (general)
    while (static_cast<int>(tests.size()) < param_.test_iter_size())
      tests.push_back(param_.has_net_param() ? param_.net_param() : ReadNetParameterText(param_.net()));
  if (static_cast<int>(tests.size()) != param_.test_iter_size())
    throw SolverError("test_iter must be given once per test net: " +
                      std::to_string(param_.test_iter_size()) + " test_iter for " +
                      std::to_string(tests.size()) + " test nets");
  if (!tests.empty() && param_.test_interval() <= 0 && param_.has_test_interval())
    throw SolverError("test_interval must be positive");
  for (size_t i = 0; i < tests.size(); ++i) {
    const caffe::NetState state =
        static_cast<int>(i) < param_.test_state_size() ? param_.test_state(static_cast<int>(i)) : caffe::NetState();
    test_nets_.push_back(std::make_unique<Net>(tests[i], device, OptionsFor(base, state, caffe::TEST)));
    test_nets_.back()->ShareTrainedLayersWith(*net_);
  }
  if (param_.iter_size() < 1) throw SolverError("iter_size must be at least 1");
  InitHistory();
  if (comm_->size() > 1) {
    CheckRanksAgree();
    set_allreduce_options(allreduce_options_);
    BroadcastParameters();
  }
}

void Solver::CheckRanksAgree() {
  // Parameters, their elements, and the solver's histories: equal on every rank, or the
  // allreduce would mix unrelated values.
  const auto& params = net_->learnable_params();
  double total = 0;
  for (Blob* b : params) total += b->count();
  const double mine[3] = {static_cast<double>(params.size()), total,
                          static_cast<double>(history_.size())};
  double low[3] = {mine[0], mine[1], mine[2]}, high[3] = {mine[0], mine[1], mine[2]};
  comm_->Allreduce(low, 3, Communicator::Op::kMin, "the ranks' parameter counts");
  comm_->Allreduce(high, 3, Communicator::Op::kMax, "the ranks' parameter counts");
  for (int i = 0; i < 3; ++i)
    if (low[i] != high[i])
      throw DistributedError(
          "rank " + std::to_string(comm_->rank()) + ": the ranks' nets differ: net '" +
          net_->name() + "' has " + std::to_string(params.size()) + " learnable parameters of " +
          std::to_string(static_cast<long long>(total)) + " values here, " +
          std::to_string(static_cast<long long>(low[i])) + " to " +
          std::to_string(static_cast<long long>(high[i])) + " " +
          (i == 0 ? "parameters" : i == 1 ? "values" : "history arrays") +
          " across the ranks (every rank must train the same net with the same solver)");
}

void Solver::set_allreduce_options(const AllreduceOptions& options) {
  allreduce_options_ = options;
  if (comm_->size() <= 1) return;
  std::vector<Blob*> trained;
  for (size_t p = 0; p < net_->learnable_params().size(); ++p)
    if (trained_[p]) trained.push_back(net_->learnable_params()[p]);
  reducer_ = std::make_unique<GradientAllreduce>(*net_, trained, *comm_, options);
}

void Solver::BroadcastParameters() {
  if (comm_->size() <= 1) return;
  const auto& params = net_->learnable_params();
  for (size_t p = 0; p < params.size(); ++p)
    comm_->Broadcast(params[p]->mutable_host_data(), params[p]->bytes(),
                     "broadcast of parameter " + net_->learnable_param_names()[p]);
  net_->ParamsUpdated();
  for (auto& t : test_nets_) t->ParamsUpdated();
}

std::unique_ptr<Solver> Solver::FromFile(const std::string& path, Device& device,
                                         const NetOptions& base) {
  return std::make_unique<Solver>(ReadSolverText(path), device, base);
}

void Solver::InitHistory() {
  const int copies = type_ == "AdaDelta" || type_ == "Adam" ? 2 : 1;
  history_.clear();
  history_count_.clear();
  for (int c = 0; c < copies; ++c)
    for (Blob* b : net_->learnable_params()) {
      const int count = b->count();
      vptr<float> h = device_->Alloc<float>(std::max(1, count));
      device_->Zero(h.mem.get(), 0, h.mem->bytes());
      history_.push_back(h);
      history_count_.push_back(count);
    }
  // Parameters whose layer updates them itself (BatchNorm's statistics) are not trained.
  std::set<const Blob*> untrained;
  for (const auto& layer : net_->layers())
    for (int j = 0; j < layer->num_params(); ++j)
      if (!layer->ParamLearnable(j)) untrained.insert(&layer->param_blob(j));
  trained_.clear();
  for (Blob* b : net_->learnable_params()) trained_.push_back(!untrained.count(b));
  sumsq_ = device_->Alloc<float>(1);
}

std::vector<std::vector<float>> Solver::history() const {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < history_.size(); ++i) {
    out.emplace_back(history_count_[i]);
    device_->Read(history_[i], out.back().data(), history_count_[i]);
  }
  return out;
}

Kernel Solver::SolverKernel(const std::string& source, const std::string& name) {
  return device_->GetProgram(source, "", ProgramHints::OneDimensional())->GetKernel(name);
}

float Solver::smoothed_loss() const { return smoothed_loss_; }

float Solver::GetLearningRate() const {
  const std::string& policy = param_.lr_policy();
  const double base = param_.base_lr(), gamma = param_.gamma(), power = param_.power();
  const double it = iter_;
  if (policy == "fixed") return static_cast<float>(base);
  if (policy == "step") {
    if (param_.stepsize() <= 0) throw SolverError("lr_policy step needs a positive stepsize");
    return static_cast<float>(base * std::pow(gamma, std::floor(it / param_.stepsize())));
  }
  if (policy == "exp") return static_cast<float>(base * std::pow(gamma, it));
  if (policy == "inv") return static_cast<float>(base * std::pow(1.0 + gamma * it, -power));
  if (policy == "multistep") {
    int step = 0;
    while (step < param_.stepvalue_size() && iter_ >= param_.stepvalue(step)) ++step;
    return static_cast<float>(base * std::pow(gamma, step));
  }
  if (policy == "poly") {
    if (param_.max_iter() <= 0) throw SolverError("lr_policy poly needs a positive max_iter");
    return static_cast<float>(base * std::pow(1.0 - it / param_.max_iter(), power));
  }
  if (policy == "sigmoid")
    return static_cast<float>(base / (1.0 + std::exp(-gamma * (it - param_.stepsize()))));
  throw SolverError("lr_policy '" + policy +
                    "' is unknown (fixed, step, exp, inv, multistep, poly, sigmoid)");
}

void Solver::ClipGradients() {
  const float clip = param_.clip_gradients();
  if (clip < 0) return;
  const auto& params = net_->learnable_params();
  const KernelTarget target = KernelTarget::Of(*device_);
  // ‖g‖² summed on the device (one reduction per parameter into sumsq_), then the scale
  // clip/‖g‖ applied by a kernel that reads the norm: no host round trip.
  Kernel sum = SolverKernel(ChannelSumSource(target), "channel_sum");
  bool first = true;
  for (size_t p = 0; p < params.size(); ++p) {
    if (!trained_[p] || params[p]->count() == 0) continue;
    DeviceMemory* d = params[p]->device_diff();
    sum.Arg(int32_t{1}).Arg(int32_t{1}).Arg(int32_t{params[p]->count()}).ArgBuffer(d, 0, 4)
        .ArgBuffer(d, 0, 4).Arg(sumsq_).Arg(int32_t{1}).Arg(1.0f).Arg(first ? 0.0f : 1.0f);
    sum.Launch({static_cast<size_t>(kReduceLocalSize), 1, 1}, {static_cast<size_t>(kReduceLocalSize), 1, 1});
    first = false;
  }
  if (first) return;
  if (log_ && param_.display() && iter_ % param_.display() == 0) {
    // Only on display iterations: BVLC's message needs the norm on the host.
    float sumsq = 0;
    device_->Read(sumsq_, &sumsq, 1);
    const double l2 = std::sqrt(static_cast<double>(sumsq));
    if (l2 > clip)
      *log_ << "Gradient clipping: scaling down gradients (L2 norm " << l2 << " > " << clip
            << ") by scale factor " << clip / l2 << "\n";
  }
  Kernel scale = SolverKernel(SolverCommonSource(target), "clip_scale");
  for (size_t p = 0; p < params.size(); ++p) {
    if (!trained_[p] || params[p]->count() == 0) continue;
    scale.Arg(int32_t{params[p]->count()}).ArgBuffer(params[p]->mutable_device_diff(), 0, 4)
        .Arg(sumsq_).Arg(clip);
    scale.Launch1D(params[p]->count());
  }
}

void Solver::ApplyUpdate() {
  const float rate = GetLearningRate();
  if (log_ && param_.display() && iter_ % param_.display() == 0)
    *log_ << "Iteration " << iter_ << ", lr = " << rate << "\n";
  const auto& params = net_->learnable_params();
  const size_t n = params.size();
  const KernelTarget target = KernelTarget::Of(*device_);
  // Normalize and regularize each diff, then clip over all of them (BVLC's order).
  const bool l1 = param_.regularization_type() == "L1";
  if (!l1 && param_.regularization_type() != "L2")
    throw SolverError("regularization_type '" + param_.regularization_type() + "' is unknown (L2, L1)");
  // The diffs hold the sum over iter_size passes and over the ranks of an MPI job: their mean
  // is the gradient of one pass over the whole batch.
  const float norm = 1.0f / (static_cast<float>(param_.iter_size()) * comm_->size());
  // Without clipping, the update kernel regularizes as it reads the gradient (one launch per
  // parameter); clipping needs the regularized gradients' norm first.
  const bool clipping = param_.clip_gradients() >= 0;
  Kernel regularize = SolverKernel(SolverCommonSource(target), "regularize");
  for (size_t p = 0; p < n && clipping; ++p) {
    Blob& b = *params[p];
    const float decay = param_.weight_decay() * net_->params_weight_decay()[p];
    if (!trained_[p] || b.count() == 0 || (norm == 1.0f && decay == 0.0f)) continue;
    regularize.Arg(int32_t{b.count()}).ArgBuffer(b.device_data(), 0, 4)
        .ArgBuffer(b.mutable_device_diff(), 0, 4).Arg(norm).Arg(decay).Arg(int32_t{l1 ? 1 : 0});
    regularize.Launch1D(b.count());
  }
  ClipGradients();
  const float momentum = param_.momentum(), delta = param_.delta();
  float m2 = 0, correction = 1;
  if (type_ == "RMSProp") m2 = param_.rms_decay();
  if (type_ == "Adam") {
    m2 = param_.momentum2();
    const int t = iter_ + 1;
    correction = static_cast<float>(std::sqrt(1 - std::pow(m2, t)) / (1 - std::pow(momentum, t)));
  }
  Kernel update = SolverKernel(SolverUpdateSource(target, type_), SolverUpdateKernelName(type_));
  const bool two = history_.size() == 2 * n;
  for (size_t p = 0; p < n; ++p) {
    Blob& b = *params[p];
    if (!trained_[p] || b.count() == 0) continue;
    const float lr = rate * net_->params_lr()[p];
    const float decay = param_.weight_decay() * net_->params_weight_decay()[p];
    update.Arg(int32_t{b.count()}).ArgBuffer(b.mutable_device_data(), 0, 4)
        .ArgBuffer(b.mutable_device_diff(), 0, 4).Arg(history_[p])
        .Arg(two ? history_[n + p] : history_[p]).Arg(lr).Arg(momentum).Arg(m2).Arg(delta)
        .Arg(correction).Arg(clipping ? 1.0f : norm).Arg(clipping ? 0.0f : decay)
        .Arg(int32_t{l1 ? 1 : 0});
    update.Launch1D(b.count());
  }
  net_->ParamsUpdated();
  for (auto& t : test_nets_) t->ParamsUpdated();
}

void Solver::UpdateSmoothedLoss(float loss, int start_iter) {
  const int average = std::max(1, param_.average_loss());
  const size_t k = static_cast<size_t>(iter_ - start_iter);
  if (losses_.size() < static_cast<size_t>(average)) {
    losses_.push_back(loss);
    smoothed_loss_ = (smoothed_loss_ * (losses_.size() - 1) + loss) / losses_.size();
  } else {
    const size_t idx = k % average;
    smoothed_loss_ += (loss - losses_[idx]) / average;
    losses_[idx] = loss;
  }
}

void Solver::Step(int iters) {
  const int start_iter = iter_, stop_iter = iter_ + iters;
  losses_.clear();
  smoothed_loss_ = 0;
  auto tick = std::chrono::steady_clock::now();
  int tick_iter = iter_;
  while (iter_ < stop_iter) {
    net_->ClearParamDiffs();
    if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization()))
      TestAll();
    float loss = 0;
    for (int i = 0; i < param_.iter_size(); ++i) {
      // In an MPI job the last pass's backward starts summing the gradients over the ranks.
      const bool reduce = reducer_ && i + 1 == param_.iter_size();
      loss += reduce ? net_->Forward() : net_->ForwardBackward();
      if (reduce) reducer_->Backward();
    }
    loss /= param_.iter_size();
    if (reducer_) loss = reducer_->Finish(loss) / comm_->size();  // the mean over the ranks
    UpdateSmoothedLoss(loss, start_iter);
    const bool display = param_.display() && iter_ % param_.display() == 0;
    std::vector<std::vector<float>> outputs;
    if (display) {  // every rank: the outputs are averaged over the ranks
      for (Blob* out : net_->output_blobs()) {
        outputs.push_back(out->ToFloat());
        comm_->Allreduce(outputs.back().data(), outputs.back().size(), Communicator::Op::kSum,
                         "allreduce of the train net's outputs");
        for (float& x : outputs.back()) x /= static_cast<float>(comm_->size());
      }
    }
    if (log_ && display) {
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - tick).count();
      const int done = iter_ - tick_iter;
      *log_ << "Iteration " << iter_;
      if (done > 0)
        *log_ << " (" << done / secs << " iter/s, " << secs << "s/" << done << " iters)";
      *log_ << ", loss = " << smoothed_loss_ << "\n";
      int k = 0;
      for (size_t o = 0; o < outputs.size(); ++o)
        for (float x : outputs[o])
          *log_ << "    Train net output #" << k++ << ": " << net_->output_blobs()[o]->name()
                << " = " << x << "\n";
      *log_ << std::flush;
      tick = now;
      tick_iter = iter_;
    }
    ApplyUpdate();
    ++iter_;
    if (param_.snapshot() > 0 && iter_ % param_.snapshot() == 0) Snapshot();
    if (on_iteration_) on_iteration_(iter_, smoothed_loss_);
  }
}

void Solver::Solve(const std::string& resume_file) {
  if (log_) *log_ << "Solving " << net_->name() << "\n" << "Learning Rate Policy: " << param_.lr_policy() << "\n";
  if (!resume_file.empty()) {
    if (log_) *log_ << "Restoring previous solver status from " << resume_file << "\n";
    Restore(resume_file);
  }
  Step(param_.max_iter() - iter_);
  if (param_.snapshot_after_train() && (param_.snapshot() == 0 || iter_ % param_.snapshot() != 0))
    Snapshot();
  if (param_.display()) {
    float loss = net_->Forward();
    comm_->Allreduce(&loss, 1, Communicator::Op::kSum, "allreduce of the final loss");
    loss /= static_cast<float>(comm_->size());
    if (log_) *log_ << "Iteration " << iter_ << ", loss = " << loss << "\n";
  }
  if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0) TestAll();
  if (log_) *log_ << "Optimization Done.\n";
}

std::vector<std::string> Solver::TestOutputNames(int id) const {
  std::vector<std::string> names;
  for (Blob* out : test_nets_.at(id)->output_blobs()) {
    if (out->count() == 1) {
      names.push_back(out->name());
      continue;
    }
    for (int i = 0; i < out->count(); ++i) names.push_back(out->name() + "[" + std::to_string(i) + "]");
  }
  return names;
}

std::vector<float> Solver::Test(int id) {
  Net& net = *test_nets_.at(id);
  const int iters = param_.test_iter(id);
  size_t values = 0;
  for (Blob* out : net.output_blobs()) values += static_cast<size_t>(out->count());
  std::vector<double> sum(values, 0.0);
  // Rank r of N runs iterations r, r + N, … (each on its shard of the data).
  const int size = comm_->size(), mine = (iters - comm_->rank() + size - 1) / size;
  for (int it = 0; it < mine; ++it) {
    net.Forward();
    size_t k = 0;
    for (Blob* out : net.output_blobs()) {
      const std::vector<float> v = out->ToFloat();
      if (sum.size() < k + v.size()) sum.resize(k + v.size(), 0.0);
      for (float x : v) sum[k++] += x;
    }
  }
  comm_->Allreduce(sum.data(), sum.size(), Communicator::Op::kSum,
                   "allreduce of test net #" + std::to_string(id) + "'s outputs");
  std::vector<float> mean(sum.size());
  for (size_t k = 0; k < sum.size(); ++k) mean[k] = static_cast<float>(sum[k] / std::max(1, iters));
  if (log_) {
    *log_ << "Iteration " << iter_ << ", Testing net (#" << id << ")\n";
    const std::vector<std::string> names = TestOutputNames(id);
    for (size_t k = 0; k < mean.size() && k < names.size(); ++k)
      *log_ << "    Test net output #" << k << ": " << names[k] << " = " << mean[k] << "\n";
    *log_ << std::flush;
  }
  return mean;
}

void Solver::TestAll() {
  for (size_t i = 0; i < test_nets_.size(); ++i) Test(static_cast<int>(i));
}

std::string Solver::SnapshotFilename(const std::string& extension) const {
  std::string prefix = param_.snapshot_prefix();
  if (prefix.empty()) prefix = net_->name().empty() ? "snapshot" : net_->name();
  return prefix + "_iter_" + std::to_string(iter_) + extension;
}

std::string Solver::Snapshot() {
  if (!comm_->root()) return "";
  const std::string model = SnapshotFilename(".caffemodel");
  net_->Save(model);  // written to a temporary file and renamed (WriteProtoToBinaryFile)
  caffe::SolverState state;
  state.set_iter(iter_);
  state.set_learned_net(model);
  state.set_current_step(current_step_);
  for (const auto& h : history()) {
    caffe::BlobProto* b = state.add_history();
    b->mutable_shape()->add_dim(static_cast<int64_t>(h.size()));
    for (float x : h) b->add_data(x);
  }
  const std::string path = SnapshotFilename(".solverstate");
  WriteProtoToBinaryFile(state, path);
  if (log_) *log_ << "Snapshotting to binary proto file " << model << "\n"
                  << "Snapshotting solver state to binary proto file " << path << "\n";
  return path;
}

void Solver::Restore(const std::string& solverstate) {
  if (comm_->size() <= 1) return RestoreFromFile(solverstate);
  // Rank 0 reads the files (they need not exist elsewhere) and sends the state to every rank.
  std::exception_ptr failure;
  int ok = 1;
  if (comm_->root()) {
    try {
      RestoreFromFile(solverstate);
    } catch (...) {
      failure = std::current_exception();
      ok = 0;
    }
  }
  comm_->Broadcast(&ok, sizeof ok, "broadcast of the restore status");
  if (failure) std::rethrow_exception(failure);
  if (!ok) throw SolverError("rank 0 could not restore '" + solverstate + "' (see its message)");
  int32_t counters[2] = {iter_, current_step_};
  comm_->Broadcast(counters, sizeof counters, "broadcast of the restored iteration");
  iter_ = counters[0];
  current_step_ = counters[1];
  for (size_t i = 0; i < history_.size(); ++i) {
    std::vector<float> h(static_cast<size_t>(history_count_[i]));
    if (comm_->root()) device_->Read(history_[i], h.data(), history_count_[i]);
    comm_->Broadcast(h.data(), h.size() * sizeof(float), "broadcast of the solver history");
    if (!comm_->root()) device_->Write(history_[i], h.data(), history_count_[i]);
  }
  BroadcastParameters();
}

void Solver::RestoreFromFile(const std::string& solverstate) {
  caffe::SolverState state;
  ReadProtoFromBinaryFile(solverstate, &state);
  if (state.history_size() != static_cast<int>(history_.size()))
    throw SolverError("solver state '" + solverstate + "' has " +
                      std::to_string(state.history_size()) + " history blobs, the " + type_ +
                      " solver of net '" + net_->name() + "' needs " +
                      std::to_string(history_.size()));
  for (int i = 0; i < state.history_size(); ++i)
    if (state.history(i).data_size() != history_count_[i])
      throw SolverError("solver state '" + solverstate + "' history blob " + std::to_string(i) +
                        " has " + std::to_string(state.history(i).data_size()) +
                        " values, parameter needs " + std::to_string(history_count_[i]));
  for (int i = 0; i < state.history_size(); ++i)
    device_->Write(history_[i], state.history(i).data().data(), history_count_[i]);
  if (state.has_learned_net()) {
    std::string model = state.learned_net();
    if (!Exists(model) && !model.empty() && model[0] != '/') {
      const size_t slash = solverstate.rfind('/');
      if (slash != std::string::npos) model = solverstate.substr(0, slash + 1) + model;
    }
    net_->CopyTrainedLayersFrom(model);
  }
  iter_ = state.iter();
  current_step_ = state.current_step();
  net_->ParamsUpdated();
  for (auto& t : test_nets_) t->ParamsUpdated();
}

}  // namespace mpcaffe
