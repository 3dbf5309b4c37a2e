// bench/launch_bench.cc — the fixed cost of a kernel launch on each OpenCL device: N launches of an
// empty kernel enqueued back to back with one Finish at the end, then the same with a Finish after
// every launch (the cost of a host synchronisation), and with a 1-D grid of 64 work-groups
// (Launch1D's usual shape) instead of one work-item. Per launch: median of `runs` batches of N
// launches each.
//   build/bin/mpcaffe_launch_bench [launches=1000] [runs=5] [device selector, default all]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per launch: the median over `runs` batches of `n` launches.
template <typename F>
double PerLaunchUs(mpcaffe::Device& dev, int n, int runs, F launch_one) {
  std::vector<double> us;
  launch_one(true);  // warm-up: first launches specialize (PoCL) or JIT
  dev.Finish();
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) launch_one(i + 1 == n);
    dev.Finish();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
  }
  return Median(us);
}

void Measure(mpcaffe::Device& dev, int n, int runs) {
  using namespace mpcaffe;
  KernelWriter w(KernelTarget::Of(dev), "bench_launch");
  w.Kernel("empty_kernel").Out("int", "y").Value("int", "n").Body("  if (n < 0) y[0] = n;\n");
  Kernel k =
      dev.GetProgram(w.Source(), "", ProgramHints::OneDimensional())->GetKernel("empty_kernel");
  auto y = dev.Alloc<int32_t>(1);
  auto one = [&](size_t global, size_t local, bool finish_each) {
    return PerLaunchUs(dev, n, runs, [&, global, local, finish_each](bool) {
      k.Arg(y).Arg(int32_t{1}).Launch({global, 1, 1}, {local, 1, 1});
      if (finish_each) dev.Finish();
    });
  };
  const double single = one(1, 1, false), single_sync = one(1, 1, true);
  const double grid = one(64 * 64, 64, false), grid_sync = one(64 * 64, 64, true);
  std::printf(
      "%-44s 1 work-item: %7.2f us/launch, %7.2f us with Finish each | 64x64 grid: %7.2f "
      "us/launch, %7.2f us with Finish each\n",
      dev.Describe().c_str(), single, single_sync, grid, grid_sync);
}

constexpr char kUsage[] =
    "usage: mpcaffe_launch_bench [launches (1000)] [runs (5)] [device selector (every OpenCL "
    "device)]\n";

/// A positive count from the command line, or 0 when `arg` is not one.
int Count(const char* arg) {
  const std::string s = arg;
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::atoi(arg);
}

}  // namespace

int main(int argc, char** argv) {
  // Arguments are checked before any device is opened: a flag or a malformed count is refused
  // with the usage (status 2), --help prints it.
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* what = i > 3                         ? "unexpected argument"
                       : arg.rfind("-", 0) == 0      ? "unknown flag"
                       : i < 3 && Count(argv[i]) < 1 ? "not a positive count"
                                                     : nullptr;
    if (what) {
      std::fprintf(stderr, "mpcaffe_launch_bench: %s '%s'\n%s", what, arg.c_str(), kUsage);
      return 2;
    }
  }
  const int n = argc > 1 ? Count(argv[1]) : 1000;
  const int runs = argc > 2 ? Count(argv[2]) : 5;
  try {
    std::printf("%d empty-kernel launches per batch, median of %d batches\n", n, runs);
    if (argc > 3) {
      Measure(mpcaffe::SelectDevice(argv[3]), n, runs);
    } else {
      for (mpcaffe::Device* d : mpcaffe::DeviceList())
        if (d->backend() == mpcaffe::Backend::kOpenCL) Measure(*d, n, runs);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe_launch_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
