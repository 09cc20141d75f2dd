// collectives_dim0: an all_gather or reduce_scatter along a dim with others before it becomes
// one along dim 0 between views, and every rank of a simulated group receives what it did
// before the rewrite; one along a leading dim (or after only 1s) is left alone.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/group.h"
#include "passes/collectives_dim0.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

// Every rank's outputs, before and after the rewrite, on random inputs of each rank.
void expect_same_on_a_group(const std::string& text, int world) {
  Graph before = parse_graph(text);
  Graph after = before.clone();
  ASSERT_TRUE(run_collectives_dim0(after)) << print_graph(after);
  for (const Node* n : after.nodes()) {
    if (n->op() == Op::AllGather || n->op() == Op::ReduceScatter) {
      EXPECT_EQ(n->attrs().get_int("dim"), 0) << print_graph(after);
    }
  }
  std::vector<std::vector<HostTensor>> in;
  for (int r = 0; r < world; ++r) {
    std::vector<HostTensor> mine;
    for (const Node* i : before.inputs()) mine.push_back(random_tensor(i->meta(), 7 + 13 * static_cast<uint64_t>(r), 8));
    in.push_back(mine);
  }
  auto want = interpret_group(before, in), got = interpret_group(after, in);
  for (int r = 0; r < world; ++r)
    for (size_t o = 0; o < want[static_cast<size_t>(r)].size(); ++o)
      EXPECT_EQ(got[static_cast<size_t>(r)][o].to_doubles(), want[static_cast<size_t>(r)][o].to_doubles())
          << "rank " << r << " output " << o << "\n" << print_graph(after);
}

TEST(CollectivesDim0, AGatherAlongALaterDimJoinsTheSameElements) {
  expect_same_on_a_group(R"(
graph g(%x: f32[3,4,2]) {
  %y = all_gather(%x, world_size=2, dim=1) : f32[3,8,2]
  %z = all_gather(%x, world_size=2, dim=-1) : f32[3,4,4]
  return (%y, %z)
})", 2);
  expect_same_on_a_group(R"(
graph g(%x: i64[2,5]) {
  %y = all_gather(%x, world_size=3, dim=1) : i64[2,15]
  return (%y)
})", 3);
}

TEST(CollectivesDim0, AScatterAlongALaterDimHandsEachRankItsPart) {
  expect_same_on_a_group(R"(
graph g(%x: f32[3,4,6]) {
  %y = reduce_scatter(%x, world_size=2, dim=1, op="mean") : f32[3,2,6]
  %z = reduce_scatter(%x, world_size=2, dim=2, op="sum") : f32[3,4,3]
  return (%y, %z)
})", 2);
  expect_same_on_a_group(R"(
graph g(%x: f32[2,9]) {
  %y = reduce_scatter(%x, world_size=3, dim=1) : f32[2,3]
  return (%y)
})", 3);
}

TEST(CollectivesDim0, ALeadingDimOrOneAfterOnlyOnesIsLeftAlone) {
  Graph g = parse_graph(R"(
graph g(%x: f32[1,4], %w: f32[6,2]) {
  %y = all_gather(%x, world_size=2, dim=1) : f32[1,8]
  %z = reduce_scatter(%w, world_size=2, dim=0) : f32[3,2]
  return (%y, %z)
})");
  const std::string text = print_graph(g);
  EXPECT_FALSE(run_collectives_dim0(g));
  EXPECT_EQ(print_graph(g), text);
}

}  // namespace
}  // namespace kiln
