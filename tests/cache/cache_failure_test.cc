// tests/cache/cache_failure_test.cc — the cache never fails a run: corrupt, truncated, locked,
// read-only, newer-format, foreign and full files are each repaired or bypassed with exactly
// one warning, and programs keep coming (compiled) whatever the file does.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "tests/cache/cache_test_util.h"

namespace mpcaffe::cache {
namespace {

using testing::CountWarnings;
using testing::FakeBinary;
using testing::FakeKey;
using testing::IntegrityCheck;
using testing::Query;
using testing::ScratchDir;
using testing::StderrCapture;
using testing::Worker;

/// What the library does around the store for each program: load, else "compile" and save.
/// Returns how many programs had to be compiled, and checks every loaded binary.
int BuildAll(ProgramCache& cache, int count, size_t bytes = 2000) {
  int compiled = 0;
  for (int i = 0; i < count; ++i) {
    auto b = cache.Load(FakeKey(i));
    if (b) {
      EXPECT_EQ(*b, FakeBinary(i, bytes)) << "program " << i;
      continue;
    }
    ++compiled;
    cache.Save(FakeKey(i), FakeBinary(i, bytes));
  }
  return compiled;
}

void Fill(const std::string& path, int count, size_t bytes = 2000) {
  ProgramCache cache(CacheOptions{path});
  ASSERT_EQ(cache.state(), CacheState::kReadWrite);
  ASSERT_EQ(BuildAll(cache, count, bytes), count);
}

TEST(CacheFailure, RandomBytesFileIsReplaced) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  {
    std::ofstream out(path, std::ios::binary);
    out << FakeBinary(99, 65536);
  }
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_EQ(cache.state(), CacheState::kReadWrite);
    EXPECT_EQ(BuildAll(cache, 10), 10);
    EXPECT_EQ(BuildAll(cache, 10), 0);
    EXPECT_NE(cache.last_problem().find("corrupt"), std::string::npos) << cache.last_problem();
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_EQ(IntegrityCheck(path), "ok");
  ProgramCache again(CacheOptions{path});
  EXPECT_EQ(BuildAll(again, 10), 0);  // repaired for good: the next process hits
  EXPECT_EQ(again.warnings_printed(), 0);
}

TEST(CacheFailure, TruncatedFileIsRebuilt) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Fill(path, 40, 20000);
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 40u * 20000u);
  std::filesystem::resize_file(path, size / 2);
  StderrCapture capture;
  int compiled = 0;
  {
    ProgramCache cache(CacheOptions{path});
    compiled = BuildAll(cache, 40, 20000);
    EXPECT_EQ(BuildAll(cache, 40, 20000), 0);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_GT(compiled, 0);
  EXPECT_EQ(IntegrityCheck(path), "ok");
  ProgramCache again(CacheOptions{path});
  EXPECT_EQ(BuildAll(again, 40, 20000), 0);
  EXPECT_EQ(again.FileStats().programs, 40u);
}

TEST(CacheFailure, CorruptBinaryIsDroppedAndRecompiled) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Fill(path, 5);
  // Change bytes of two stored binaries but not their checksums.
  Query(path,
        "UPDATE programs_v1 SET binary = zeroblob(length(binary)) WHERE rowid IN "
        "(SELECT rowid FROM programs_v1 LIMIT 2)");
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_EQ(BuildAll(cache, 5), 2);
    EXPECT_EQ(cache.counters().rejects, 2u);
    EXPECT_EQ(cache.counters().problems, 2u);
    EXPECT_EQ(cache.state(), CacheState::kReadWrite);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;  // once, not per program
  EXPECT_NE(err.find("checksum"), std::string::npos) << err;
  ProgramCache again(CacheOptions{path});
  EXPECT_EQ(BuildAll(again, 5), 0);
}

TEST(CacheFailure, DriverRejectionDeletesTheEntry) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Fill(path, 3);
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path});
    ASSERT_TRUE(cache.Load(FakeKey(1)));
    cache.Reject(FakeKey(1), "clCreateProgramWithBinary: CL_INVALID_BINARY");
    cache.Reject(FakeKey(2), "clCreateProgramWithBinary: CL_INVALID_BINARY");
    EXPECT_FALSE(cache.Load(FakeKey(1)));  // gone from the in-process map as well
    EXPECT_EQ(cache.counters().rejects, 2u);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("CL_INVALID_BINARY"), std::string::npos) << err;
  EXPECT_EQ(Query(path, "SELECT count(*) FROM programs_v1")[0], "1");
}

TEST(CacheFailure, LockedFileIsBypassedAfterTheTimeout) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Fill(path, 4);
  std::optional<Worker> locker(std::in_place, std::vector<std::string>{"lock", path, "20000"});
  ASSERT_EQ(locker->ReadLine(), "locked");
  StderrCapture capture;
  const auto start = std::chrono::steady_clock::now();
  {
    ProgramCache cache(CacheOptions{path, /*busy_timeout_ms=*/300});
    EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
    EXPECT_EQ(BuildAll(cache, 4), 4);  // compiles from source...
    EXPECT_EQ(BuildAll(cache, 4), 0);  // ...once: the in-process map still serves
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("locked"), std::string::npos) << err;
  EXPECT_LT(seconds, 3.0);  // waited about one timeout, not one per program
  locker.reset();           // kills the worker, which releases the lock
  EXPECT_EQ(IntegrityCheck(path), "ok");
  ProgramCache after(CacheOptions{path});
  EXPECT_EQ(BuildAll(after, 4), 0);  // the file was left intact
}

TEST(CacheFailure, LockTakenDuringARunIsBypassed) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path, /*busy_timeout_ms=*/300});
    EXPECT_EQ(BuildAll(cache, 3), 3);
    Worker locker({"write-lock", path, "20000"});
    ASSERT_EQ(locker.ReadLine(), "locked");
    EXPECT_EQ(BuildAll(cache, 6), 3);  // programs 3..5 compile; the first save times out
    EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
    EXPECT_EQ(BuildAll(cache, 6), 0);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_EQ(IntegrityCheck(path), "ok");
}

// Processes that open a new file at the same instant (CTest starts two suites on the run's
// empty cache) all keep it: none gives it up as locked while another one switches it to WAL.
TEST(CacheFailure, ProcessesOpeningANewFileTogetherAllKeepIt) {
  ScratchDir dir;
  for (int round = 0; round < 3; ++round) {
    const std::string path = dir.File("kernels" + std::to_string(round) + ".sqlite");
    const auto start = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()) +
                       std::chrono::milliseconds(300);
    std::vector<std::unique_ptr<Worker>> workers;
    for (int i = 0; i < 8; ++i)
      workers.push_back(std::make_unique<Worker>(
          std::vector<std::string>{"open", path, std::to_string(start.count())}));
    for (auto& w : workers) {
      EXPECT_EQ(w->ReadAll(), "state=read-write\n") << "round " << round;
      EXPECT_EQ(w->Wait(), 0);
    }
    EXPECT_EQ(IntegrityCheck(path), "ok");
  }
}

/// Runs `body` without the power to write other users' files: as root (tests often run as
/// root in containers) in a child process switched to user and group "nobody" (65534); as
/// anyone else directly. Returns the body's result (or -1 if the child died).
int RunUnprivileged(const std::function<int()>& body) {
  if (geteuid() != 0) return body();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(101);
    const int rc = body();
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(CacheFailure, ReadOnlyFileServesLoadsButSavesNothing) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Fill(path, 4);
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));  // checkpointed on close
  chmod(dir.path().c_str(), 0777);
  chmod(path.c_str(), 0444);
  StderrCapture capture;
  const int rc = RunUnprivileged([&] {
    ProgramCache cache(CacheOptions{path, 1000});
    if (cache.state() != CacheState::kReadOnly) return 10 + static_cast<int>(cache.state());
    if (BuildAll(cache, 4) != 0) return 2;  // stored programs load
    if (BuildAll(cache, 8) != 4) return 3;  // new ones compile, are kept in memory
    if (BuildAll(cache, 8) != 0) return 4;
    if (cache.warnings_printed() != 1) return 5;
    return 0;
  });
  const std::string err = capture.Text();
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("read-only"), std::string::npos) << err;
  chmod(path.c_str(), 0644);
  EXPECT_EQ(Query(path, "SELECT count(*) FROM programs_v1")[0], "4");
  EXPECT_EQ(IntegrityCheck(path), "ok");
}

TEST(CacheFailure, ReadOnlyDirectoryIsBypassed) {
  ScratchDir dir;
  const std::string sub = dir.File("ro");
  std::filesystem::create_directory(sub);
  chmod(dir.path().c_str(), 0755);
  chmod(sub.c_str(), 0555);
  const std::string path = sub + "/kernels.sqlite";
  StderrCapture capture;
  const int rc = RunUnprivileged([&] {
    ProgramCache cache(CacheOptions{path, 1000});
    if (cache.state() != CacheState::kMemoryOnly) return 10 + static_cast<int>(cache.state());
    if (BuildAll(cache, 5) != 5) return 2;
    if (BuildAll(cache, 5) != 0) return 3;
    if (cache.warnings_printed() != 1) return 4;
    return 0;
  });
  const std::string err = capture.Text();
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(CacheFailure, NewerFormatFileIsLeftAlone) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  Query(path + "", "SELECT 1");  // creates an empty database
  Query(path,
        "CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL); "
        "INSERT INTO meta VALUES('format', '999'); "
        "CREATE TABLE programs_v999(key TEXT PRIMARY KEY, blob BLOB); "
        "INSERT INTO programs_v999 VALUES('k', x'00')");
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
    EXPECT_EQ(BuildAll(cache, 3), 3);
    EXPECT_EQ(BuildAll(cache, 3), 0);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("newer"), std::string::npos) << err;
  EXPECT_EQ(Query(path, "SELECT value FROM meta WHERE name='format'")[0], "999");
  EXPECT_EQ(Query(path, "SELECT count(*) FROM programs_v999")[0], "1");
  EXPECT_TRUE(Query(path, "SELECT name FROM sqlite_master WHERE name='programs_v1'").empty());
}

TEST(CacheFailure, ForeignDatabaseIsLeftAlone) {
  ScratchDir dir;
  const std::string path = dir.File("notes.sqlite");
  Query(path, "CREATE TABLE notes(text TEXT); INSERT INTO notes VALUES('mine')");
  StderrCapture capture;
  {
    ProgramCache cache(CacheOptions{path});
    EXPECT_EQ(cache.state(), CacheState::kMemoryOnly);
    EXPECT_EQ(BuildAll(cache, 2), 2);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_EQ(Query(path, "SELECT text FROM notes")[0], "mine");
}

TEST(CacheFailure, FullFileStopsSavingButKeepsLoading) {
  ScratchDir dir;
  const std::string path = dir.File("kernels.sqlite");
  StderrCapture capture;
  int fitted = 0;
  {
    // 40 pages of 4 KiB hold a few 30 KB binaries, not 12.
    ProgramCache cache(CacheOptions{path, 10000, /*max_page_count=*/40});
    EXPECT_EQ(BuildAll(cache, 12, 30000), 12);
    EXPECT_EQ(cache.state(), CacheState::kReadOnly);
    EXPECT_EQ(BuildAll(cache, 12, 30000), 0);  // nothing compiles twice in the process
    fitted = static_cast<int>(cache.FileStats().programs);
  }
  const std::string err = capture.Text();
  EXPECT_EQ(CountWarnings(err), 1) << err;
  EXPECT_NE(err.find("full"), std::string::npos) << err;
  EXPECT_GT(fitted, 0);
  EXPECT_LT(fitted, 12);
  EXPECT_EQ(IntegrityCheck(path), "ok");
  ProgramCache again(CacheOptions{path});
  EXPECT_EQ(BuildAll(again, 12, 30000), 12 - fitted);  // what fitted loads in the next run
}

}  // namespace
}  // namespace mpcaffe::cache
