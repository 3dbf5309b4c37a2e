// bench/cache_bench.cc — what the kernel cache saves: builds and launches once every
// element-wise kernel of every data type (under two build-option sets), cold then warm, each
// run a fresh process, with PoCL's own kernel cache disabled and enabled; prints times and
// ratios. A benchmark, not a test: `mpcaffe_cache_bench [--json|--markdown] [--repeat r]
// [--smallgrid-env]`.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "codegen/elementwise.h"
#include "codegen/kernel_writer.h"
#include "device/device.h"

extern char** environ;

namespace mpcaffe::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---------------------------------------------------------------------------------------------
// The child: one run of the whole benchmark set in this process.

struct BenchKernel {
  std::string name, source;
  std::string family;  // relu | scale | axpby | convert
  DataType in, out;
};

std::vector<BenchKernel> KernelSet(const KernelTarget& target) {
  std::vector<BenchKernel> set;
  for (DataType t : kAllDataTypes) {
    set.push_back({ElementwiseKernelName("relu", t), ReluSource(target, t), "relu", t, t});
    set.push_back({ElementwiseKernelName("scale", t), ScaleSource(target, t), "scale", t, t});
    set.push_back({ElementwiseKernelName("axpby", t), AxpbySource(target, t), "axpby", t, t});
    for (DataType to : kAllDataTypes)
      set.push_back({ConvertKernelName(t, to), ConvertSource(target, t, to), "convert", t, to});
  }
  return set;
}

// Two option sets make every kernel two distinct programs (the cache keys on the options), as
// a library that builds some programs with fast-math flags would.
const char* const kOptionSets[] = {"-cl-std=CL1.2", "-cl-std=CL1.2 -cl-mad-enable"};

int RunChild() {
  const auto process_start = Clock::now();
  auto cache = cache::EnableProgramCache();
  Device& device = DefaultDevice();
  const auto set = KernelSet(KernelTarget::Of(device));
  constexpr int n = 4096;
  constexpr size_t local = 64;
  auto x = device.Allocate(n * 4);
  auto y = device.Allocate(n * 4);
  device.Zero(x.get(), 0, n * 4);
  device.Zero(y.get(), 0, n * 4);
  ProgramHints hints;
  // --smallgrid-env (see RunDriver) passes no hints, so the backend leaves the
  // POCL_BINARY_SPECIALIZE_WG the driver set alone.
  if (!std::getenv("POCL_BINARY_SPECIALIZE_WG")) hints.local_sizes = {Dim3{local, 1, 1}};
  const auto start = Clock::now();
  double build_seconds = 0, launch_seconds = 0;
  int programs = 0, from_cache = 0;
  for (const char* options : kOptionSets) {
    for (const auto& k : set) {
      auto t = Clock::now();
      auto program = device.BuildProgram(k.source, options, hints);
      build_seconds += Since(t);
      from_cache += program->from_cache();
      ++programs;
      t = Clock::now();
      Kernel kernel = program->GetKernel(k.name);
      kernel.Arg(int32_t{n})
          .ArgBuffer(x.get(), 0, SizeOf(k.in))
          .ArgBuffer(y.get(), 0, SizeOf(k.out));
      if (k.family == "relu") {
        kernel.Arg(0.1f).Arg(int32_t{0}).Arg(int32_t{0}).Arg(int32_t{1 << 30}).Arg(int32_t{1});
        kernel.Arg(int32_t{0}).Arg(int32_t{0});
      } else if (k.family == "scale") {
        kernel.Arg(2.0f).Arg(int32_t{0}).Arg(int32_t{0}).Arg(int32_t{1 << 30}).Arg(int32_t{1});
        kernel.Arg(int32_t{1});
      } else if (k.family == "axpby") {
        kernel.Arg(2.0f).Arg(0.5f).Arg(int32_t{0}).Arg(int32_t{0});
        kernel.Arg(int32_t{1 << 30}).Arg(int32_t{1}).Arg(int32_t{1});
        kernel.Arg(int32_t{1 << 30}).Arg(int32_t{0}).Arg(int32_t{1});
      } else {
        kernel.Arg(0.05f).Arg(int32_t{3}).Arg(0.04f).Arg(int32_t{5});
        kernel.Arg(int32_t{1 << 30}).Arg(int32_t{1});
      }
      kernel.Launch({n, 1, 1}, {local, 1, 1});
      device.Finish();
      launch_seconds += Since(t);
    }
  }
  const double seconds = Since(start);
  const auto c = cache ? cache->counters() : cache::CacheCounters{};
  std::printf(
      "{\"programs\": %d, \"from_cache\": %d, \"seconds\": %.4f, \"build_seconds\": %.4f, "
      "\"first_launch_seconds\": %.4f, \"compile_seconds\": %.4f, "
      "\"load_seconds\": %.4f, \"process_to_here\": %.4f}\n",
      programs, from_cache, seconds, build_seconds, launch_seconds, c.compile_seconds,
      c.load_seconds, Since(process_start));
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The driver: runs the child in fresh processes under each configuration.

struct Run {
  double wall = 0;  // whole process, measured from outside
  std::map<std::string, double> fields;
};

Run Spawn(const std::string& self, const std::map<std::string, std::string>& env) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (!env.count(name) && name.rfind("POCL_", 0) != 0 && name != "MPCAFFE_CACHE" &&
        name != "MPCAFFE_BINARIES")
      env_s.push_back(entry);
  }
  for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
  if (const char* spec = std::getenv("MPCAFFE_BENCH_POCL_SPECIALIZE"))
    env_s.push_back(std::string("POCL_BINARY_SPECIALIZE_WG=") + spec);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = self, arg1 = "--child";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  int fds[2];
  if (pipe(fds) != 0) throw Error("cache_bench: pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  const auto start = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data()) != 0)
    throw Error("cache_bench: cannot start " + self);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, got);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Run run;
  run.wall = Since(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("cache_bench: child run failed: " + out);
  // Flat JSON of numbers: "key": value pairs.
  for (size_t at = 0; (at = out.find('"', at)) != std::string::npos;) {
    const size_t end = out.find('"', at + 1);
    const std::string key = out.substr(at + 1, end - at - 1);
    const size_t colon = out.find(':', end);
    run.fields[key] = std::atof(out.c_str() + colon + 1);
    at = out.find_first_of(",}", colon);
  }
  return run;
}

int RunDriver(const std::vector<std::string>& args) {
  const char* usage =
      "usage: mpcaffe_cache_bench [--json|--markdown] [--repeat r] [--smallgrid-env]\n";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (args[i] == "--repeat" && i + 1 < args.size() && std::atoi(args[i + 1].c_str()) > 0) {
      ++i;
    } else if (args[i] != "--json" && args[i] != "--markdown" && args[i] != "--smallgrid-env") {
      std::fprintf(stderr, "mpcaffe_cache_bench: %s '%s'\n%s",
                   args[i] == "--repeat" ? "no positive count after" : "unknown argument",
                   args[i].c_str(), usage);
      return 2;
    }
  }
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  const bool markdown = std::find(args.begin(), args.end(), "--markdown") != args.end();
  // --smallgrid-env: PoCL 3.1 only builds the grid family (small or large) of the first entry
  // of POCL_BINARY_SPECIALIZE_WG into a binary; this sets "64-1-1-goffs0-smallgrid" (the
  // launches here are narrower than 65536 work-items) to measure what that choice gives.
  const bool smallgrid_env = std::find(args.begin(), args.end(), "--smallgrid-env") != args.end();
  int repeat = 1;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--repeat") repeat = std::max(1, std::atoi(args[i + 1].c_str()));
  if (smallgrid_env) setenv("MPCAFFE_BENCH_POCL_SPECIALIZE", "64-1-1-goffs0-smallgrid", 1);
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  char pattern[] = "/tmp/mpcaffe-cache-bench-XXXXXX";
  if (!mkdtemp(pattern)) throw Error("cache_bench: mkdtemp failed");
  const std::string root = pattern;
  int serial = 0;
  auto fresh = [&](const std::string& what) {
    const std::string d = root + "/" + what + std::to_string(serial++);
    fs::create_directories(d);
    return d;
  };

  struct Row {
    std::string name;
    std::vector<Run> runs;
  };
  std::vector<Row> rows;
  auto best = [](const Row& r, const char* field) {
    double v = 1e30;
    for (const auto& run : r.runs) v = std::min(v, field ? run.fields.at(field) : run.wall);
    return v;
  };
  const char* names[] = {"pocl cache off: cold",
                         "pocl cache off: warm mpcaffe cache",
                         "pocl cache on:  cold",
                         "pocl cache on:  second run (binaries stored)",
                         "pocl cache on:  warm (both caches)",
                         "pocl cache on:  warm pocl cache only (MPCAFFE_CACHE=off)",
                         "pocl cache on:  cold, MPCAFFE_BINARIES=always"};
  for (const char* n : names) rows.push_back({n, {}});
  for (int r = 0; r < repeat; ++r) {
    // PoCL's cache disabled: every process gets a fresh POCL_CACHE_DIR anyway, because PoCL
    // still reuses $POCL_CACHE_DIR/_UNCACHED_* across processes for binary-loaded programs.
    const std::string ours_off = fresh("ours") + "/kernels.sqlite";
    rows[0].runs.push_back(Spawn(self, {{"MPCAFFE_CACHE", ours_off},
                                        {"POCL_KERNEL_CACHE", "0"},
                                        {"POCL_CACHE_DIR", fresh("pocl")}}));
    rows[1].runs.push_back(Spawn(self, {{"MPCAFFE_CACHE", ours_off},
                                        {"POCL_KERNEL_CACHE", "0"},
                                        {"POCL_CACHE_DIR", fresh("pocl")}}));
    // PoCL's cache enabled in a fresh directory, then warm: what a user gets. The first run
    // stores no binary (DeviceInfo::binary_costs_compiles), the second stores them all.
    const std::string ours_on = fresh("ours") + "/kernels.sqlite";
    const std::string pocl_on = fresh("pocl");
    const std::map<std::string, std::string> on = {{"MPCAFFE_CACHE", ours_on},
                                                   {"POCL_KERNEL_CACHE", "1"},
                                                   {"POCL_CACHE_DIR", pocl_on},
                                                   {"MPCAFFE_BINARIES", "auto"}};
    for (int row : {2, 3, 4}) rows[row].runs.push_back(Spawn(self, on));
    // For comparison: PoCL's cache alone (its cold run is row 2's; measured here as a second
    // run after a first one that warms it).
    const std::string pocl_only = fresh("pocl");
    Spawn(self,
          {{"MPCAFFE_CACHE", "off"}, {"POCL_KERNEL_CACHE", "1"}, {"POCL_CACHE_DIR", pocl_only}});
    rows[5].runs.push_back(Spawn(
        self,
        {{"MPCAFFE_CACHE", "off"}, {"POCL_KERNEL_CACHE", "1"}, {"POCL_CACHE_DIR", pocl_only}}));
    // Every binary stored at its first build: the cold run pays for them.
    rows[6].runs.push_back(Spawn(self, {{"MPCAFFE_CACHE", fresh("always") + "/kernels.sqlite"},
                                        {"POCL_KERNEL_CACHE", "1"},
                                        {"POCL_CACHE_DIR", fresh("pocl")},
                                        {"MPCAFFE_BINARIES", "always"}}));
  }
  std::error_code ec;
  fs::remove_all(root, ec);

  const int programs = static_cast<int>(rows[0].runs[0].fields.at("programs"));
  if (json) {
    std::printf("{\"programs\": %d, \"repeat\": %d, \"runs\": [", programs, repeat);
    for (size_t i = 0; i < rows.size(); ++i)
      std::printf(
          "%s\n {\"name\": \"%s\", \"process_seconds\": %.4f, \"build_launch_seconds\": "
          "%.4f, \"from_cache\": %d}",
          i ? "," : "", rows[i].name.c_str(), best(rows[i], nullptr), best(rows[i], "seconds"),
          int(rows[i].runs[0].fields.at("from_cache")));
    std::printf(
        "\n],\n \"ratio_cold_over_warm_pocl_off\": %.2f,\n"
        " \"ratio_cold_over_warm_pocl_on\": %.2f}\n",
        best(rows[0], nullptr) / best(rows[1], nullptr),
        best(rows[2], nullptr) / best(rows[4], nullptr));
    return 0;
  }
  if (markdown) {
    // docs/BENCHMARKS.md's table (scripts/bench.sh's cache step splices it in).
    std::printf(
        "| run | process | build+1st | build | 1st launches | from cache |\n"
        "|---|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows) {
      std::string name = r.name;
      for (size_t at; (at = name.find("  ")) != std::string::npos;) name.erase(at, 1);
      std::printf("| %s | %.3g s | %.3g s | %.3g s | %.3g s | %d |\n", name.c_str(),
                  best(r, nullptr), best(r, "seconds"), best(r, "build_seconds"),
                  best(r, "first_launch_seconds"), int(r.runs[0].fields.at("from_cache")));
    }
    std::printf(
        "\n%d programs, best of %d. Cold / warm, whole process: **%.0f×** with PoCL's cache "
        "off, **%.0f×** with it on; both caches warm are %.1f× faster than PoCL's cache "
        "alone; storing every binary at the first build makes the cold run %.2f× slower.\n",
        programs, repeat, best(rows[0], nullptr) / best(rows[1], nullptr),
        best(rows[2], nullptr) / best(rows[4], nullptr),
        best(rows[5], nullptr) / best(rows[4], nullptr),
        best(rows[6], nullptr) / best(rows[2], nullptr));
    return 0;
  }
  std::printf(
      "kernel cache benchmark: %d programs (element-wise kernels x 4 dtypes + "
      "conversions, 2 option sets), each built and launched once; best of %d\n\n",
      programs, repeat);
  std::printf("%-58s %9s %9s %9s %9s %6s\n", "run", "process", "build+1st", "build", "1st launch",
              "cached");
  for (const auto& r : rows)
    std::printf("%-58s %8.3fs %8.3fs %8.3fs %9.3fs %6d\n", r.name.c_str(), best(r, nullptr),
                best(r, "seconds"), best(r, "build_seconds"), best(r, "first_launch_seconds"),
                int(r.runs[0].fields.at("from_cache")));
  std::printf("\ncold / warm, whole process:  pocl cache off %.1fx   pocl cache on %.1fx\n",
              best(rows[0], nullptr) / best(rows[1], nullptr),
              best(rows[2], nullptr) / best(rows[4], nullptr));
  std::printf("cold / warm, build+launch:   pocl cache off %.1fx   pocl cache on %.1fx\n",
              best(rows[0], "seconds") / best(rows[1], "seconds"),
              best(rows[2], "seconds") / best(rows[4], "seconds"));
  std::printf("warm both / warm pocl only:  %.2fx faster with the mpcaffe cache\n",
              best(rows[5], nullptr) / best(rows[4], nullptr));
  std::printf("cold, binaries at once / at the second build:  %.2fx\n",
              best(rows[6], nullptr) / best(rows[2], nullptr));
  return 0;
}

}  // namespace
}  // namespace mpcaffe::bench

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "--child") return mpcaffe::bench::RunChild();
    return mpcaffe::bench::RunDriver(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe_cache_bench: %s\n", e.what());
    return 1;
  }
}
