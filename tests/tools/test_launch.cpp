// kiln launch (tools/cli/launch.h), with /bin/sh scripts as the ranks. What the group prints
// is captured in temporary files through LaunchOptions::out_fd and err_fd.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir/error.h"
#include "tools/cli/launch.h"

namespace {

namespace fs = std::filesystem;
using kiln::cli::LaunchOptions;
using kiln::cli::run_launch;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A temporary file (deleted when closed), read back whole.
class Capture {
 public:
  Capture() : f_(std::tmpfile()) {}
  ~Capture() { std::fclose(f_); }
  int fd() const { return fileno(f_); }
  std::string text() const {
    std::string s;
    char buf[4096];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(fd(), buf, sizeof buf, at)) > 0; at += n) s.append(buf, static_cast<size_t>(n));
    return s;
  }

 private:
  std::FILE* f_;
};

struct Launched {
  int rc = -1;
  std::string out, err;
  double seconds = 0;
};

// The options for n ranks running a /bin/sh script; a short grace, so a test never waits long.
LaunchOptions ranks_running(int n, const std::string& script) {
  LaunchOptions o;
  o.nproc = n;
  o.command = {"/bin/sh", "-c", script};
  o.grace_s = 0.5;
  return o;
}

Launched launch(LaunchOptions o) {
  Capture out, err;
  o.out_fd = out.fd();
  o.err_fd = err.fd();
  auto t0 = std::chrono::steady_clock::now();
  Launched r;
  r.rc = run_launch(o);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.out = out.text();
  r.err = err.text();
  return r;
}

// A folder of its own for a test's files (ranks that wait for one another use files in it).
class Folder {
 public:
  Folder() {
    std::string pattern = (fs::temp_directory_path() / "kiln-launch-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~Folder() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets an environment variable for the length of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Launch, EveryRankSeesItsOwnRankAndTheSharedGroup) {
  ScopedEnv inherited("KILN_LAUNCH_TEST_INHERITED", "yes");
  ScopedEnv stale("RANK", "99");  // the launcher's own RANK is replaced, not passed on
  Launched r = launch(ranks_running(3,
      "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
      "GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT INHERITED=$KILN_LAUNCH_TEST_INHERITED "
      // the environment as exec passed it (the shell's own variables hold one RANK either way)
      "RANK_ENTRIES=$(tr '\\0' '\\n' </proc/$$/environ | grep -c '^RANK=')"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::regex line(R"(\[rank (\d)\] RANK=(\d) LOCAL_RANK=(\d) WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 )"
                        R"(GROUP_RANK=0 MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=(\d+) INHERITED=yes RANK_ENTRIES=1)");
  std::set<std::string> ranks, ports;
  for (const std::string& l : lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    EXPECT_EQ(m[1], m[2]) << l;
    EXPECT_EQ(m[2], m[3]) << l;
    ranks.insert(m[1]);
    ports.insert(m[4]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"})) << r.out;
  ASSERT_EQ(ports.size(), 1u) << r.out;
  EXPECT_GT(std::stoi(*ports.begin()), 0);
}

TEST(Launch, AChosenMasterPortIsPassedOn) {
  LaunchOptions o = ranks_running(2, "echo port $MASTER_PORT");
  o.master_port = 29517;
  Launched r = launch(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "[rank 0] port 29517\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[rank 1] port 29517\n")) << r.out;
}

// Each rank writes 200 lines fast, each in three pieces (three writes), every tenth to stderr:
// the launcher must put each line back together, prefix it, and keep each rank's in order.
TEST(Launch, LinesArePrefixedAndNeverInterleaved) {
  Launched r = launch(ranks_running(4,
      "i=0; while [ $i -lt 200 ]; do "
      "  if [ $((i % 10)) -eq 0 ]; then printf 'rank %s ' $RANK >&2; printf 'line %s ' $i >&2; printf 'err\\n' >&2;"
      "  else printf 'rank %s ' $RANK; printf 'line %s ' $i; printf '%s\\n' xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; fi;"
      "  i=$((i + 1)); done"));
  ASSERT_EQ(r.rc, 0) << r.err;
  auto check = [](const std::string& text, const std::string& tail, int per_rank, bool on_stderr) {
    const std::regex line(R"(\[rank (\d)\] rank (\d) line (\d+) )" + tail);
    std::map<std::string, int> last, count;
    for (const std::string& l : lines(text)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(l, m, line)) << "a broken line: '" << l << "'";
      EXPECT_EQ(m[1], m[2]) << l;
      int i = std::stoi(m[3]);
      EXPECT_EQ(i % 10 == 0, on_stderr) << l;
      if (last.count(m[1])) {
        EXPECT_GT(i, last[m[1]]) << "out of order: " << l;
      }
      last[m[1]] = i;
      ++count[m[1]];
    }
    EXPECT_EQ(count, (std::map<std::string, int>{{"0", per_rank}, {"1", per_rank}, {"2", per_rank}, {"3", per_rank}}));
  };
  check(r.out, "x{40}", 180, false);
  check(r.err, "err", 20, true);
}

TEST(Launch, APartialLastLineIsWrittenAndCarriageReturnsEndLines) {
  const char* script = "printf 'a\\rb\\r\\nc\\nno newline'";
  Launched prefixed = launch(ranks_running(1, script));
  EXPECT_EQ(prefixed.rc, 0) << prefixed.err;
  EXPECT_EQ(prefixed.out, "[rank 0] a\r[rank 0] b\r\n[rank 0] c\n[rank 0] no newline\n");
  LaunchOptions o = ranks_running(1, script);
  o.prefix_output = false;
  Launched plain = launch(o);
  EXPECT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.out, "a\rb\r\nc\nno newline\n");
}

TEST(Launch, AllRanksExitingZeroIsZero) {
  Launched r = launch(ranks_running(4, "exit 0"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

// The others sleep on: after the grace period they are terminated, and the launcher returns
// the failing rank's status rather than waiting a minute.
TEST(Launch, AFailingRankEndsTheGroupAfterTheGracePeriod) {
  Launched r = launch(ranks_running(3, "if [ $RANK = 1 ]; then echo giving up >&2; exit 3; fi; sleep 60"));
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_LT(r.seconds, 5) << r.err;
  EXPECT_GE(r.seconds, 0.5) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(\[rank 1\] giving up\nkiln launch: rank 1 \(pid \d+\) exited with status 3\n)"))) << r.err;
  EXPECT_TRUE(has(r.err, "kiln launch: terminating ranks 0, 2 (still running 0.5 s after the first failure): SIGTERM\n")) << r.err;
  EXPECT_FALSE(has(r.err, "SIGKILL")) << r.err;
}

// Ranks that fail on their own within the grace period are reported too; the status is the
// first failure's, and the launcher returns once all have ended, not at the grace's end.
TEST(Launch, RanksThatFailOnTheirOwnAreReportedAndTheFirstFailureCounts) {
  Folder dir;
  LaunchOptions o = ranks_running(3,
      "cd '" + dir.path() + "'; if [ $RANK = 0 ]; then touch failed; exit 3; fi;"
      "while [ ! -e failed ]; do sleep 0.02; done; sleep 0.2; if [ $RANK = 1 ]; then echo peer lost >&2; exit 4; fi");
  o.grace_s = 20;
  Launched r = launch(o);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_LT(r.seconds, 10) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(kiln launch: rank 0 \(pid \d+\) exited with status 3\n)"))) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(\[rank 1\] peer lost\nkiln launch: rank 1 \(pid \d+\) exited with status 4\n)"))) << r.err;
  EXPECT_FALSE(has(r.err, "terminating")) << r.err;
  EXPECT_FALSE(has(r.err, "rank 2")) << r.err;
}

TEST(Launch, ARankKilledByASignalGives128PlusIt) {
  Launched r = launch(ranks_running(3, "if [ $RANK = 2 ]; then kill -9 $$; fi; exit 0"));
  EXPECT_EQ(r.rc, 128 + 9) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(kiln launch: rank 2 \(pid \d+\) was killed by signal 9 \(SIGKILL\)\n)"))) << r.err;
}

TEST(Launch, AProgramThatCannotBeExecutedIs127AndNamed) {
  LaunchOptions o;
  o.nproc = 3;
  o.command = {"kiln-no-such-program", "--flag"};
  Launched missing = launch(o);
  EXPECT_EQ(missing.rc, 127);
  EXPECT_TRUE(has(missing.err, "kiln launch: rank 0 could not start: cannot execute 'kiln-no-such-program': "
                               "No such file or directory (not found on PATH)\n")) << missing.err;
  EXPECT_TRUE(has(missing.err, "ranks 1 to 2 were not started")) << missing.err;

  Folder dir;
  const std::string script = dir.path() + "/not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  ::chmod(script.c_str(), 0644);
  o.nproc = 1;
  o.command = {script};
  Launched denied = launch(o);
  EXPECT_EQ(denied.rc, 127);
  EXPECT_TRUE(has(denied.err, "cannot execute '" + script + "': Permission denied\n")) << denied.err;
}

// SIGINT to the launcher (here sent by rank 0, once every rank has set its trap) reaches every
// rank; they exit 0 from their traps, and the launcher reports the interruption as 128+SIGINT.
TEST(Launch, SigintIsForwardedToEveryRank) {
  Folder dir;
  Launched r = launch(ranks_running(2,
      "cd '" + dir.path() + "'; trap 'echo got INT; exit 0' INT; touch ready$RANK;"
      "if [ $RANK = 0 ]; then while [ ! -e ready1 ]; do sleep 0.02; done; kill -INT $PPID; fi;"
      "i=0; while [ $i -lt 250 ]; do sleep 0.02; i=$((i + 1)); done; exit 9"));
  EXPECT_EQ(r.rc, 128 + 2) << r.err;
  EXPECT_LT(r.seconds, 5) << r.err;
  EXPECT_TRUE(has(r.out, "[rank 0] got INT\n")) << r.out;
  EXPECT_TRUE(has(r.out, "[rank 1] got INT\n")) << r.out;
  EXPECT_TRUE(has(r.err, "kiln launch: got SIGINT: forwarding it to ranks 0, 1")) << r.err;
}

TEST(Launch, BadOptionsAreErrors) {
  LaunchOptions none = ranks_running(0, "true");
  try {
    run_launch(none);
    ADD_FAILURE() << "-n 0 was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), "-n must be at least 1 (got 0)");
  }
  LaunchOptions empty;
  EXPECT_THROW(run_launch(empty), kiln::Error);
}

}  // namespace
