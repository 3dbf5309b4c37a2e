// net/distributed.h — data-parallel jobs over MPI: the process's communicator (rank, size, and
// collectives that abort the whole job with a clear message instead of hanging when another
// rank stops answering) and the bucketed gradient allreduce the Solver runs during the backward
// pass. Built without MPI, every process is a job of one, and a process an MPI launcher started
// is told that MPI support was not built.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "device/error.h"
#include "layers/blob.h"

namespace mpcaffe {

class Net;

/// A data-parallel job cannot run: MPI support not built, ranks that disagree about the net,
/// an MPI call that failed. The message names the rank and what is wrong.
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// Whether this build has MPI support (CMake found MPI and MPCAFFE_WITH_MPI is on).
bool MpiBuilt();

/// The processes of one data-parallel job and the collectives between them. Every rank must call
/// the collectives in the same order with the same sizes.
class Communicator {
 public:
  /// The process's job: every process of MPI_COMM_WORLD when an MPI launcher started the
  /// process (MPI is initialised on the first call unless the program did it already, e.g.
  /// mpi4py, and finalised at exit; the Data layers built afterwards read the rank's shard),
  /// else a job of one. Throws DistributedError when a launcher started more than one process
  /// but this build has no MPI support.
  static Communicator& World();
  /// A job of one, whatever the launcher (a single-process reference inside an MPI job).
  static Communicator& Self();

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Rank 0: the one that logs, tests and snapshots for the job.
  bool root() const { return rank_ == 0; }
  /// Seconds a collective waits for the other ranks before it aborts the job
  /// (MPCAFFE_MPI_TIMEOUT, default 300).
  double timeout() const { return timeout_; }
  /// Whether MPI lets a second thread make the MPI calls (MPI_THREAD_SERIALIZED or more): the
  /// gradient allreduce then runs on a thread of its own, overlapping backward.
  bool threaded() const { return threaded_; }

  enum class Op { kSum, kMin, kMax };
  /// Reduces `n` values in place over every rank; `what` names them in a timeout message.
  void Allreduce(float* data, size_t n, Op op, const std::string& what);
  void Allreduce(double* data, size_t n, Op op, const std::string& what);
  /// Rank 0's `bytes` bytes at `data` to every rank.
  void Broadcast(void* data, size_t bytes, const std::string& what);
  /// Prints "mpcaffe: rank r of n: <message>; aborting the job" on stderr and ends every rank of
  /// the job (MPI_Abort). In a job of one it only throws DistributedError(message).
  [[noreturn]] void Abort(const std::string& message, int code = 1);

  /// A reduction of floats started by StartSum (in place, or in fp16 on the wire).
  class Pending;
  struct PendingDeleter {
    void operator()(Pending* p) const;
  };
  using PendingSum = std::unique_ptr<Pending, PendingDeleter>;
  /// Starts summing `n` floats at `data` over every rank without waiting. With `half`, the
  /// values travel as fp16 (each addition in fp32, rounded to fp16) and come back as floats.
  /// `data` must stay valid until Wait.
  PendingSum StartSum(float* data, size_t n, bool half, const std::string& what);
  /// Lets started reductions progress (MPI progresses them inside MPI calls); true when done.
  bool Test(Pending& pending);
  /// Waits for `pending`. After timeout() seconds a watchdog thread prints what was waited for
  /// and ends the process, and with it (through mpirun) the job. With `until`, polls gently
  /// (MPI_Test every 100 µs, leaving the core to the computation) until *until is true, then
  /// waits in MPI_Wait, which drives the transfer at full speed but keeps its core busy.
  void Wait(Pending& pending, const std::atomic<bool>* until = nullptr);

  ~Communicator();

 private:
  Communicator() = default;
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;  // null in a job of one
  int rank_ = 0, size_ = 1;
  double timeout_ = 300;
  bool threaded_ = false;
};

/// For a process about to end on an error: in an MPI job of several ranks (which would wait
/// for this one) prints `message` and aborts the job; otherwise returns.
void AbortJobOnError(const std::string& message);

/// Calibration over the ranks' shards: every quantizer of `net` (nested nets included) that
/// observed a range gets the range over every rank, min of the minima and max of the maxima,
/// so the ranges equal those of one process observing all the shards' data, bit for bit.
void ReduceObservedRanges(Net& net, Communicator& comm);

/// How the gradients travel (mpcaffe train --allreduce-bucket-mb / --fp16-allreduce).
struct AllreduceOptions {
  /// Gradients are summed in buckets of about this many bytes (a bucket holds whole
  /// parameters): fewer, larger messages than one per parameter, started as soon as the
  /// backward pass has finished every parameter of the bucket.
  size_t bucket_bytes = 25u << 20;
  /// Sum in fp16 on the wire (half the bytes; each addition in fp32, rounded to fp16).
  bool half = false;
};

/// Sums the gradients of a net's trained parameters over the ranks of a job while the backward
/// pass runs: parameters are grouped into buckets in the order backward finishes them, and a
/// bucket's allreduce starts as soon as the layers below it begin their backward, on a sender
/// thread (Communicator::threaded()) that drives it while backward goes on.
class GradientAllreduce {
 public:
  /// `params`: the parameters to sum (each once; a subset of net.learnable_params()).
  GradientAllreduce(Net& net, std::vector<Blob*> params, Communicator& comm,
                    const AllreduceOptions& options = {});
  ~GradientAllreduce();
  /// Net::Backward, a run of layers at a time, starting each bucket's sum once its gradients
  /// are final.
  void Backward();
  /// Waits for every bucket, writes the summed gradients back into the parameters' diffs and
  /// returns the sum of `loss` over the ranks.
  float Finish(float loss);

  int buckets() const;
  /// Bytes one step sends into the allreduce (the gradients, fp32 or fp16).
  size_t bytes_per_step() const;
  /// Seconds spent inside Finish waiting for the sums, and steps, since construction.
  double wait_seconds() const { return wait_seconds_; }
  int steps() const { return steps_; }

 private:
  struct Bucket;
  struct Sender;
  void StartSender();
  Net* net_;
  Communicator* comm_;
  AllreduceOptions options_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<Sender> sender_;  // null: buckets progress inside the main thread's MPI calls
  double wait_seconds_ = 0;
  int steps_ = 0;
};

}  // namespace mpcaffe
