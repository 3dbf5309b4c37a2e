// tools/cmd_bench_net.cc — `mpcaffe bench net --model <prototxt>`: for each device × data type ×
// batch, the median forward time (min–max) and images/s, peak device memory with and without
// reduced memory, the caffemodel's size in that type, and the net's set-up time with a cold and a
// warm kernel cache, printed as a table and written as JSON.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "net/device_choice.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/bench_net.h"
#include "tools/command.h"
#include "tools/net_variants.h"
#include "tools/progress_bar.h"

namespace mpcaffe::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// One device × dtype × batch measurement; absent figures stay empty (JSON null).
struct Row {
  const Device* device = nullptr;
  NetDtype dtype;
  int batch = 1;
  double ms_median = 0, ms_min = 0, ms_max = 0;
  bool timed_reduced = false;
  std::optional<uint64_t> peak, peak_reduced, storage;
  std::optional<double> setup_cold, setup_warm;
};

struct Options {
  std::string model;
  std::string weights;  // an fp32 caffemodel (else the fillers' values)
  std::vector<NetDtype> dtypes;
  std::vector<int> batches;
  std::vector<Device*> devices;
  bool plain = true, reduced = true;  // which memory configurations to build
  int iterations = 10;
  bool setup = true;
  std::string json;
};

constexpr char kUsage[] =
    "usage: mpcaffe bench net --model <prototxt> [--weights fp32.caffemodel]\n"
    "         [--dtypes fp32,fp16,int16,int8,int8w4] (fp32,fp16,int16,int8)\n"
    "         [--batch 1,16,64] (1) [--device(s) all|i,j] [--reduced-memory both|on|off] (both)\n"
    "         [--iterations N] (10) [--no-setup] [--no-progress] [--json out.json]\n"
    "  --no-setup  skip the cold and warm set-up timings (each a child process)\n";

int Usage(const std::string& why) { return UsageError("bench net", why); }

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// This executable's path, read once (the first call is at the start of `bench net`). A binary
/// replaced on disk during a run reads as "<path> (deleted)": the path then names the new one.
const std::string& SelfPath() {
  static const std::string path = [] {
    std::vector<char> buf(4096);
    const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    if (n <= 0) throw Error("bench net: cannot find this executable (/proc/self/exe)");
    std::string p(buf.data(), n);
    const std::string deleted = " (deleted)";
    if (p.size() > deleted.size() &&
        p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0)
      p.resize(p.size() - deleted.size());
    return p;
  }();
  return path;
}

/// Runs `mpcaffe bench net-setup` in a fresh process whose kernel caches (ours and PoCL's) live
/// under `cache_dir`; returns the seconds it reports.
double ChildSetupSeconds(const std::string& model, const std::string& weights, int device,
                         bool reduced, const fs::path& cache_dir) {
  std::ostringstream cmd;
  cmd << "MPCAFFE_CACHE=" << Quote((cache_dir / "kernels.sqlite").string())
      << " POCL_CACHE_DIR=" << Quote((cache_dir / "pocl").string()) << " " << Quote(SelfPath())
      << " bench net-setup --model " << Quote(model) << " --weights " << Quote(weights)
      << " --device " << device << " --reduced-memory " << (reduced ? "on" : "off");
  std::FILE* p = popen(cmd.str().c_str(), "r");
  if (!p) throw Error("bench net: cannot start the set-up process: " + cmd.str());
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  double s = -1;
  if (status != 0 || std::sscanf(out.c_str(), "setup_s %lf", &s) != 1)
    throw Error("bench net: the set-up process failed (status " + std::to_string(status) +
                ", output '" + out + "'): " + cmd.str());
  return s;
}

/// The hidden child command: builds the typed net from its files, loads the weights, runs one
/// forward pass and prints "setup_s <seconds>" (device start-up excluded).
int BenchNetSetup(const std::vector<std::string>& args) {
  try {
    const std::string model = FlagValue(args, "--model"), weights = FlagValue(args, "--weights");
    Device& device = SelectDevice(FlagValue(args, "--device", "0"));
    NetOptions options;
    options.synthetic_data = true;
    options.optimize = ToolOptimizeLevel();
    options.reduced_memory = FlagValue(args, "--reduced-memory", "off") == "on" ? 1 : 0;
    const caffe::NetParameter param = ReadNetParameterText(model);
    const auto t0 = Clock::now();
    Net net(param, device, options);
    net.CopyTrainedLayersFrom(weights);
    FillInputLayers(net);
    net.Forward();
    device.Finish();
    std::printf("setup_s %.6f\n", Seconds(t0));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe bench net-setup: %s\n", e.what());
    return 1;
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Measures one device × dtype × batch.
Row Measure(const Options& o, const caffe::NetParameter& model, Device& dev, NetDtype dtype,
            int batch, const fs::path& work, ProgressBar& bar) {
  Row r;
  r.device = &dev;
  r.dtype = dtype;
  r.batch = batch;
  const std::string tag = NetDtypeLabel(dtype) + " b" + std::to_string(batch) + " on " +
                          std::to_string(dev.index()) + ": ";
  const caffe::NetParameter typed = TypedVariant(WithBatch(model, batch, o.model), dtype, dev);
  const std::string stem = NetDtypeLabel(dtype) + "_b" + std::to_string(batch) + "_d" +
                           std::to_string(dev.index());
  const fs::path prototxt = work / (stem + ".prototxt"), caffemodel = work / (stem + ".caffemodel");
  WriteProtoToTextFile(typed, prototxt.string());

  auto time_forward = [&](Net& net) {
    std::vector<double> ms;
    for (int i = 0; i < o.iterations; ++i) {
      bar.Describe(tag + "forward " + std::to_string(i + 1) + "/" + std::to_string(o.iterations));
      const auto t0 = Clock::now();
      net.Forward();
      dev.Finish();
      ms.push_back(Seconds(t0) * 1e3);
      bar.Advance();
    }
    r.ms_median = Median(ms);
    r.ms_min = *std::min_element(ms.begin(), ms.end());
    r.ms_max = *std::max_element(ms.begin(), ms.end());
  };

  NetOptions options;
  options.synthetic_data = true;
  options.optimize = ToolOptimizeLevel();
  bool saved = false;
  if (o.plain) {
    bar.Describe(tag + "build" + (IsQuantized(dtype.type) ? " + calibrate" : ""));
    options.reduced_memory = 0;
    auto net = BuildCalibratedNet(typed, dev, options, o.weights);
    bar.Describe(tag + "warm-up");
    net->Forward();  // kernel builds, weight uploads; the peak counts a whole pass
    dev.Finish();
    r.peak = net->peak_device_bytes();
    bar.Describe(tag + "save");
    net->Save(caffemodel.string());
    saved = true;
    bar.Advance();
    if (!o.reduced) time_forward(*net);
  }
  if (o.reduced) {
    bar.Describe(tag + "build (reduced memory)");
    options.reduced_memory = 1;
    std::unique_ptr<Net> net;
    if (saved) {
      net = std::make_unique<Net>(typed, dev, options);
      net->CopyTrainedLayersFrom(caffemodel.string());  // weights and calibrated ranges
      FillInputLayers(*net);
    } else {
      net = BuildCalibratedNet(typed, dev, options, o.weights);
      net->Save(caffemodel.string());
    }
    bar.Describe(tag + "warm-up (reduced memory)");
    net->Forward();
    dev.Finish();
    r.peak_reduced = net->peak_device_bytes();
    bar.Advance();
    r.timed_reduced = true;
    time_forward(*net);
  }
  r.storage = fs::file_size(caffemodel);
  // The typed net's pass on this device, for a later run of that net that names no device.
  RecordNetForward(dev, typed, r.ms_median);

  if (o.setup) {
    // A fresh process with empty kernel caches (ours and PoCL's), then a second one with both
    // warm: what a user's first and later starts of this net cost.
    const fs::path caches = work / (stem + "_caches");
    fs::create_directories(caches / "pocl");
    const bool rm = o.reduced;
    bar.Describe(tag + "set-up, cold kernel cache");
    r.setup_cold =
        ChildSetupSeconds(prototxt.string(), caffemodel.string(), dev.index(), rm, caches);
    bar.Advance();
    bar.Describe(tag + "set-up, warm kernel cache");
    r.setup_warm =
        ChildSetupSeconds(prototxt.string(), caffemodel.string(), dev.index(), rm, caches);
    bar.Advance();
    fs::remove_all(caches);
  }
  fs::remove(caffemodel);
  fs::remove(prototxt);
  return r;
}

std::string JsonOr(const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : "null"; }

std::string JsonOr(const std::optional<double>& v) {
  if (!v) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", *v);
  return buf;
}

std::string ToJson(const Options& o, const std::vector<Row>& rows) {
  std::ostringstream os;
  os << "{\"model\": \"" << JsonEscape(o.model) << "\", \"iterations\": " << o.iterations
     << ", \"results\": [";
  bool first = true;
  for (const Row& r : rows) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "\"forward_ms_median\": %.4f, \"forward_ms_min\": %.4f, \"forward_ms_max\": "
                  "%.4f, \"images_per_s\": %.3f, ",
                  r.ms_median, r.ms_min, r.ms_max, r.batch * 1e3 / r.ms_median);
    os << (first ? "\n  " : ",\n  ") << "{" << DeviceIdentityJson(*r.device) << ", \"dtype\": \""
       << NetDtypeLabel(r.dtype) << "\", \"batch\": " << r.batch << ", " << buf
       << "\"timed_with_reduced_memory\": " << (r.timed_reduced ? "true" : "false")
       << ", \"peak_device_bytes\": " << JsonOr(r.peak)
       << ", \"peak_device_bytes_reduced\": " << JsonOr(r.peak_reduced)
       << ", \"storage_bytes\": " << JsonOr(r.storage)
       << ", \"setup_cold_s\": " << JsonOr(r.setup_cold)
       << ", \"setup_warm_s\": " << JsonOr(r.setup_warm) << "}";
    first = false;
  }
  os << "\n]}\n";
  return os.str();
}

std::string MiB(const std::optional<uint64_t>& b) {
  if (!b) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", *b / 1048576.0);
  return buf;
}

std::string Sec(const std::optional<double>& s) {
  if (!s) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", *s);
  return buf;
}

void PrintTable(const Options& o, const std::vector<Row>& rows) {
  std::printf("\nmpcaffe bench net %s, %d iterations per row (forward times %s)\n", o.model.c_str(),
              o.iterations, o.reduced ? "with reduced memory" : "without reduced memory");
  std::printf("%-4s %-6s %5s %10s %19s %9s %8s %9s %9s %8s %7s %7s\n", "dev", "dtype", "batch",
              "fwd ms", "(min - max)", "img/s", "vs fp32", "peak MiB", "peak RM", "storage",
              "cold s", "warm s");
  for (const Row& r : rows) {
    double base = 0;
    for (const Row& b : rows)
      if (b.device == r.device && b.batch == r.batch && b.dtype.type == DataType::kFloat32)
        base = b.ms_median;
    char range[40], vs[16] = "-";
    std::snprintf(range, sizeof range, "(%.1f - %.1f)", r.ms_min, r.ms_max);
    if (base > 0) std::snprintf(vs, sizeof vs, "%.2fx", base / r.ms_median);
    std::printf("%-4d %-6s %5d %10.2f %19s %9.1f %8s %9s %9s %8s %7s %7s\n", r.device->index(),
                NetDtypeLabel(r.dtype).c_str(), r.batch, r.ms_median, range, r.batch * 1e3 / r.ms_median, vs,
                MiB(r.peak).c_str(), MiB(r.peak_reduced).c_str(), MiB(r.storage).c_str(),
                Sec(r.setup_cold).c_str(), Sec(r.setup_warm).c_str());
  }
  std::printf("(vs fp32: fp32 time / this time, same device and batch; storage: caffemodel MiB)\n");
  std::vector<const Device*> shown;
  for (const Row& r : rows)
    if (std::find(shown.begin(), shown.end(), r.device) == shown.end()) {
      shown.push_back(r.device);
      std::printf("(dev %s, %s)\n", r.device->Describe().c_str(),
                  r.device->info().platform_name.c_str());
    }
}

int BenchNet(const std::vector<std::string>& args) {
  Options o;
  o.model = FlagValue(args, "--model");
  if (o.model.empty()) return Usage("--model is required");
  o.weights = FlagValue(args, "--weights");
  try {
    for (const auto& t : SplitList(FlagValue(args, "--dtypes", "fp32,fp16,int16,int8")))
      o.dtypes.push_back(ParseNetDtype(t));
    for (const auto& b : SplitList(FlagValue(args, "--batch", "1"))) {
      o.batches.push_back(std::stoi(b));
      if (o.batches.back() < 1) return Usage("--batch values must be at least 1");
    }
    o.iterations = std::stoi(FlagValue(args, "--iterations", "10"));
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  if (o.dtypes.empty() || o.batches.empty()) return Usage("--dtypes and --batch need values");
  if (o.iterations < 1) return Usage("--iterations must be at least 1");
  const std::string rm = FlagValue(args, "--reduced-memory", "both");
  if (rm != "both" && rm != "on" && rm != "off")
    return Usage("--reduced-memory is both, on or off");
  o.plain = rm != "on";
  o.reduced = rm != "off";
  o.setup = !HasFlag(args, "--no-setup");
  o.json = FlagValue(args, "--json");
  try {
    o.devices = BenchDevices(FlagValue(args, "--devices", FlagValue(args, "--device")));

    const caffe::NetParameter model = ReadNetParameterText(o.model);
    if (o.setup) SelfPath();  // resolved before anything can replace the binary
    // The work directory holds each variant's prototxt, caffemodel and kernel caches.
    std::string templ = (fs::temp_directory_path() / "mpcaffe-bench-XXXXXX").string();
    if (!mkdtemp(templ.data())) throw Error("bench net: cannot create a directory " + templ);
    const fs::path work = templ;

    const long per_row = (o.plain ? 1 : 0) + (o.reduced ? 1 : 0) + o.iterations + (o.setup ? 2 : 0);
    ProgressBar bar("bench net",
                    per_row * long(o.devices.size() * o.dtypes.size() * o.batches.size()),
                    !HasFlag(args, "--no-progress"));
    std::vector<Row> rows;
    try {
      for (Device* dev : o.devices)
        for (int batch : o.batches)
          for (const NetDtype& t : o.dtypes) rows.push_back(Measure(o, model, *dev, t, batch, work, bar));
    } catch (...) {
      bar.Close();
      fs::remove_all(work);
      throw;
    }
    bar.Close();
    fs::remove_all(work);
    PrintTable(o, rows);
    if (!o.json.empty()) {
      std::FILE* f = std::fopen(o.json.c_str(), "w");
      if (!f) throw Error("bench net: cannot write " + o.json);
      const std::string text = ToJson(o, rows);
      std::fputs(text.c_str(), f);
      std::fclose(f);
      std::printf("wrote %s\n", o.json.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe bench net: %s\n", e.what());
    return 1;
  }
}

const RegisterCommand bench_net_command(
    "bench net", "whole-net benchmark: time, memory, file size and set-up per dtype, batch, device",
    kUsage,
    {{"--model", "--weights", "--dtypes", "--batch", "--device", "--devices", "--reduced-memory",
      "--iterations", "--json"},
     {"--no-setup", "--no-progress"}},
    BenchNet);
// The child process of `bench net` (no summary: not listed by `mpcaffe --help`).
const RegisterCommand bench_net_setup_command(
    "bench net-setup", "",
    "usage: mpcaffe bench net-setup --model <prototxt> --weights <caffemodel> [--device i]\n"
    "         [--reduced-memory on|off]   (bench net's child: prints \"setup_s <seconds>\")\n",
    {{"--model", "--weights", "--device", "--reduced-memory"}, {}}, BenchNetSetup);

}  // namespace

std::vector<Device*> BenchDevices(const std::string& flag) {
  std::vector<Device*> out;
  if (flag.empty())
    out.push_back(&DefaultDevice());
  else if (flag == "all")
    out = DeviceList();
  else
    for (const auto& d : SplitList(flag)) {
      out.push_back(&SelectDevice(d));  // an index, pocl, intel, gpu, part of a name
    }
  if (out.empty()) throw DeviceError("bench: no device found");
  return out;
}

std::string DeviceIdentityJson(const Device& device) {
  const DeviceInfo& i = device.info();
  std::ostringstream os;
  os << "\"device\": \"" << JsonEscape(i.name) << "\", \"device_index\": " << device.index()
     << ", \"backend\": \"" << BackendName(i.backend) << "\", \"platform\": \""
     << JsonEscape(i.platform_name) << "\", \"platform_version\": \""
     << JsonEscape(i.platform_version) << "\", \"driver_version\": \""
     << JsonEscape(i.driver_version) << "\", \"fp16\": " << (i.fp16 ? "true" : "false");
  return os.str();
}

}  // namespace mpcaffe::tools
