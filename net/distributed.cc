// net/distributed.cc — the MPI communicator (initialisation, collectives waited for under a
// watchdog that ends the job after MPCAFFE_MPI_TIMEOUT, fp16 summation) and the bucketed
// gradient allreduce. Without MPCAFFE_HAVE_MPI the
// communicator is a job of one and refuses a launch by mpirun.
#include "net/distributed.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "codegen/datatype.h"
#include "device/settings.h"
#include "layers/layer.h"
#include "layers/lmdb_io.h"
#include "net/net.h"
#include "quant/quantizer.h"

#ifdef MPCAFFE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings need another library)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mpcaffe {

bool MpiBuilt() {
#ifdef MPCAFFE_HAVE_MPI
  return true;
#else
  return false;
#endif
}

namespace {

int LaunchedWorldSize() {
  const std::string& text = GetSettings().mpi_world_size;
  return text.empty() ? 0 : std::atoi(text.c_str());
}

double TimeoutFromSettings() {
  const std::string& text = GetSettings().mpi_timeout;
  if (text.empty()) return 300;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0))
    throw DistributedError("MPCAFFE_MPI_TIMEOUT=" + text + ": expected a positive number of seconds");
  return v;
}

}  // namespace

#ifdef MPCAFFE_HAVE_MPI

namespace {

bool g_we_initialised = false;
MPI_Comm g_comm = MPI_COMM_NULL;

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  if (g_we_initialised) MPI_Finalize();
}

// fp16 sum for MPI: each addition in fp32, the result rounded to fp16.
void HalfSum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FloatToHalf(HalfToFloat(a[i]) + HalfToFloat(b[i]));
}

MPI_Op ToMpi(Communicator::Op op) {
  switch (op) {
    case Communicator::Op::kSum: return MPI_SUM;
    case Communicator::Op::kMin: return MPI_MIN;
    case Communicator::Op::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

}  // namespace

struct Communicator::Mpi {
  MPI_Op half_sum = MPI_OP_NULL;
  // The watchdog: while a Wait is armed, a thread of its own ends the process when the wait
  // passes its deadline (the waiting thread is inside MPI_Wait, which never returns when a
  // peer stopped answering). The process's non-zero exit makes mpirun end the whole job.
  std::mutex mutex;
  std::condition_variable changed;
  bool armed = false;
  std::chrono::steady_clock::time_point deadline;
  std::string message;
  bool watchdog_started = false;
};

class Communicator::Pending {
 public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::string what;
  bool done = false;
  // fp16 on the wire: the halves, and where the floats go back.
  std::vector<uint16_t> halves;
  float* out = nullptr;
};

Communicator& Communicator::World() {
  static Communicator* world = [] {
    auto* c = new Communicator();
    c->timeout_ = TimeoutFromSettings();
    if (LaunchedWorldSize() < 1) return c;  // not started by an MPI launcher: a job of one
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    if (!initialised) {
      // SERIALIZED: the gradient allreduce runs on a thread of its own while backward runs.
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      g_we_initialised = true;
    } else {
      MPI_Query_thread(&provided);
    }
    c->threaded_ = provided >= MPI_THREAD_SERIALIZED;
    std::atexit(FinalizeAtExit);
    // A communicator of our own (the program's MPI_COMM_WORLD traffic, e.g. mpi4py's, stays
    // apart) whose errors come back as codes, turned into messages and a job abort.
    MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &c->rank_);
    MPI_Comm_size(g_comm, &c->size_);
    c->mpi_ = std::make_unique<Mpi>();
    MPI_Op_create(&HalfSum, 1, &c->mpi_->half_sum);
    SetDataShard({c->rank_, c->size_});
    return c;
  }();
  return *world;
}

Communicator::~Communicator() = default;

void Communicator::Abort(const std::string& message, int code) {
  if (size_ <= 1 || !mpi_) throw DistributedError(message);
  std::fprintf(stderr, "mpcaffe: rank %d of %d: %s; aborting the job\n", rank_, size_,
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(g_comm, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
}

namespace {

std::string MpiErrorText(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace

bool Communicator::Test(Pending& p) {
  if (p.done) return true;
  int flag = 0;
  const int rc = MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) Abort(p.what + ": " + MpiErrorText(rc));
  if (!flag) return false;
  p.done = true;
  if (p.out)
    for (size_t i = 0; i < p.halves.size(); ++i) p.out[i] = HalfToFloat(p.halves[i]);
  return true;
}

void Communicator::Wait(Pending& p, const std::atomic<bool>* until) {
  if (p.done) return;
  Mpi& m = *mpi_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.armed = true;
    m.deadline = std::chrono::steady_clock::now() +
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(timeout_));
    m.message = "mpcaffe: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " +
                p.what + ": waited more than " + std::to_string(static_cast<int>(timeout_)) +
                " s for the other ranks (one died, hangs, or runs another number of iterations; "
                "MPCAFFE_MPI_TIMEOUT sets the limit); aborting the job";
    if (!m.watchdog_started) {
      m.watchdog_started = true;
      std::thread([&m] {
        std::unique_lock<std::mutex> lock(m.mutex);
        for (;;) {
          if (!m.armed) {
            m.changed.wait(lock);
            continue;
          }
          m.changed.wait_until(lock, m.deadline);
          if (m.armed && std::chrono::steady_clock::now() >= m.deadline) {
            std::fprintf(stderr, "%s\n", m.message.c_str());
            std::fflush(stderr);
            std::_Exit(1);  // mpirun sees the exit and ends the other ranks
          }
        }
      }).detach();
    }
  }
  m.changed.notify_all();
  int rc = MPI_SUCCESS;
  while (until && !until->load() && rc == MPI_SUCCESS) {
    int flag = 0;
    rc = MPI_Test(&p.request, &flag, MPI_STATUS_IGNORE);
    if (flag) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // Blocking: MPI's progress engine drives the collective at full speed (polling MPI_Test with
  // sleeps in between paces a many-fragment allreduce by the sleeps).
  if (rc == MPI_SUCCESS) rc = MPI_Wait(&p.request, MPI_STATUS_IGNORE);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.armed = false;
  }
  m.changed.notify_all();
  if (rc != MPI_SUCCESS) Abort(p.what + ": " + MpiErrorText(rc));
  p.done = true;
  if (p.out)
    for (size_t i = 0; i < p.halves.size(); ++i) p.out[i] = HalfToFloat(p.halves[i]);
}

Communicator::PendingSum Communicator::StartSum(float* data, size_t n, bool half,
                                               const std::string& what) {
  PendingSum p(new Pending());
  p->what = what;
  if (size_ <= 1 || n == 0) {
    p->done = true;
    return p;
  }
  if (n > static_cast<size_t>(INT32_MAX))
    throw DistributedError(what + ": " + std::to_string(n) + " values in one message (at most 2^31-1)");
  int rc;
  if (half) {
    p->halves.resize(n);
    for (size_t i = 0; i < n; ++i) p->halves[i] = FloatToHalf(data[i]);
    p->out = data;
    rc = MPI_Iallreduce(MPI_IN_PLACE, p->halves.data(), static_cast<int>(n), MPI_UINT16_T,
                        mpi_->half_sum, g_comm, &p->request);
  } else {
    rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, g_comm,
                        &p->request);
  }
  if (rc != MPI_SUCCESS) Abort(what + ": " + MpiErrorText(rc));
  return p;
}

void Communicator::Allreduce(float* data, size_t n, Op op, const std::string& what) {
  if (size_ <= 1 || n == 0) return;
  Pending p;
  p.what = what;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, ToMpi(op),
                                g_comm, &p.request);
  if (rc != MPI_SUCCESS) Abort(what + ": " + MpiErrorText(rc));
  Wait(p);
}

void Communicator::Allreduce(double* data, size_t n, Op op, const std::string& what) {
  if (size_ <= 1 || n == 0) return;
  Pending p;
  p.what = what;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, ToMpi(op),
                                g_comm, &p.request);
  if (rc != MPI_SUCCESS) Abort(what + ": " + MpiErrorText(rc));
  Wait(p);
}

void Communicator::Broadcast(void* data, size_t bytes, const std::string& what) {
  if (size_ <= 1 || bytes == 0) return;
  // In pieces of at most 1 GiB (MPI counts are int).
  for (size_t off = 0; off < bytes; off += size_t{1} << 30) {
    Pending p;
    p.what = what;
    const int count = static_cast<int>(std::min(bytes - off, size_t{1} << 30));
    const int rc = MPI_Ibcast(static_cast<char*>(data) + off, count, MPI_BYTE, 0, g_comm,
                              &p.request);
    if (rc != MPI_SUCCESS) Abort(what + ": " + MpiErrorText(rc));
    Wait(p);
  }
}

#else  // no MPI: a job of one

struct Communicator::Mpi {};
class Communicator::Pending {};

Communicator& Communicator::World() {
  static Communicator* world = [] {
    const int launched = LaunchedWorldSize();
    if (launched > 1)
      throw DistributedError(
          "started by an MPI launcher as one of " + std::to_string(launched) +
          " processes, but this mpcaffe was built without MPI support (install Open MPI, "
          "e.g. scripts/install-deps.sh, and configure again with MPCAFFE_WITH_MPI=ON)");
    auto* c = new Communicator();
    c->timeout_ = TimeoutFromSettings();
    return c;
  }();
  return *world;
}

Communicator::~Communicator() = default;
void Communicator::Abort(const std::string& message, int) { throw DistributedError(message); }
bool Communicator::Test(Pending&) { return true; }
void Communicator::Wait(Pending&, const std::atomic<bool>*) {}
Communicator::PendingSum Communicator::StartSum(float*, size_t, bool, const std::string&) {
  return PendingSum(new Pending());
}
void Communicator::Allreduce(float*, size_t, Op, const std::string&) {}
void Communicator::Allreduce(double*, size_t, Op, const std::string&) {}
void Communicator::Broadcast(void*, size_t, const std::string&) {}

#endif

void Communicator::PendingDeleter::operator()(Pending* p) const { delete p; }

Communicator& Communicator::Self() {
  static Communicator* self = [] {
    auto* c = new Communicator();
    c->timeout_ = TimeoutFromSettings();
    return c;
  }();
  return *self;
}

void AbortJobOnError(const std::string& message) {
  Communicator* world = nullptr;
  try {
    world = &Communicator::World();
  } catch (const std::exception&) {
    return;  // no job to end (e.g. MPI support not built: the message says so)
  }
  if (world->size() > 1) world->Abort(message);
}

namespace {

void CollectQuantizers(Net& net, std::vector<quant::Quantizer*>* out) {
  for (size_t i = 0; i < net.layers().size(); ++i) {
    for (quant::Quantizer* q : net.layers()[i]->quantizers()) out->push_back(q);
    for (Net* nested : net.nested_nets(static_cast<int>(i))) CollectQuantizers(*nested, out);
  }
}

}  // namespace

void ReduceObservedRanges(Net& net, Communicator& comm) {
  if (comm.size() <= 1) return;
  std::vector<quant::Quantizer*> quantizers;  // the same order on every rank: the same net
  CollectQuantizers(net, &quantizers);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> low(quantizers.size(), inf), high(quantizers.size(), -inf);
  for (size_t i = 0; i < quantizers.size(); ++i)
    if (quantizers[i]->has_observed()) {
      low[i] = quantizers[i]->observed_min();
      high[i] = quantizers[i]->observed_max();
    }
  comm.Allreduce(low.data(), low.size(), Communicator::Op::kMin, "allreduce of observed minima");
  comm.Allreduce(high.data(), high.size(), Communicator::Op::kMax, "allreduce of observed maxima");
  for (size_t i = 0; i < quantizers.size(); ++i)
    if (low[i] <= high[i]) quantizers[i]->SetObserved(low[i], high[i]);
}

// ---- GradientAllreduce ----

struct GradientAllreduce::Bucket {
  std::vector<Blob*> params;
  int ready_layer = 0;  // the bucket's gradients are final once Backward has run this layer
  std::vector<float> values;
  Communicator::PendingSum pending;  // without the sender thread
  std::string what;
};

// The sender: a thread that sums the buckets Backward hands it, one after the other, in
// MPI_Wait (MPI progresses a collective inside MPI calls; a thread blocked in one moves it on
// while the main thread computes). The main thread makes no MPI call between Backward and
// Finish, so MPI_THREAD_SERIALIZED suffices.
struct GradientAllreduce::Sender {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<size_t> queue;
  size_t started = 0, done = 0;
  bool stop = false;
  std::atomic<bool> hurry{false};  // Finish is waiting: nothing left to overlap with
  std::exception_ptr failure;
  std::thread thread;
};

namespace {

/// Every parameter blob of layer i of `net`, its nested nets' included.
void LayerParams(Net& net, int i, std::vector<Blob*>* out) {
  Layer& layer = *net.layers()[i];
  for (int j = 0; j < layer.num_params(); ++j) out->push_back(&layer.param_blob(j));
  for (Net* nested : net.nested_nets(i))
    for (Blob* b : nested->learnable_params()) out->push_back(b);
}

}  // namespace

GradientAllreduce::GradientAllreduce(Net& net, std::vector<Blob*> params, Communicator& comm,
                                     const AllreduceOptions& options)
    : net_(&net), comm_(&comm), options_(options) {
  // The lowest layer using each parameter: its gradient is final after that layer's backward.
  std::map<const Blob*, int> lowest;
  for (int i = static_cast<int>(net.layers().size()) - 1; i >= 0; --i) {
    std::vector<Blob*> blobs;
    LayerParams(net, i, &blobs);
    for (Blob* b : blobs) lowest[b] = i;
  }
  // Buckets in the order backward finishes the parameters (highest layer first).
  std::stable_sort(params.begin(), params.end(), [&](Blob* a, Blob* b) {
    return lowest[a] > lowest[b];
  });
  const size_t element = options_.half ? 2 : 4;
  size_t bytes = 0;
  for (Blob* b : params) {
    if (b->count() == 0) continue;
    if (buckets_.empty() || bytes >= options_.bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& bucket = buckets_.back();
    bucket.params.push_back(b);
    bucket.ready_layer = lowest[b];
    bytes += static_cast<size_t>(b->count()) * element;
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& bucket = buckets_[k];
    size_t n = 0;
    for (Blob* b : bucket.params) n += static_cast<size_t>(b->count());
    bucket.values.resize(n);
    bucket.what = "allreduce of gradient bucket " + std::to_string(k + 1) + " of " +
                  std::to_string(buckets_.size()) + " (" + std::to_string(n) + " values)";
  }
  if (comm.size() > 1 && comm.threaded()) StartSender();
}

GradientAllreduce::~GradientAllreduce() {
  if (!sender_) return;
  {
    std::lock_guard<std::mutex> lock(sender_->mutex);
    sender_->stop = true;
  }
  sender_->cv.notify_all();
  sender_->thread.join();
}

void GradientAllreduce::StartSender() {
  sender_ = std::make_unique<Sender>();
  Sender& s = *sender_;
  s.thread = std::thread([this, &s] {
    for (;;) {
      size_t k;
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
        if (s.queue.empty()) return;
        k = s.queue.front();
        s.queue.pop_front();
      }
      Bucket& b = buckets_[k];
      try {
        auto pending = comm_->StartSum(b.values.data(), b.values.size(), options_.half, b.what);
        comm_->Wait(*pending, &s.hurry);  // gently while backward runs, then at full speed
      } catch (...) {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.failure) s.failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        ++s.done;
      }
      s.cv.notify_all();
    }
  });
}

int GradientAllreduce::buckets() const { return static_cast<int>(buckets_.size()); }

size_t GradientAllreduce::bytes_per_step() const {
  size_t n = 0;
  for (const Bucket& b : buckets_) n += b.values.size();
  return n * (options_.half ? 2 : 4);
}

void GradientAllreduce::Backward() {
  int top = static_cast<int>(net_->layers().size()) - 1;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& bucket = buckets_[k];
    if (bucket.ready_layer <= top) {
      net_->BackwardFromTo(bucket.ready_layer, top);
      top = bucket.ready_layer - 1;
    }
    size_t off = 0;
    for (Blob* b : bucket.params) {
      const float* diff = static_cast<const float*>(b->host_diff());
      std::copy_n(diff, b->count(), bucket.values.begin() + static_cast<std::ptrdiff_t>(off));
      off += static_cast<size_t>(b->count());
    }
    if (sender_) {  // the sender thread sums it while the layers below run backward
      {
        std::lock_guard<std::mutex> lock(sender_->mutex);
        sender_->queue.push_back(k);
        ++sender_->started;
      }
      sender_->cv.notify_all();
      continue;
    }
    bucket.pending = comm_->StartSum(bucket.values.data(), bucket.values.size(), options_.half,
                                     bucket.what);
    for (size_t j = 0; j < k; ++j) comm_->Test(*buckets_[j].pending);  // let earlier ones progress
  }
  if (top >= 0) net_->BackwardFromTo(0, top);
}

float GradientAllreduce::Finish(float loss) {
  const auto start = std::chrono::steady_clock::now();
  bool summed = true;  // Backward ran (every bucket was started)
  if (sender_) {
    sender_->hurry = true;
    std::unique_lock<std::mutex> lock(sender_->mutex);
    sender_->cv.wait(lock, [&] { return sender_->done == sender_->started; });
    sender_->hurry = false;
    summed = sender_->started > 0;
    sender_->started = sender_->done = 0;
    if (sender_->failure) std::rethrow_exception(std::exchange(sender_->failure, nullptr));
  }
  for (Bucket& bucket : buckets_) {
    if (!sender_) {
      summed = bucket.pending != nullptr;
      if (!summed) continue;  // Backward did not run
      comm_->Wait(*bucket.pending);
      bucket.pending.reset();
    }
    if (!summed) continue;
    size_t off = 0;
    for (Blob* b : bucket.params) {
      float* diff = static_cast<float*>(b->mutable_host_diff());
      std::copy_n(bucket.values.begin() + static_cast<std::ptrdiff_t>(off), b->count(), diff);
      off += static_cast<size_t>(b->count());
    }
  }
  comm_->Allreduce(&loss, 1, Communicator::Op::kSum, "allreduce of the loss");
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++steps_;
  return loss;
}

}  // namespace mpcaffe
