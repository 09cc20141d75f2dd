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

TEST_P(CompiledCollectives, AGatherOrScatterAlongALaterDimIsMovedToTheFront) {
  KILN_REQUIRE_JIT();
  // passes/collectives_dim0 rewrites them around a collective along dim 0 (checked there on
  // groups of 2 and 3); compiled, a group of one gives back its tensor.
  Graph g = parse_graph(R"(
graph ag(%x: f32[3,4]) {
  %y = all_gather(%x, world_size=1, dim=1) : f32[3,4]
  %z = reduce_scatter(%x, world_size=1, dim=-1, op="mean") : f32[3,4]
  %w = mul(%y, %z) : f32[3,4]
  return (%w)
}
)");
  backend::CompiledGraph cg = compile_for_test(g);
  EXPECT_EQ(cg.report.collective_calls, 2) << cg.report.str();
  expect_matches_reference(g, 2);
}

// A collective goes as early as its input allows, so that the steps that do not need its
// result run while it travels (DDP's bucket during the rest of the backward); its input stays
// alive until its result is first read.
TEST(CollectiveSchedule, ACollectiveIsLaunchedAsSoonAsItsInputExists) {
  Graph g = parse_graph(R"(
graph early(%x: f32[8,8], %y: f32[8,8]) {
  %a = sum(%x, dim=[1]) : f32[8]
  %m1 = matmul(%y, %y) : f32[8,8]
  %m2 = matmul(%m1, %y) : f32[8,8]
  %m3 = matmul(%m2, %y) : f32[8,8]
  %r = all_reduce(%a, world_size=1, op="sum") : f32[8]
  %o = add(%m3, %r) : f32[8,8]
  return (%o)
}
)");
  backend::CompileOptions o;
  o.device = Device::cpu();
  KILN_REQUIRE_JIT();
  backend::CompiledGraph cg = backend::compile(g, o);
  const codegen::LoweredGraph& lg = cg.executable.lowered();
  std::vector<codegen::Step::Kind> kinds;
  for (const codegen::Step& s : lg.steps) kinds.push_back(s.kind);
  using K = codegen::Step::Kind;
  ASSERT_EQ(kinds, (std::vector<K>{K::Kernel, K::Collective, K::Matmul, K::Matmul, K::Matmul, K::Kernel}))
      << codegen::print_schedule(lg);
  const int a = lg.steps[1].opaque.inputs[0];
  EXPECT_EQ(lg.buffers[static_cast<size_t>(a)].last_step, 5) << "the sum's buffer lives until the all_reduce is waited for";
  expect_matches_reference(g, 4);
  // A gather makes more than it reads (FSDP's parameters): it stays just before its reader
  // instead of living from the start.
  Graph gather = parse_graph(R"(
graph late(%y: f32[8,8], %w: f32[8]) {
  %m1 = matmul(%y, %y) : f32[8,8]
  %m2 = matmul(%m1, %y) : f32[8,8]
  %g = all_gather(%w, world_size=1, dim=0) : f32[8]
  %o = add(%m2, %g) : f32[8,8]
  return (%o)
}
)");
  backend::CompiledGraph gc = backend::compile(gather, o);
  std::vector<K> gather_kinds;
  for (const codegen::Step& s : gc.executable.lowered().steps) gather_kinds.push_back(s.kind);
  EXPECT_EQ(gather_kinds, (std::vector<K>{K::Matmul, K::Matmul, K::Collective, K::Kernel})) << codegen::print_schedule(gc.executable.lowered());
  // Without a collective the order is the lowering's.
  Graph plain = parse_graph("graph p(%x: f32[4], %y: f32[4,4]) {\n  %m = matmul(%y, %y) : f32[4,4]\n  %e = exp(%x) : f32[4]\n  return (%m, %e)\n}\n");
  backend::CompiledGraph pc = backend::compile(plain, o);
  EXPECT_EQ(pc.executable.lowered().steps[0].kind, K::Matmul);
}

KILN_DEVICE_TESTS(CompiledCollectives);

}  // namespace
}  // namespace kiln::testing
