// DDP across processes: `kiln launch -n 2` starts two ranks of tests/dist/ddp_worker.cpp, which
// train with Gloo collectives and check every step against one process on the whole batch; and
// the faults of a group: a rank that dies or hangs makes the other fail within its timeout,
// naming the rank, and ranks that run different graphs are told so at the first collective.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/dist/process_group.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::has;

struct Launched {
  int status = -1;  // the launcher's exit status
  std::string output;
  double seconds = 0;
};

// The ranks run on the CPU, through Gloo: a build without it (the GPU machine's) skips.
#define KILN_REQUIRE_GLOO() \
  if (!runtime::dist::gloo_available()) GTEST_SKIP() << "no Gloo in this build (apt-get install libgloo-dev)"

// A shell command's exit status, stdout and stderr together, and how long it took.
Launched run_command(const std::string& cmd) {
  Launched l;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return l;
  char buf[4096];
  for (size_t got; (got = fread(buf, 1, sizeof buf, p)) > 0;) l.output.append(buf, got);
  int st = pclose(p);
  l.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  l.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

// `kiln launch -n <n> ddp_worker <args>` on the CPU, each rank's wait bounded by 4 s.
Launched launch(int n, const std::string& args) {
  return run_command(fmt::format("KILN_DIST_TIMEOUT=4 {} launch -n {} --grace 2 {} --device cpu {}", KILN_BINARY, n, KILN_DDP_WORKER, args));
}

TEST(DistributedDataParallel, TwoGlooProcessesTrainAsOneProcessOnTheWholeBatch) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(2, "--steps 4");
  EXPECT_EQ(l.status, 0) << l.output;
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < 4; ++s) EXPECT_TRUE(has(l.output, fmt::format("[rank {}] rank {} step {}: loss", r, r, s))) << l.output;
}

TEST(DistributedDataParallel, ThreeRanksAndOneBucketPerGradient) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(3, "--steps 2 --bucket-bytes 1");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "[rank 2] rank 2 step 1: loss")) << l.output;
}

TEST(DistributedDataParallel, ShardedParametersOverTwoAndThreeGlooProcessesTrainAsOneProcess) {
  KILN_REQUIRE_GLOO();
  for (int n : {2, 3}) {
    Launched l = launch(n, "--steps 3 --fsdp");
    EXPECT_EQ(l.status, 0) << l.output;
    EXPECT_TRUE(has(l.output, fmt::format("[rank {}] rank {} step 2: loss", n - 1, n - 1))) << l.output;
    EXPECT_TRUE(has(l.output, "[rank 0] memory per rank, FSDP: parameters and optimizer state")) << l.output;
    EXPECT_TRUE(has(l.output, "[rank 0] memory per rank, DDP : parameters and optimizer state")) << l.output;
  }
}

TEST(DistributedDataParallel, ATrainerWithADataParallelConfigTrainsTheModulesOwnParameters) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(2, "--steps 3 --trainer");
  EXPECT_EQ(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "[rank 1] rank 1 step 2: loss")) << l.output;
}

TEST(DistributedDataParallel, ARankThatDiesIsNamedByTheOthers) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(2, "--steps 3 --fault die --fault-rank 1 --fault-step 1");
  EXPECT_NE(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "[rank 0] error: rank 0:")) << l.output;
  EXPECT_TRUE(has(l.output, "rank 1 died")) << l.output;
  EXPECT_LT(l.seconds, 20) << l.output;
}

TEST(DistributedDataParallel, ARankThatHangsMakesTheOthersTimeOutNamingIt) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(2, "--steps 3 --fault hang --fault-rank 1 --fault-step 1");
  EXPECT_NE(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "rank 1 has not reached collective #")) << l.output;
  EXPECT_TRUE(has(l.output, "kiln launch: rank 0")) << "the launcher reports the rank that failed first\n" << l.output;
  EXPECT_LT(l.seconds, 25) << "the timeout is 4 s and the grace 2 s\n" << l.output;
}

TEST(DistributedDataParallel, RanksRunningDifferentGraphsAreToldAtTheFirstCollective) {
  KILN_REQUIRE_GLOO();
  Launched l = launch(2, "--fault mismatch --fault-rank 1");
  EXPECT_NE(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "the ranks run different graphs")) << l.output;
  EXPECT_TRUE(has(l.output, "f32[16,8]")) << l.output;
  EXPECT_TRUE(has(l.output, "f32[17,8]")) << l.output;
}

TEST(DistributedDataParallel, AProgramOutsideAGroupIsToldHowToStartOne) {
  Launched l = run_command(fmt::format("env -u RANK -u WORLD_SIZE {}", KILN_DDP_WORKER));
  EXPECT_NE(l.status, 0) << l.output;
  EXPECT_TRUE(has(l.output, "needs the environment variable RANK")) << l.output;
  EXPECT_TRUE(has(l.output, "kiln launch")) << l.output;
}

}  // namespace
}  // namespace kiln
