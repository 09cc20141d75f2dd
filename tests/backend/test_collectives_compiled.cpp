// Collectives in compiled graphs, on every device: a group of one rank runs the same steps as a
// larger one (the engines' calls become copies), each op equal to its reference; a collective
// over more ranks outside a process group is an error saying how to start one. Groups of
// several processes: tests/dist (Gloo) and the GPU machine's NCCL runs (scripts/device-test.sh).
#include <gtest/gtest.h>

#include "backend/compile.h"
#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class CompiledCollectives : public DeviceTest {};

TEST_P(CompiledCollectives, EachCollectiveOfAGroupOfOneIsItsReference) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(R"(
graph one(%x: f32[6,5], %h: bf16[4,3], %i: i64[7]) {
  %sum = all_reduce(%x, world_size=1, op="sum") : f32[6,5]
  %mean = all_reduce(%h, world_size=1, op="mean") : bf16[4,3]
  %gathered = all_gather(%x, world_size=1, dim=0) : f32[6,5]
  %scattered = reduce_scatter(%x, world_size=1, dim=0) : f32[6,5]
  %sent = broadcast(%i, world_size=1, src=0) : i64[7]
  %e = exp(%sum) : f32[6,5]
  return (%e, %mean, %gathered, %scattered, %sent)
}
)");
  backend::CompiledGraph cg = compile_for_test(g);
  EXPECT_EQ(cg.report.collective_calls, 5) << cg.report.str();
  EXPECT_TRUE(has(cg.report.str(), "+ 5 collectives")) << cg.report.str();
  expect_matches_reference(g, 3);
}

TEST_P(CompiledCollectives, ACollectiveOverMoreRanksOutsideAGroupSaysHowToStartOne) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph("graph dp(%g: f32[8]) {\n  %m = all_reduce(%g, world_size=2, op=\"mean\") : f32[8]\n  return (%m)\n}\n");
  backend::CompiledGraph cg = compile_for_test(g);
  std::string why;
  if (!device_can_run(&why)) GTEST_SKIP() << why;
  std::string err = error_of([&] { cg.executable.run(inputs_for(g, 1)); });
  EXPECT_TRUE(has(err, "graph dp: %m = all_reduce(%g, world_size=2, op=mean) : f32[8] is a collective over 2 ranks")) << err;
  EXPECT_TRUE(has(err, "kiln::dist::init_process_group()")) << err;
  EXPECT_TRUE(has(err, "kiln launch -n N")) << err;
}

TEST_P(CompiledCollectives, AGatherAlongALaterDimIsRefusedNamingTheNode) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph("graph ag(%x: f32[3,4]) {\n  %y = all_gather(%x, world_size=2, dim=1) : f32[3,8]\n  return (%y)\n}\n");
  std::string err = error_of([&] { compile_for_test(g); });
  EXPECT_TRUE(has(err, "node %y: all_gather along dim 1 of [3,4]")) << err;
  // Along a dim with only 1s before it, the engines join contiguous memory: accepted.
  Graph ok = parse_graph("graph ag1(%x: f32[1,4]) {\n  %y = all_gather(%x, world_size=1, dim=1) : f32[1,4]\n  return (%y)\n}\n");
  expect_matches_reference(ok, 2);
}

KILN_DEVICE_TESTS(CompiledCollectives);

}  // namespace
}  // namespace kiln::testing
