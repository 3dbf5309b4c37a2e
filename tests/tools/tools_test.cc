// tests/tools/tools_test.cc — runs the `mpcaffe` command line (found beside this test) on LeNet
// and a tiny net: `bench net --json` gives every key the benchmark issue names with sane values
// (a cold set-up compiles every program, a warm one loads them all), and
// `tune --model` stores a winner for every GEMM and convolution shape of the net, which the
// library then uses.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "libdnn/kernel_config.h"
#include "tests/testing/paths.h"
#include "tests/tools/run_mpcaffe.h"

namespace {

namespace fs = std::filesystem;

// ---- A small JSON reader (objects, arrays, strings, numbers, literals) for the output ----

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;
  bool has(const std::string& k) const { return kind == kObject && object.count(k) > 0; }
  const Json& operator[](const std::string& k) const { return object.at(k); }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  Json Document() {
    Json v = Value();
    Space();
    if (i_ != s_.size()) Fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_));
  }
  void Space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  std::string String() {
    if (!Eat('"')) Fail("string expected");
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) Fail("bad escape");
        const char e = s_[i_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        if (e == 'u') Fail("\\u escapes are not expected here");
      }
      out += c;
    }
    if (!Eat('"')) Fail("unterminated string");
    return out;
  }
  Json Value() {
    Space();
    Json v;
    if (i_ >= s_.size()) Fail("value expected");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::kObject;
      if (Eat('}')) return v;
      do {
        std::string k = String();
        if (!Eat(':')) Fail("':' expected");
        v.object[k] = Value();
      } while (Eat(','));
      if (!Eat('}')) Fail("'}' expected");
    } else if (c == '[') {
      ++i_;
      v.kind = Json::kArray;
      if (Eat(']')) return v;
      do v.array.push_back(Value());
      while (Eat(','));
      if (!Eat(']')) Fail("']' expected");
    } else if (c == '"') {
      v.kind = Json::kString;
      v.string = String();
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::kBool;
      v.boolean = s_[i_] == 't';
      i_ += v.boolean ? 4 : 5;
    } else {
      v.kind = Json::kNumber;
      size_t used = 0;
      try {
        v.number = std::stod(s_.substr(i_, 40), &used);
      } catch (const std::exception&) {
        Fail("number expected");
      }
      i_ += used;
    }
    return v;
  }
  const std::string& s_;
  size_t i_ = 0;
};

// ---- Running the command line ----

std::string Shared() { return mpcaffe::test_support::SharedDir().string(); }

std::string LeNet() { return Shared() + "/models/bvlc/mnist/lenet.prototxt"; }

using mpcaffe::test_support::CommandResult;
using mpcaffe::test_support::RunMpcaffe;
std::string Mpcaffe() { return mpcaffe::test_support::MpcaffeExe(); }

class ToolsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(Mpcaffe()))
        << "the mpcaffe executable is built beside the tests: " << Mpcaffe();
    ASSERT_TRUE(fs::exists(LeNet())) << LeNet();
    std::string templ = (fs::temp_directory_path() / "mpcaffe-tools-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

Json ReadJson(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return JsonReader(text.str()).Document();
}

const char* kKeys[] = {"device",
                       "backend",
                       "dtype",
                       "batch",
                       "forward_ms_median",
                       "forward_ms_min",
                       "forward_ms_max",
                       "images_per_s",
                       "peak_device_bytes",
                       "peak_device_bytes_reduced",
                       "storage_bytes",
                       "setup_cold_s",
                       "setup_warm_s"};

TEST_F(ToolsTest, BenchNetJsonHasEveryKeyWithSaneValues) {
  // LeNet in fp32 and int8 at batch 2, without the set-up timing (next test: it compiles every
  // kernel in a fresh process, too slow for LeNet here).
  const fs::path json = dir_ / "out.json";
  const CommandResult r =
      RunMpcaffe("bench net --model '" + LeNet() +
                 "' --dtypes fp32,int8 --batch 2 --iterations 2 --no-setup --no-progress "
                 "--json '" +
                 json.string() + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fwd ms"), std::string::npos) << "a table on stdout:\n" << r.out;
  const Json doc = ReadJson(json);
  ASSERT_EQ(doc["model"].string, LeNet());
  const auto& rows = doc["results"].array;
  ASSERT_EQ(rows.size(), 2u);
  for (const Json& row : rows) {
    for (const char* k : kKeys) ASSERT_TRUE(row.has(k)) << "missing key " << k;
    EXPECT_FALSE(row["device"].string.empty());
    EXPECT_TRUE(row["backend"].string == "opencl" || row["backend"].string == "cuda");
    EXPECT_EQ(row["batch"].number, 2);
    const double med = row["forward_ms_median"].number;
    EXPECT_GT(row["forward_ms_min"].number, 0);
    EXPECT_LE(row["forward_ms_min"].number, med);
    EXPECT_LE(med, row["forward_ms_max"].number);
    EXPECT_NEAR(row["images_per_s"].number, 2 * 1000 / med, 1e-3 * 2000 / med);
    // LeNet at batch 2: parameters and blobs are well under 8 MiB; reduced memory never adds.
    const double peak = row["peak_device_bytes"].number,
                 rm = row["peak_device_bytes_reduced"].number;
    EXPECT_GT(rm, 0);
    EXPECT_LE(rm, peak);
    EXPECT_LT(peak, 8 << 20);
    EXPECT_EQ(row["setup_cold_s"].kind, Json::kNull);
    EXPECT_EQ(row["setup_warm_s"].kind, Json::kNull);
  }
  EXPECT_EQ(rows[0]["dtype"].string, "fp32");
  EXPECT_EQ(rows[1]["dtype"].string, "int8");
  // Weights dominate LeNet's memory: int8 needs well under half of fp32's.
  EXPECT_LT(rows[1]["peak_device_bytes"].number, rows[0]["peak_device_bytes"].number / 2);
  // LeNet has 431 080 parameters: 4 bytes each in fp32, 1 in int8 (plus names, shapes, ranges).
  const double fp32 = rows[0]["storage_bytes"].number, int8 = rows[1]["storage_bytes"].number;
  EXPECT_GE(fp32, 4 * 431080.0);
  EXPECT_LT(fp32, 4 * 431080.0 * 1.01);
  EXPECT_GE(int8, 431080.0);
  EXPECT_LT(int8, fp32 / 3.5);
}

/// Per process (in the order each first appears in the log): how many programs it compiled and
/// how many it loaded from the kernel cache, from an MPCAFFE_COMPILE_LOG file.
struct ProcessPrograms {
  std::string pid;
  int compiled = 0, loaded = 0;
};
std::vector<ProcessPrograms> ProgramsPerProcess(const fs::path& compile_log) {
  std::vector<ProcessPrograms> out;
  std::ifstream in(compile_log);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string f; std::getline(cells, f, '\t');) fields.push_back(f);
    if (fields.size() < 7) continue;  // event, backend, target, hash, time, seconds, pid, kernel
    auto it = std::find_if(out.begin(), out.end(), [&](auto& p) { return p.pid == fields[6]; });
    if (it == out.end()) it = out.insert(out.end(), ProcessPrograms{fields[6]});
    if (fields[0].rfind("compile", 0) == 0) ++it->compiled;
    if (fields[0] == "load") ++it->loaded;
  }
  return out;
}

TEST_F(ToolsTest, BenchNetSetupColdCompilesAndWarmLoads) {
  // A net of two small layers: the fresh process with empty caches compiles two kernels.
  const fs::path model = dir_ / "tiny.prototxt", json = dir_ / "tiny.json";
  const fs::path log = dir_ / "compile.log";
  std::ofstream(model) << R"(name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "fc" type: "InnerProduct" bottom: "conv" top: "fc"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
)";
  // Every binary stored at its first build (MPCAFFE_BINARIES=always), so the warm start has
  // each one in the kernel cache whatever the device's own caching does.
  const CommandResult r =
      RunMpcaffe("bench net --model '" + model.string() +
                     "' --dtypes fp32 --iterations 1 --reduced-memory off --no-progress "
                     "--json '" +
                     json.string() + "'",
                 "MPCAFFE_BINARIES=always MPCAFFE_COMPILE_LOG='" + log.string() + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  const Json doc = ReadJson(json);
  ASSERT_EQ(doc["results"].array.size(), 1u);
  const Json& row = doc["results"].array[0];
  for (const char* k : kKeys) ASSERT_TRUE(row.has(k)) << "missing key " << k;
  EXPECT_EQ(row["batch"].number, 1);
  EXPECT_EQ(row["peak_device_bytes_reduced"].kind, Json::kNull);  // --reduced-memory off
  // 2·9 + 2 + 3·32 + 3 = 119 fp32 parameters.
  EXPECT_GE(row["storage_bytes"].number, 119 * 4);
  ASSERT_EQ(row["setup_cold_s"].kind, Json::kNumber);
  ASSERT_EQ(row["setup_warm_s"].kind, Json::kNumber);
  EXPECT_GT(row["setup_warm_s"].number, 0);
  // The benchmark's own process, then the cold and the warm set-up processes. Cold compiles
  // every program (at least the convolution's and the inner product's) and finds none in its
  // empty cache; warm compiles none and loads each one cold compiled. (Their seconds are
  // measurements, not assertions: a loaded machine can reverse them.)
  const std::vector<ProcessPrograms> runs = ProgramsPerProcess(log);
  ASSERT_EQ(runs.size(), 3u) << "expected the benchmark and two set-up processes in " << log;
  const ProcessPrograms &cold = runs[1], &warm = runs[2];
  EXPECT_GE(cold.compiled, 2);
  EXPECT_EQ(cold.loaded, 0);
  EXPECT_EQ(warm.compiled, 0);
  EXPECT_EQ(warm.loaded, cold.compiled);
}

TEST_F(ToolsTest, BenchGemmAnswersHelpAndRejectsUnknownArguments) {
  // --help prints the usage and runs nothing; an unknown flag or a flag without its value is an
  // error naming it (before, both silently started the whole benchmark).
  const auto help = RunMpcaffe("bench gemm --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: mpcaffe bench gemm"), std::string::npos) << help.out;
  const auto bogus = RunMpcaffe("bench gemm --dtypes int8w4 2>&1");
  EXPECT_EQ(bogus.status, 2);
  EXPECT_NE(bogus.out.find("unknown flag '--dtypes'"), std::string::npos) << bogus.out;
  const auto missing = RunMpcaffe("bench gemm --json 2>&1");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("no value after '--json'"), std::string::npos) << missing.out;
  EXPECT_EQ(RunMpcaffe("bench gemm --model m.prototxt --bogus 1 2>/dev/null").status, 2);
}

TEST_F(ToolsTest, BenchNetRejectsBadArguments) {
  EXPECT_EQ(RunMpcaffe("bench net --dtypes fp32 2>/dev/null").status, 2);
  EXPECT_EQ(RunMpcaffe("bench net --model '" + LeNet() + "' --dtypes fp64 2>/dev/null").status, 2);
  EXPECT_EQ(
      RunMpcaffe("bench net --model '" + LeNet() + "' --reduced-memory maybe 2>/dev/null").status,
      2);
  EXPECT_EQ(RunMpcaffe("bench net --model /nonexistent.prototxt --no-progress 2>/dev/null").status,
            1);
}

TEST_F(ToolsTest, TuneModelStoresAWinnerPerShapeAndTheLibraryUsesIt) {
  const fs::path cache = dir_ / "kernels.sqlite";
  const std::string env = "MPCAFFE_CACHE='" + cache.string() + "'";
  const CommandResult tuned = RunMpcaffe(
      "tune --model '" + LeNet() + "' --batch 1 --dtypes fp32,int8 --max 2 --no-progress", env);
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("8 of 8 winners stored"), std::string::npos) << tuned.out;

  mpcaffe::cache::CacheOptions options;
  options.path = cache.string();
  mpcaffe::cache::ProgramCache store(options);
  const auto gemm = store.ListTuning("", "gemm"), conv = store.ListTuning("", "conv");
  const auto pointwise = store.ListTuning("", "conv_pw");
  // LeNet at batch 1 in fp32 and int8: ip1 (M=1 N=500 K=800), ip2 (M=1 N=10 K=500); conv1
  // (1×28×28 → 20, 5×5), conv2 (20×12×12 → 50, 5×5); conv1 (one input channel) takes the
  // pointwise kernel's row form in both types, tuned against the direct kernel (fp32) or
  // im2col + GEMM (int8).
  ASSERT_EQ(gemm.size(), 4u);
  ASSERT_EQ(conv.size(), 2u);
  ASSERT_EQ(pointwise.size(), 2u);
  auto count = [](const std::vector<mpcaffe::cache::TuningRecord>& v, const std::string& a,
                  const std::string& b) {
    int n = 0;
    for (const auto& r : v)
      n += r.signature.find(a) != std::string::npos && r.signature.find(b) != std::string::npos;
    return n;
  };
  EXPECT_EQ(count(gemm, "M=1 N=500 K=800", "fp32"), 1);
  EXPECT_EQ(count(gemm, "M=1 N=500 K=800", "int8q"), 1);
  EXPECT_EQ(count(gemm, "M=1 N=10 K=500", ""), 2);
  EXPECT_EQ(count(pointwise, "n1 c1 h28 w28 o20 k5x5", "fp32"), 1);
  EXPECT_EQ(count(pointwise, "n1 c1 h28 w28 o20 k5x5", "int8q"), 1);
  EXPECT_EQ(count(conv, "n1 c20 h12 w12 o50 k5x5", ""), 2);

  // A later process uses the stored winners: --show prints the configuration of each shape,
  // as the records hold it ("family:config").
  const CommandResult shown = RunMpcaffe(
      "tune --model '" + LeNet() + "' --batch 1 --dtypes fp32,int8 --show --no-progress", env);
  ASSERT_EQ(shown.status, 0) << shown.out;
  for (const auto* list : {&gemm, &conv, &pointwise})
    for (const auto& r : *list) {
      const std::string line =
          (list == &gemm ? "gemm " : "conv ") + r.signature + " -> " + r.parameters + "\n";
      EXPECT_NE(shown.out.find(line), std::string::npos) << line << "not in\n" << shown.out;
    }
}

// A residual block whose convolutions fuse their BatchNorm, Scale, ReLU and the Eltwise sum
// only at the timing tools' optimizer level (2): `tune --model` tunes the shapes of both levels,
// so `time` (level 2) runs every convolution in a tuned configuration.
TEST_F(ToolsTest, TuneModelCoversTheShapesTheTimingToolsRun) {
  const fs::path model = dir_ / "residual.prototxt";
  std::ofstream(model) << R"(name: "residual"
input: "data" input_shape { dim: 1 dim: 16 dim: 12 dim: 12 }
layer { name: "a" type: "Convolution" bottom: "data" top: "a"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false
    weight_filler { type: "msra" } } }
layer { name: "a_bn" type: "BatchNorm" bottom: "a" top: "a" }
layer { name: "a_scale" type: "Scale" bottom: "a" top: "a" scale_param { bias_term: true } }
layer { name: "a_relu" type: "ReLU" bottom: "a" top: "a" }
layer { name: "b" type: "Convolution" bottom: "a" top: "b"
  convolution_param { num_output: 16 kernel_size: 1 bias_term: false
    weight_filler { type: "msra" } } }
layer { name: "b_bn" type: "BatchNorm" bottom: "b" top: "b" }
layer { name: "b_scale" type: "Scale" bottom: "b" top: "b" scale_param { bias_term: true } }
layer { name: "sum" type: "Eltwise" bottom: "data" bottom: "b" top: "sum" }
layer { name: "sum_relu" type: "ReLU" bottom: "sum" top: "sum" }
)";
  const std::string env = "MPCAFFE_CACHE='" + (dir_ / "kernels.sqlite").string() + "'";
  const CommandResult tuned =
      RunMpcaffe("tune --model '" + model.string() + "' --max 2 --no-progress", env);
  ASSERT_EQ(tuned.status, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("optimizer level 2"), std::string::npos) << tuned.out;
  const CommandResult timed = RunMpcaffe(
      "time --model '" + model.string() + "' --synthetic --iterations 1 --explain", env);
  ASSERT_EQ(timed.status, 0) << timed.out;
  int kernels = 0, tuned_kernels = 0;
  std::istringstream in(timed.out);
  for (std::string l; std::getline(in, l);) {
    if (l.find("kernel conv") == std::string::npos) continue;
    ++kernels;
    tuned_kernels += l.find(" (tuned) for ") != std::string::npos;
  }
  EXPECT_EQ(kernels, 2) << timed.out;
  EXPECT_EQ(tuned_kernels, kernels) << timed.out;
}

// `time --explain`: under every Convolution, Pooling and InnerProduct line, a line naming the
// kernel family it runs (one of the library's), its configuration and where that came from.
TEST_F(ToolsTest, TimeExplainNamesTheKernelFamilyOfEveryConvolutionPoolingAndInnerProduct) {
  const CommandResult r =
      RunMpcaffe("time --model '" + LeNet() + "' --synthetic --iterations 1 --explain");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const auto& families = mpcaffe::libdnn::KernelFamilies();
  int explained = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::istringstream words(lines[i]);
    std::string name, type;
    words >> name >> type;
    if (type != "Convolution" && type != "Pooling" && type != "InnerProduct") continue;
    if (lines[i].find("fused into") != std::string::npos) continue;
    const std::string& next = lines[i + 1];
    const size_t at = next.find(" kernel ");
    ASSERT_NE(at, std::string::npos) << "no kernel line under\n" << lines[i] << "\n" << r.out;
    const std::string rest = next.substr(at + 8);
    const std::string family = rest.substr(0, rest.find_first_of(": "));
    EXPECT_NE(std::find(families.begin(), families.end(), family), families.end()) << next;
    EXPECT_TRUE(next.find(" (default) for ") != std::string::npos ||
                next.find(" (tuned) for ") != std::string::npos ||
                next.find(" (override) for ") != std::string::npos)
        << next;
    ++explained;
  }
  EXPECT_EQ(explained, 6) << r.out;  // LeNet: conv1, pool1, conv2, pool2, ip1, ip2
  // Without the flag, no kernel lines (indented under their layer).
  const CommandResult plain =
      RunMpcaffe("time --model '" + LeNet() + "' --synthetic --iterations 1");
  ASSERT_EQ(plain.status, 0) << plain.out;
  EXPECT_EQ(plain.out.find("    kernel "), std::string::npos) << plain.out;
}

// `time --json`: the whole pass and the host's share of it (Net::Forward returns once its
// kernels are enqueued), with the launches per pass.
TEST_F(ToolsTest, TimeJsonGivesTheWholePassAndItsHostShare) {
  const CommandResult r =
      RunMpcaffe("time --model '" + LeNet() + "' --synthetic --iterations 3 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const Json doc = JsonReader(r.out.substr(r.out.find('{'))).Document();
  for (const char* k : {"whole_forward_ms_median", "forward_host_ms", "launches_per_forward"})
    ASSERT_TRUE(doc.has(k)) << "missing key " << k << " in\n" << r.out;
  EXPECT_GT(doc["forward_host_ms"].number, 0);
  EXPECT_LE(doc["forward_host_ms"].number, doc["whole_forward_ms_median"].number);
  EXPECT_GE(doc["launches_per_forward"].number, 4);  // LeNet's convolutions and products
}

}  // namespace
