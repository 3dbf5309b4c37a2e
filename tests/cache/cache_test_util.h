// tests/cache/cache_test_util.h — shared helpers of the cache tests: scratch directories,
// fake program keys, direct SQLite access to a cache file, and the worker process.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "tests/cache/test_kernels.h"

extern char** environ;

namespace mpcaffe::cache::testing {

namespace fs = std::filesystem;

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mpcaffe-cache-test-XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp " + pattern + " failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// A key for a made-up device; `i` makes the kernel text distinct.
inline ProgramKey FakeKey(int i, const std::string& options = "-cl-fast-relaxed-math") {
  return ProgramKey{"opencl",
                    "Fake Platform OpenCL 1.2",
                    "fake-device",
                    "1.0",
                    "",
                    options,
                    "kernel void k" + std::to_string(i) +
                        "(global float* x) { x[0] = " + std::to_string(i) + "; }"};
}

/// Deterministic pseudo-random bytes standing for a compiled binary.
inline std::string FakeBinary(int i, size_t bytes = 2000) {
  std::mt19937 rng(1234 + i);
  std::string b(bytes, '\0');
  for (auto& c : b) c = static_cast<char>(rng());
  return b;
}

/// Runs SQL directly on a file (outside ProgramCache); returns the first column of every row.
inline std::vector<std::string> Query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "open failed";
    sqlite3_close(db);
    throw std::runtime_error("open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  std::vector<std::string> rows;
  sqlite3_stmt* stmt = nullptr;
  const char* tail = sql.c_str();
  while (tail && *tail) {
    if (sqlite3_prepare_v2(db, tail, -1, &stmt, &tail) != SQLITE_OK) {
      std::string msg = sqlite3_errmsg(db);
      sqlite3_close(db);
      throw std::runtime_error("prepare \"" + sql + "\": " + msg);
    }
    if (!stmt) break;  // trailing whitespace
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      rows.push_back(text ? reinterpret_cast<const char*>(text) : "");
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
      std::string msg = sqlite3_errmsg(db);
      sqlite3_close(db);
      throw std::runtime_error("step \"" + sql + "\": " + msg);
    }
  }
  sqlite3_close(db);
  return rows;
}

inline std::string IntegrityCheck(const std::string& path) {
  auto rows = Query(path, "PRAGMA integrity_check");
  return rows.empty() ? "(no answer)" : rows[0];
}

/// The helper executable next to this test binary (built from tests/cache/cache_worker.cc).
inline std::string WorkerPath() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / "mpcaffe_cache_worker").string();
}

/// A running worker process whose stdout is readable line by line.
class Worker {
 public:
  explicit Worker(const std::vector<std::string>& args,
                  const std::vector<std::string>& extra_env = {}) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    std::vector<std::string> argv_s = {WorkerPath()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The environment, with the variables of `extra_env` ("NAME=value") replaced.
    std::vector<std::string> env_s = extra_env;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      bool overridden = false;
      for (const auto& x : extra_env)
        overridden |= entry.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
      if (!overridden) env_s.push_back(entry);
    }
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      throw std::runtime_error("cannot start " + argv_s[0] + ": " + std::strerror(rc));
    }
    out_ = fdopen(fds[0], "r");
  }
  ~Worker() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (out_) fclose(out_);
  }
  /// Next line of the worker's stdout (without the newline); empty at end of output.
  std::string ReadLine() {
    std::string line;
    int c;
    while ((c = fgetc(out_)) != EOF && c != '\n') line += static_cast<char>(c);
    return line;
  }
  /// Everything the worker still writes, until it closes stdout.
  std::string ReadAll() {
    std::string all;
    int c;
    while ((c = fgetc(out_)) != EOF) all += static_cast<char>(c);
    return all;
  }
  /// Exit status (0..255), or -signal.
  int Wait() {
    if (pid_ <= 0) return status_;
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  FILE* out_ = nullptr;
};

/// Captures this process's stderr (and its children's) from construction until Text() or
/// destruction, so a failed assertion inside never leaves the capture running.
class StderrCapture {
 public:
  StderrCapture() { ::testing::internal::CaptureStderr(); }
  ~StderrCapture() { Text(); }
  const std::string& Text() {
    if (!done_) {
      text_ = ::testing::internal::GetCapturedStderr();
      done_ = true;
    }
    return text_;
  }

 private:
  bool done_ = false;
  std::string text_;
};

/// Counts the cache warnings in captured stderr text.
inline int CountWarnings(const std::string& text) {
  int n = 0;
  for (size_t at = 0; (at = text.find("mpcaffe: warning: kernel cache", at)) != std::string::npos;
       ++at)
    ++n;
  return n;
}

}  // namespace mpcaffe::cache::testing
