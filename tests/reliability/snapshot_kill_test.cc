// tests/reliability/snapshot_kill_test.cc — nothing lost: a training process that snapshots at
// every iteration is killed (SIGKILL) 20 times, at random moments and (every other time) while a
// snapshot is being written, each run resuming from the newest snapshot; after every kill each
// snapshot file under its final name reads, and the newest solver state (with the weights it
// names) restores. Also net.save replaces a file atomically.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "net/net.h"
#include "net/solver.h"
#include "proto/model_io.h"

extern char** environ;

namespace mpcaffe {
namespace fs = std::filesystem;
namespace {

constexpr const char* kChildDirVariable = "MPCAFFE_RELIABILITY_TRAIN_DIR";

/// 64 → 512 → 10 with softmax loss: ≈ 140 KB of weights, so each snapshot (weights + momentum
/// history) takes a noticeable part of an iteration.
caffe::SolverParameter TinySolver(const std::string& dir) {
  caffe::SolverParameter sp;
  ParseProtoFromText(R"(
base_lr: 0.01 momentum: 0.9 lr_policy: "fixed" max_iter: 100000000 snapshot: 1 display: 0
net_param {
  name: "tiny"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 64 } shape { dim: 4 } } }
  layer { name: "fc1" type: "InnerProduct" bottom: "data" top: "fc1"
          inner_product_param { num_output: 512 weight_filler { type: "xavier" } } }
  layer { name: "fc2" type: "InnerProduct" bottom: "fc1" top: "fc2"
          inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc2" bottom: "label" top: "loss" }
})",
                     "<tiny solver>", &sp);
  sp.set_snapshot_prefix(dir + "/tiny");
  return sp;
}

/// The newest "<dir>/tiny_iter_<n>.solverstate" (highest n), or "" when there is none.
std::string NewestSolverState(const std::string& dir, int* iter = nullptr) {
  std::string best;
  int best_iter = -1;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tiny_iter_", 0) != 0 || e.path().extension() != ".solverstate") continue;
    const int n = std::atoi(name.c_str() + 10);
    if (n > best_iter) best_iter = n, best = e.path().string();
  }
  if (iter) *iter = best_iter;
  return best;
}

/// Whether `dir` holds a snapshot being written (a temporary file not yet renamed).
bool HasTemporaryFile(const std::string& dir) {
  std::error_code gone;  // a file renamed while the folder is read is not an error
  for (fs::directory_iterator it(dir, gone), end; !gone && it != end; it.increment(gone))
    if (it->path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

// The child: resumes from the newest snapshot and trains with a snapshot per iteration until it
// is killed. Skipped unless the parent test started it.
TEST(SnapshotKillChild, TrainsUntilKilled) {
  const char* dir = std::getenv(kChildDirVariable);
  if (!dir) GTEST_SKIP() << "runs only as the child of SnapshotKill.PreviousSnapshotSurvives";
  Solver solver(TinySolver(dir), DefaultDevice());
  solver.set_log(nullptr);
  const std::string newest = NewestSolverState(dir);
  if (!newest.empty()) solver.Restore(newest);
  solver.Step(100000000);
}

pid_t StartChild(const std::string& dir) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {exe, "--gtest_filter=SnapshotKillChild.*"};
  std::vector<std::string> env_strings = {std::string(kChildDirVariable) + "=" + dir};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind(std::string(kChildDirVariable) + "=", 0) != 0) env_strings.push_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

TEST(SnapshotKill, PreviousSnapshotSurvives) {
  const fs::path dir = fs::temp_directory_path() / ("mpcaffe_kill_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::mt19937 rng(20261122);
  int last_iter = -1, killed_with_temp_file = 0;
  constexpr int kKills = 20;
  for (int round = 0; round < kKills; ++round) {
    const pid_t child = StartChild(dir.string());
    ASSERT_GT(child, 0) << "posix_spawn failed";
    // Wait for a snapshot newer than the last round's (the child is training), then a random
    // moment later (0–60 ms: several snapshot writes) kill it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int iter = -1;
    int status = 0;
    bool exited = false;
    while (NewestSolverState(dir.string(), &iter), iter <= last_iter) {
      if (waitpid(child, &status, WNOHANG) == child) {
        exited = true;
        break;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no new snapshot within 60 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_FALSE(exited) << "the training child exited with status " << status;
    if (round % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::uniform_int_distribution<int>(0, 60000)(rng)));
    } else {
      // Every other kill aims at a write: as soon as a temporary snapshot file appears (polled
      // without sleeping: a write takes about a millisecond).
      while (!HasTemporaryFile(dir.string())) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no snapshot write seen in 60 s";
      }
    }
    ::kill(child, SIGKILL);
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    // Every file under its final name reads; temporary files are the only debris.
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string path = e.path().string();
      if (path.find(".tmp.") != std::string::npos) {
        ++killed_with_temp_file;
        fs::remove(e.path());
        continue;
      }
      if (e.path().extension() == ".caffemodel") {
        EXPECT_NO_THROW(ReadNetParameterBinary(path)) << path;
      } else {
        caffe::SolverState state;
        EXPECT_NO_THROW(ReadProtoFromBinaryFile(path, &state)) << path;
        EXPECT_TRUE(fs::exists(state.learned_net())) << path << " names " << state.learned_net();
      }
    }
    const std::string newest = NewestSolverState(dir.string(), &iter);
    ASSERT_FALSE(newest.empty());
    ASSERT_GT(iter, last_iter);
    last_iter = iter;
    // Keep the directory small: only the newest snapshot pair stays.
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (std::atoi(name.c_str() + 10) < iter) fs::remove(e.path());
    }
  }
  // The kills aimed at writes must have landed in some: without one, nothing here showed that an
  // interrupted write leaves the previous snapshot readable.
  EXPECT_GE(killed_with_temp_file, 3) << "of " << kKills << " kills, " << killed_with_temp_file
                                      << " landed while a snapshot was being written";
  // The newest state restores into a fresh solver.
  Solver solver(TinySolver(dir.string()), DefaultDevice());
  solver.set_log(nullptr);
  solver.Restore(NewestSolverState(dir.string()));
  EXPECT_EQ(solver.iter(), last_iter);
  solver.Step(1);
  std::cout << "[ reliability ] " << kKills << " kills, resumed up to iteration " << last_iter
            << ", " << killed_with_temp_file << " kills landed while a snapshot was being written\n";
  fs::remove_all(dir);
}

TEST(SnapshotKill, NetSaveReplacesTheFileAtomically) {
  const fs::path dir = fs::temp_directory_path() / ("mpcaffe_save_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  caffe::SolverParameter sp = TinySolver(dir.string());
  sp.set_snapshot(0);
  Solver solver(sp, DefaultDevice());
  solver.set_log(nullptr);
  const std::string path = (dir / "weights.caffemodel").string();
  solver.net().Save(path);
  struct stat first {};
  ASSERT_EQ(::stat(path.c_str(), &first), 0);
  // A reader holding the old file keeps reading the old, complete contents.
  const int old_fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(old_fd, 0);
  solver.Step(1);
  solver.net().Save(path);
  struct stat second {};
  ASSERT_EQ(::stat(path.c_str(), &second), 0);
  EXPECT_NE(first.st_ino, second.st_ino) << "net.save rewrote the file in place, not by rename";
  struct stat old_stat {};
  ASSERT_EQ(::fstat(old_fd, &old_stat), 0);
  EXPECT_EQ(old_stat.st_size, first.st_size);
  ::close(old_fd);
  EXPECT_NO_THROW(ReadNetParameterBinary(path));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename(), "weights.caffemodel") << "left behind: " << e.path();
    ++files;
  }
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mpcaffe
