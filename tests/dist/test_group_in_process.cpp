// A process group of one rank in the test's own process: its collectives go through the
// engines (Gloo on the CPU, NCCL on a GPU) and run beside the steps after them, so a step that
// reads a collective's result must wait for it whatever its kind. A matmul reading an
// all_reduce's result right after it read the arena's first fill (NaN) before this was so.
#include <gtest/gtest.h>

#include "backend/compile.h"
#include "ir/parser.h"
#include "runtime/dist/process_group.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class GroupOfOne : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (!on_cuda() && !runtime::dist::gloo_available()) GTEST_SKIP() << "no Gloo in this build";
    runtime::dist::GroupOptions o;
    o.master_port = 0;  // rank 0 alone: the store picks a free port and talks to itself
    o.timeout = std::chrono::seconds(30);
    runtime::dist::init_process_group(o);
  }
  void TearDown() override {
    runtime::dist::destroy_process_group();
    DeviceTest::TearDown();
  }
};

TEST_P(GroupOfOne, EveryStepThatReadsACollectivesResultWaitsForIt) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(R"(
graph waits(%x: f32[64,64], %w: f32[64,64], %v: f32[64]) {
  %r = all_reduce(%x, world_size=1, op="mean") : f32[64,64]
  %m = matmul(%r, %w) : f32[64,64]
  %s = all_reduce(%v, world_size=1, op="sum") : f32[64]
  %e = exp(%s) : f32[64]
  %g = all_gather(%v, world_size=1, dim=0) : f32[64]
  return (%m, %e, %g)
}
)");
  for (int run = 0; run < 3; ++run) expect_matches_reference(g, 10 + static_cast<uint64_t>(run));
}

KILN_DEVICE_TESTS(GroupOfOne);

}  // namespace
}  // namespace kiln::testing
