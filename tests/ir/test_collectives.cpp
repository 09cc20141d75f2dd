// The collectives (ir/ops.def): shape rules, and what each rank of a simulated group receives
// (interpret_group), checked element by element against values worked out by hand; a lone
// interpreter is a group of one; mismatched ranks and bad attributes are errors that say so.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/group.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::has;
using testing::meta_fails;

TensorMeta F(Shape s) { return TensorMeta(DType::F32, std::move(s)); }

HostTensor t(DType dt, const Shape& s, std::vector<double> v) { return HostTensor::from_doubles(dt, s, v); }

// Rank r's tensor: 10 * r + its element index, so every element says where it came from.
HostTensor of_rank(int r, const Shape& s, DType dt = DType::F64) {
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 10.0 * r + static_cast<double>(i);
  return t(dt, s, v);
}

std::vector<std::vector<HostTensor>> run(const std::string& text, int world, const Shape& s, DType dt = DType::F64) {
  std::vector<std::vector<HostTensor>> in;
  for (int r = 0; r < world; ++r) in.push_back({of_rank(r, s, dt)});
  return interpret_group(parse_graph(text), in);
}

TEST(Collectives, ShapeRules) {
  auto one = [](Op op, Shape s, Attrs a) {
    Attrs full = complete_attrs(op_info(op), a, 1);
    std::vector<TensorMeta> in{F(std::move(s))};
    return infer_meta(op_info(op), in, full)[0].shape;
  };
  EXPECT_EQ(one(Op::AllReduce, {3, 4}, {{"world_size", int64_t(4)}}), (Shape{3, 4}));
  EXPECT_EQ(one(Op::AllGather, {3, 4}, {{"world_size", int64_t(4)}}), (Shape{12, 4}));
  EXPECT_EQ(one(Op::AllGather, {3, 4}, {{"world_size", int64_t(2)}, {"dim", int64_t(-1)}}), (Shape{3, 8}));
  EXPECT_EQ(one(Op::ReduceScatter, {8, 4}, {{"world_size", int64_t(4)}}), (Shape{2, 4}));
  EXPECT_EQ(one(Op::ReduceScatter, {8, 0}, {{"world_size", int64_t(4)}}), (Shape{2, 0}));
  EXPECT_EQ(one(Op::Broadcast, {}, {{"world_size", int64_t(3)}, {"src", int64_t(2)}}), (Shape{}));
  EXPECT_EQ(one(Op::Reduce, {5}, {{"world_size", int64_t(3)}, {"dst", int64_t(1)}}), (Shape{5}));
  EXPECT_TRUE(meta_fails(Op::ReduceScatter, {F({6, 4})}, {{"world_size", int64_t(4)}}, "does not split into 4 equal parts"));
  EXPECT_TRUE(meta_fails(Op::AllGather, {F({})}, {{"world_size", int64_t(2)}}, "a 0-d tensor has no dim"));
  EXPECT_TRUE(meta_fails(Op::AllGather, {F({2})}, {{"world_size", int64_t(2)}, {"dim", int64_t(1)}}, "dim 1 is out of range"));
  EXPECT_TRUE(meta_fails(Op::AllReduce, {F({2})}, {{"world_size", int64_t(0)}}, "world_size must be at least 1"));
  EXPECT_TRUE(meta_fails(Op::AllReduce, {F({2})}, {{"world_size", int64_t(2)}, {"op", std::string("max")}}, "op must be \"sum\" or \"mean\""));
  EXPECT_TRUE(meta_fails(Op::AllReduce, {TensorMeta(DType::I64, {2})}, {{"world_size", int64_t(2)}, {"op", std::string("mean")}},
                         "a mean across ranks needs a floating tensor"));
  EXPECT_TRUE(meta_fails(Op::Broadcast, {F({2})}, {{"world_size", int64_t(2)}, {"src", int64_t(2)}}, "src=2 is not a rank of a group of 2"));
  EXPECT_TRUE(meta_fails(Op::Reduce, {F({2})}, {{"world_size", int64_t(3)}, {"dst", int64_t(-1)}}, "dst=-1 is not a rank"));
}

TEST(Collectives, AllReduceSumsOrAveragesOverTheRanks) {
  auto out = run("graph g(%x: f64[2,3]) {\n  %y = all_reduce(%x, world_size=3) : f64[2,3]\n  return (%y)\n}", 3, {2, 3});
  ASSERT_EQ(out.size(), 3u);
  for (const auto& rank : out)  // element i: i + (10 + i) + (20 + i)
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(rank[0].get(i), 30.0 + 3.0 * static_cast<double>(i));
  auto mean = run("graph g(%x: f64[4]) {\n  %y = all_reduce(%x, world_size=4, op=\"mean\") : f64[4]\n  return (%y)\n}", 4, {4});
  for (const auto& rank : mean)
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(rank[0].get(i), 15.0 + static_cast<double>(i));
  // Integers wrap as two's complement, as NCCL's int64 sums do.
  Graph g = parse_graph("graph g(%x: i64[1]) {\n  %y = all_reduce(%x, world_size=2) : i64[1]\n  return (%y)\n}");
  HostTensor big = HostTensor::from_ints(DType::I64, {1}, std::vector<int64_t>{INT64_MAX});
  HostTensor one = HostTensor::from_ints(DType::I64, {1}, std::vector<int64_t>{1});
  EXPECT_EQ(interpret_group(g, {{big}, {one}})[1][0].get_int(0), INT64_MIN);
}

TEST(Collectives, AllGatherJoinsTheRanksInOrderAlongADim) {
  // [2,2] per rank, 3 ranks, along dim 1: row o of rank s lands at columns [2s, 2s+2).
  auto out = run("graph g(%x: f32[2,2]) {\n  %y = all_gather(%x, world_size=3, dim=1) : f32[2,6]\n  return (%y)\n}", 3, {2, 2}, DType::F32);
  const std::vector<double> want{0, 1, 10, 11, 20, 21, 2, 3, 12, 13, 22, 23};
  for (const auto& rank : out) EXPECT_EQ(rank[0].to_doubles(), want);
  auto rows = run("graph g(%x: f64[2]) {\n  %y = all_gather(%x, world_size=2) : f64[4]\n  return (%y)\n}", 2, {2});
  EXPECT_EQ(rows[1][0].to_doubles(), (std::vector<double>{0, 1, 10, 11}));
}

TEST(Collectives, ReduceScatterHandsEachRankItsPartOfTheSum) {
  // [4,2] per rank, 2 ranks, along dim 0: rank r gets rows [2r, 2r+2) summed over the ranks.
  auto out = run("graph g(%x: f64[4,2]) {\n  %y = reduce_scatter(%x, world_size=2) : f64[2,2]\n  return (%y)\n}", 2, {4, 2});
  EXPECT_EQ(out[0][0].to_doubles(), (std::vector<double>{10, 12, 14, 16}));
  EXPECT_EQ(out[1][0].to_doubles(), (std::vector<double>{18, 20, 22, 24}));
  auto cols = run("graph g(%x: f64[1,4]) {\n  %y = reduce_scatter(%x, world_size=2, dim=-1, op=\"mean\") : f64[1,2]\n  return (%y)\n}", 2,
                  {1, 4});
  EXPECT_EQ(cols[1][0].to_doubles(), (std::vector<double>{7, 8}));
}

TEST(Collectives, BroadcastAndReduce) {
  auto b = run("graph g(%x: f64[3]) {\n  %y = broadcast(%x, world_size=3, src=2) : f64[3]\n  return (%y)\n}", 3, {3});
  for (const auto& rank : b) EXPECT_EQ(rank[0].to_doubles(), (std::vector<double>{20, 21, 22}));
  auto r = run("graph g(%x: f64[2]) {\n  %y = reduce(%x, world_size=2, dst=1) : f64[2]\n  return (%y)\n}", 2, {2});
  EXPECT_EQ(r[0][0].to_doubles(), (std::vector<double>{0, 0}));
  EXPECT_EQ(r[1][0].to_doubles(), (std::vector<double>{10, 12}));
}

TEST(Collectives, EmptyTensorsAndOtherOpsRunPerRank) {
  auto out = run(R"(graph g(%x: f64[0,3]) {
  %y = all_gather(%x, world_size=2, dim=1) : f64[0,6]
  return (%y)
})",
                 2, {0, 3});
  EXPECT_EQ(out[0][0].shape(), (Shape{0, 6}));
  // A graph around the collective: each rank's own neg before, its own add after.
  auto chain = run(R"(graph g(%x: f64[2]) {
  %e = neg(%x) : f64[2]
  %s = all_reduce(%e, world_size=2) : f64[2]
  %y = add(%s, %x) : f64[2]
  return (%y)
})",
                   2, {2});
  // rank 0: x = [0, 1], rank 1: [10, 11]; the sum of the negs is [-10, -12] on both.
  EXPECT_EQ(chain[0][0].to_doubles(), (std::vector<double>{-10, -11}));
  EXPECT_EQ(chain[1][0].to_doubles(), (std::vector<double>{0, -1}));
}

TEST(Collectives, ALoneInterpreterIsAGroupOfOne) {
  Graph g = parse_graph("graph g(%x: f32[2]) {\n  %y = all_reduce(%x, world_size=1, op=\"mean\") : f32[2]\n  return (%y)\n}");
  HostTensor x = t(DType::F32, {2}, {1.5, -2});
  EXPECT_EQ(interpret(g, std::vector<HostTensor>{x})[0].to_doubles(), x.to_doubles());
  Graph four = parse_graph("graph g(%x: f32[2]) {\n  %y = all_reduce(%x, world_size=4) : f32[2]\n  return (%y)\n}");
  std::string err = testing::error_of([&] { interpret(four, std::vector<HostTensor>{x}); });
  EXPECT_TRUE(has(err, "%y = all_reduce: all_reduce over 4 ranks needs the other ranks' tensors")) << err;
  EXPECT_TRUE(has(err, "interpret_group")) << err;
}

TEST(Collectives, RanksThatDisagreeAreErrorsNamingTheRank) {
  Graph g = parse_graph("graph g(%x: f32[2]) {\n  %y = all_reduce(%x, world_size=3) : f32[2]\n  return (%y)\n}");
  HostTensor x = t(DType::F32, {2}, {1, 2});
  std::string err = testing::error_of([&] { interpret_group(g, {{x}, {x}}); });
  EXPECT_TRUE(has(err, "all_reduce is for a group of 3 ranks, run by 2")) << err;
  err = testing::error_of([&] { interpret_group(g, {{x}, {t(DType::F32, {3}, {1, 2, 3})}, {x}}); });
  EXPECT_TRUE(has(err, "rank 1, input %x: expected f32[2], got f32[3]")) << err;
  err = testing::error_of([&] { interpret_group(g, {}); });
  EXPECT_TRUE(has(err, "at least one rank")) << err;
}

TEST(Collectives, PrintAndParseBack) {
  const char* text = R"(graph g(%x: f32[4,2]) {
  %a = all_reduce(%x, world_size=2, op="mean") : f32[4,2]
  %b = all_gather(%a, world_size=2, dim=1) : f32[4,4]
  %c = reduce_scatter(%b, world_size=2) : f32[2,4]
  %d = broadcast(%c, world_size=2, src=1) : f32[2,4]
  %e = reduce(%d, world_size=2) : f32[2,4]
  return (%e)
})";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
  EXPECT_EQ(op_info(Op::AllGather).category, OpCategory::Collective);
  EXPECT_EQ(category_name(OpCategory::Collective), "collective");
}

}  // namespace
}  // namespace kiln
