// bench/allreduce_bench.cc — the gradient allreduce alone, under `mpirun -np N`: the median time
// of Communicator::StartSum + Wait for gradient sizes from 1 MB to AlexNet's 244 MB, in fp32 and
// in fp16 on the wire, and the bandwidth it reaches (the bus bandwidth of a ring allreduce,
// 2(N−1)/N · bytes / time). Rank 0 prints one line per size; docs/BENCHMARKS.md "Scale-out".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/distributed.h"

namespace {

constexpr char kUsage[] =
    "usage: mpirun -np N mpcaffe_allreduce_bench [repetitions per size (5)] [largest gradient "
    "in MB (244)]\n";

/// The number `arg` spells (digits, at most one '.'), or 0 when it is not a positive one.
double Positive(const std::string& arg) {
  if (arg.empty() || arg.find_first_not_of("0123456789.") != std::string::npos ||
      std::count(arg.begin(), arg.end(), '.') > 1 || arg.size() > 12)
    return 0;
  return std::atof(arg.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using mpcaffe::Communicator;
  // Arguments are checked before MPI starts: a flag, a malformed number or a third argument is
  // refused with the usage (status 2; no repetition count of 0 reaches the median below).
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* what = i > 2                    ? "unexpected argument"
                       : arg.rfind("-", 0) == 0 ? "unknown flag"
                       : Positive(arg) <= 0 || (i == 1 && arg.find('.') != std::string::npos)
                           ? "not a positive number"
                           : nullptr;
    if (what) {
      std::fprintf(stderr, "mpcaffe_allreduce_bench: %s '%s'\n%s", what, arg.c_str(), kUsage);
      return 2;
    }
  }
  const int reps = argc > 1 ? static_cast<int>(Positive(argv[1])) : 5;
  const size_t max_bytes =
      std::max<size_t>(argc > 2 ? static_cast<size_t>(Positive(argv[2]) * 1e6) : 244000000, 1);
  Communicator& comm = Communicator::World();
  if (comm.root())
    std::printf("ranks %d, %d repetitions per size (median)\n%12s %12s %12s %12s %12s\n",
                comm.size(), reps, "grad MB", "fp32 ms", "fp32 GB/s", "fp16 ms", "fp16 GB/s");
  for (size_t bytes = 1000000; bytes <= max_bytes;
       bytes = bytes * 4 > max_bytes && bytes < max_bytes ? max_bytes : bytes * 4) {
    std::vector<float> grad(bytes / 4, 1.0f);
    double ms[2];
    for (int half = 0; half < 2; ++half) {
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
        const auto start = std::chrono::steady_clock::now();
        auto pending = comm.StartSum(grad.data(), grad.size(), half != 0, "bench");
        comm.Wait(*pending);
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) times.push_back(t);
        std::fill(grad.begin(), grad.end(), 1.0f);
      }
      std::sort(times.begin(), times.end());
      ms[half] = 1e3 * times[times.size() / 2];
    }
    const double ring = comm.size() > 1 ? 2.0 * (comm.size() - 1) / comm.size() : 0;
    if (comm.root())
      std::printf("%12.1f %12.2f %12.2f %12.2f %12.2f\n", bytes / 1e6, ms[0],
                  ring * bytes / (ms[0] * 1e6), ms[1], ring * bytes / 2 / (ms[1] * 1e6));
    if (bytes == max_bytes) break;
  }
  return 0;
}
