// tools/cmd_train.cc — `mpcaffe train --solver <prototxt> [--weights a.caffemodel[,b...]] |
// [--snapshot <solverstate>] [--device i] [--synthetic] [--no-progress]
// [--allreduce-bucket-mb M] [--fp16-allreduce]`: trains a net as BVLC's `caffe train` does
// (fp32), printing the loss and test scores in BVLC's format on stdout and a tqdm-style progress
// bar (iteration/max_iter, it/s, ETA, last loss) on stderr. Under `mpirun -np N` it trains
// data-parallel (net/distributed.h): rank 0 prints, tests and snapshots for the job.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "net/solver.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/progress_bar.h"

namespace mpcaffe::tools {
namespace {

/// The training progress on stderr: redrawn in place (at most 10 times a second) on a terminal,
/// else a plain line at most every `plain_interval` seconds and at the end. BVLC's log lines go
/// to stdout between redraws, with the bar cleared first so the two never share a line.
class TrainProgress {
 public:
  TrainProgress(int start_iter, int max_iter, bool enabled, double plain_interval = 5.0)
      : start_iter_(start_iter), max_iter_(max_iter), enabled_(enabled),
        tty_(isatty(fileno(stderr)) != 0), plain_interval_(plain_interval), start_(Clock::now()) {}

  /// Writes the solver's pending log text to stdout, then redraws the bar for `iter`.
  void Update(int iter, float loss, std::ostringstream& log) {
    iter_ = iter;
    loss_ = loss;
    Flush(log);
    Draw(iter >= max_iter_);
  }
  /// Flushes pending log text and ends the bar's line.
  void Finish(std::ostringstream& log) {
    Flush(log);
    if (!enabled_ || finished_) return;
    if (!drawn_ || iter_ != last_iter_) Draw(true);
    if (tty_ && drawn_) std::fputc('\n', stderr);
    finished_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Flush(std::ostringstream& log) {
    const std::string text = log.str();
    if (text.empty()) return;
    if (enabled_ && tty_ && drawn_) std::fputs("\r\033[K", stderr);  // clear the bar's line
    std::fflush(stderr);
    std::cout << text << std::flush;
    log.str("");
    log.clear();
    if (enabled_ && tty_) {  // the cleared bar comes back below the log lines
      drawn_ = false;
      Draw(true);
    }
  }

  void Draw(bool force) {
    if (!enabled_ || finished_) return;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (!force && since < (tty_ ? 0.1 : plain_interval_)) return;
    if (!tty_ && drawn_ && iter_ == last_iter_) return;
    last_ = now;
    last_iter_ = iter_;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const int done = iter_ - start_iter_, total = std::max(1, max_iter_ - start_iter_);
    const double rate = elapsed >= 0.2 ? done / elapsed : 0;  // no rate from a single instant
    const double eta = rate > 0 ? (max_iter_ - iter_) / rate : -1;
    const double frac = std::min(1.0, std::max(0.0, static_cast<double>(done) / total));
    std::string bar;
    if (tty_) {  // ten cells in eighths, as tqdm draws them
      static const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
      const int width = 10, eighths = static_cast<int>(frac * width * 8);
      int cells = eighths / 8;
      for (int i = 0; i < cells; ++i) bar += "█";
      if (cells < width && eighths % 8) bar += kEighths[eighths % 8], ++cells;
      bar += std::string(width - cells, ' ');
      bar = "|" + bar + "|";
    }
    char speed[32] = "? it/s";
    if (rate > 0) std::snprintf(speed, sizeof speed, "%.2f it/s", rate);
    char line[256];
    std::snprintf(line, sizeof line, "train %3d%%%s %d/%d [%s<%s, %s] loss %.4g",
                  static_cast<int>(frac * 100), bar.c_str(), iter_, max_iter_,
                  ClockText(elapsed).c_str(), ClockText(eta).c_str(), speed, loss_);
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s", line);
    else
      std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
    drawn_ = true;
  }

  int start_iter_, max_iter_;
  bool enabled_, tty_;
  double plain_interval_;
  Clock::time_point start_, last_{};
  int iter_ = 0, last_iter_ = -1;
  float loss_ = 0;
  bool drawn_ = false, finished_ = false;
};

constexpr char kUsage[] =
    "usage: mpcaffe train --solver <solver.prototxt> [--weights <a.caffemodel>[,<b>...]]\n"
    "                     [--snapshot <x.solverstate>] [--device i] [--synthetic]\n"
    "                     [--no-progress] [--allreduce-bucket-mb M] [--fp16-allreduce]\n"
    "  --weights   initialise from trained weights (fine-tuning)\n"
    "  --snapshot  resume from a solver state (with the .caffemodel it names)\n"
    "  --synthetic replace Data layers by seeded random inputs (timing runs)\n"
    "  --no-progress  no progress bar on stderr\n"
    "  under mpirun -np N (data-parallel, one device per rank):\n"
    "  --allreduce-bucket-mb  gradients summed in buckets of about M MB (25)\n"
    "  --fp16-allreduce       gradients sent as fp16 (summed in fp32 per step)\n";

int Usage(const std::string& why) { return UsageError("train", why); }

int RunTrain(const std::vector<std::string>& args) {
  const std::string solver_path = FlagValue(args, "--solver");
  if (solver_path.empty()) return Usage("--solver is required");
  const std::string weights = FlagValue(args, "--weights");
  const std::string snapshot = FlagValue(args, "--snapshot");
  if (!weights.empty() && !snapshot.empty())
    return Usage("give --weights or --snapshot, not both");
  AllreduceOptions allreduce;
  allreduce.half = HasFlag(args, "--fp16-allreduce");
  if (const std::string mb = FlagValue(args, "--allreduce-bucket-mb"); !mb.empty()) {
    double value = 0;
    try {
      value = std::stod(mb);
    } catch (const std::exception&) {
      return Usage("--allreduce-bucket-mb needs a number of megabytes");
    }
    if (!(value > 0)) return Usage("--allreduce-bucket-mb must be positive");
    allreduce.bucket_bytes = static_cast<size_t>(value * (1 << 20));
  }
  Communicator* comm = nullptr;
  try {
    comm = &Communicator::World();
    const bool root = comm->root();
    const std::string device_flag = FlagValue(args, "--device");
    Device& device = DeviceOrDefault(device_flag);
    if (comm->size() > 1)  // each rank says where it runs (stderr: stdout is rank 0's log)
      std::fprintf(stderr, "mpcaffe train: rank %d of %d on device %s\n", comm->rank(),
                   comm->size(), device.Describe().c_str());
    if (root) std::cout << "Using device: " << device.Describe() << "\n";
    NetOptions base;
    base.synthetic_data = HasFlag(args, "--synthetic");
    auto solver = Solver::FromFile(solver_path, device, base);
    solver->set_allreduce_options(allreduce);
    if (!weights.empty()) {
      std::stringstream list(weights);
      std::string file;
      while (std::getline(list, file, ',')) {
        if (root) std::cout << "Finetuning from " << file << "\n";
        solver->net().CopyTrainedLayersFrom(file);
        solver->net().ParamsUpdated();
      }
      solver->BroadcastParameters();  // rank 0's copy everywhere
    }
    if (comm->size() > 1 && root) {
      const GradientAllreduce& r = *solver->gradient_allreduce();
      std::cout << "Data-parallel over " << comm->size() << " ranks (MPI): batch " << comm->size()
                << " x the net's, gradients " << r.bytes_per_step() / 1e6 << " MB per step in "
                << r.buckets() << " allreduce bucket(s)" << (allreduce.half ? " as fp16" : "")
                << (comm->threaded() ? ", summed by a sender thread during backward" : "")
                << "\n";
    }
    if (root) std::cout << "Starting Optimization\n" << std::flush;
    // The solver logs into a buffer the progress display hands to stdout between redraws.
    std::ostringstream log;
    solver->set_log(&log);
    const bool bar = root && !HasFlag(args, "--no-progress");
    TrainProgress progress(solver->iter(), solver->param().max_iter(), bar);
    bool started = false;
    solver->set_iteration_callback([&](int iter, float loss) {
      if (!started) {  // a restored solver starts counting at its snapshot
        progress = TrainProgress(iter - 1, solver->param().max_iter(), bar);
        started = true;
      }
      progress.Update(iter, loss, log);
    });
    try {
      solver->Solve(snapshot);
    } catch (...) {
      progress.Finish(log);
      throw;
    }
    progress.Finish(log);
    if (const GradientAllreduce* r = solver->gradient_allreduce(); r && root && r->steps() > 0)
      std::cout << "Allreduce: " << r->buckets() << " bucket(s), " << r->bytes_per_step() / 1e6
                << " MB per step, " << 1e3 * r->wait_seconds() / r->steps()
                << " ms per step waiting for the sums after backward\n";
    return 0;
  } catch (const std::exception& e) {
    // In a job of several ranks the others would wait for this one: end them all.
    AbortJobOnError(std::string("mpcaffe train: ") + e.what());
    std::fprintf(stderr, "mpcaffe train: %s\n", e.what());
    return 1;
  }
}

RegisterCommand train_command("train", "train a net with a solver (fp32): --solver s.prototxt",
                              kUsage,
                              {{"--solver", "--weights", "--snapshot", "--device",
                                "--allreduce-bucket-mb"},
                               {"--synthetic", "--no-progress", "--fp16-allreduce"}},
                              RunTrain);

}  // namespace
}  // namespace mpcaffe::tools
