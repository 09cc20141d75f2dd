// Gradchecks (float64, every element) of the derivative rules of views and shape ops.
#include <gtest/gtest.h>

#include <optional>

#include "tests/support/gradcheck_util.h"

using namespace kiln;
using namespace kiln::autograd;
using kiln::testing::gradcheck_graph;
using kiln::testing::gradcheck_values;

namespace {

HostTensor rnd(const Shape& s, uint64_t seed) { return random_tensor(TensorMeta(DType::F64, s), seed); }

// A graph of inputs %x0, %x1, ... typed like `ins`, one `op` node, and the node's results
// listed in `outputs` as the graph's outputs.
Graph one_op(Op op, const std::vector<HostTensor>& ins, const Attrs& attrs, const std::vector<int>& outputs) {
  Graph g("one_op");
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), ins[i].meta()));
  Node* n = g.add_node(op, vs, attrs, "y");
  std::vector<Value> outs;
  for (int r : outputs) outs.push_back(n->result(r));
  g.set_outputs(outs);
  return g;
}

Attrs slice_attrs(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  Attrs a{{"dim", dim}, {"step", step}};
  if (start) a.set("start", *start);
  if (end) a.set("end", *end);
  return a;
}

}  // namespace

TEST(ViewRules, Reshape) {
  EXPECT_TRUE(gradcheck_values(Op::Reshape, {rnd({2, 3, 4}, 1)}, {{"shape", IntList{4, 6}}}));
  EXPECT_TRUE(gradcheck_values(Op::Reshape, {rnd({7}, 2)}, {{"shape", IntList{1, -1, 1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Reshape, {rnd({1}, 3)}, {{"shape", IntList{}}}));
}

TEST(ViewRules, PermuteAndTranspose) {
  EXPECT_TRUE(gradcheck_values(Op::Permute, {rnd({2, 3, 4}, 1)}, {{"dims", IntList{2, 0, 1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Permute, {rnd({2, 3, 4, 5}, 2)}, {{"dims", IntList{-1, 1, -4, 2}}}));
  EXPECT_TRUE(gradcheck_values(Op::Transpose, {rnd({2, 3, 4}, 3)}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Transpose, {rnd({7, 1}, 4)}, {{"dim0", int64_t{1}}, {"dim1", int64_t{0}}}));
}

TEST(ViewRules, ExpandSumsOverExpandedDims) {
  EXPECT_TRUE(gradcheck_values(Op::Expand, {rnd({3, 1}, 1)}, {{"size", IntList{2, 3, 5}}}));
  EXPECT_TRUE(gradcheck_values(Op::Expand, {rnd({1}, 2)}, {{"size", IntList{4, 7}}}));
  EXPECT_TRUE(gradcheck_values(Op::Expand, {rnd({}, 3)}, {{"size", IntList{3, 2}}}));
  EXPECT_TRUE(gradcheck_values(Op::Expand, {rnd({2, 1, 3}, 4)}, {{"size", IntList{-1, 4, -1}}}));
}

TEST(ViewRules, SqueezeAndUnsqueeze) {
  EXPECT_TRUE(gradcheck_values(Op::Squeeze, {rnd({2, 1, 3, 1}, 1)}, {}));
  EXPECT_TRUE(gradcheck_values(Op::Squeeze, {rnd({2, 1, 3, 1}, 2)}, {{"dim", IntList{-1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Unsqueeze, {rnd({2, 3}, 3)}, {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Unsqueeze, {rnd({2, 3}, 4)}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::Unsqueeze, {rnd({}, 5)}, {{"dim", int64_t{0}}}));
}

TEST(ViewRules, SliceStepOne) {
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({7, 3}, 1)}, slice_attrs(0, 2, 5, 1)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({3, 7}, 2)}, slice_attrs(-1, std::nullopt, 4, 1)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({3, 7}, 3)}, slice_attrs(1, -3, std::nullopt, 1)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({3, 7}, 4)}, slice_attrs(1, std::nullopt, std::nullopt, 1)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({3, 7}, 5)}, slice_attrs(1, -100, 100, 1)));  // clamped bounds
}

TEST(ViewRules, SliceWithStepsTwoAndThree) {
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({9, 2}, 1)}, slice_attrs(0, 1, std::nullopt, 2)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({2, 10}, 2)}, slice_attrs(-1, 0, 10, 3)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({2, 10, 3}, 3)}, slice_attrs(1, -8, -1, 3)));  // negative start and end
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({33}, 4)}, slice_attrs(0, -7, std::nullopt, 2)));
  EXPECT_TRUE(gradcheck_values(Op::Slice, {rnd({5, 2}, 5)}, slice_attrs(0, 4, 5, 3)));  // one element
}

TEST(ViewRules, EmptySliceHasZeroGradient) {
  HostTensor x = rnd({4, 3}, 1);
  EXPECT_TRUE(gradcheck_values(Op::Slice, {x}, slice_attrs(0, 3, 1, 1)));
}

TEST(ViewRules, CatOfThreeInputs) {
  EXPECT_TRUE(gradcheck_values(Op::Cat, {rnd({2, 3}, 1), rnd({2, 1}, 2), rnd({2, 4}, 3)}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Cat, {rnd({1, 3}, 4), rnd({7, 3}, 5), rnd({2, 3}, 6)}, {{"dim", int64_t{-2}}}));
  EXPECT_TRUE(gradcheck_values(Op::Cat, {rnd({2, 2, 2}, 7), rnd({2, 2, 3}, 8), rnd({2, 2, 1}, 9)}, {{"dim", int64_t{-1}}}));
}

TEST(ViewRules, CatWithAnIntegerInputDifferentiatesTheOthers) {
  Graph g("cat_mixed");
  Value a = g.add_input("a", TensorMeta(DType::F64, {2, 2}));
  Value i = g.add_input("i", TensorMeta(DType::I64, {2, 3}));
  Value b = g.add_input("b", TensorMeta(DType::F64, {2, 1}));
  g.set_outputs({g.add(Op::Cat, {a, i, b}, {{"dim", int64_t{1}}})});
  EXPECT_TRUE(gradcheck_graph(g, {rnd({2, 2}, 1), random_tensor(TensorMeta(DType::I64, {2, 3}), 2), rnd({2, 1}, 3)}));
}

TEST(ViewRules, SplitIntoEqualPartsAndBySizes) {
  EXPECT_TRUE(gradcheck_values(Op::Split, {rnd({7, 2}, 1)}, {{"split_size", int64_t{3}}, {"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::Split, {rnd({2, 8}, 2)}, {{"split_sizes", IntList{2, 0, 5, 1}}, {"dim", int64_t{-1}}}));
}

TEST(ViewRules, SplitWithUnusedResults) {
  Attrs a{{"split_sizes", IntList{2, 3, 2}}, {"dim", int64_t{1}}};
  HostTensor x = rnd({3, 7}, 1);
  EXPECT_TRUE(gradcheck_graph(one_op(Op::Split, {x}, a, {1}), {x}));     // the middle piece only
  EXPECT_TRUE(gradcheck_graph(one_op(Op::Split, {x}, a, {0, 2}), {x}));  // the middle piece unused
}

TEST(ViewRules, ContiguousOfATransposedView) {
  Graph g("contiguous");
  Value x = g.add_input("x", TensorMeta(DType::F64, {3, 4}));
  Value t = g.add(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  g.set_outputs({g.add(Op::Contiguous, {t})});
  EXPECT_TRUE(gradcheck_graph(g, {rnd({3, 4}, 1)}));
}

TEST(ViewRules, ChainOfViews) {
  // slice of a permuted, expanded tensor, reshaped: the rules compose through strided views.
  Graph g("chain");
  Value x = g.add_input("x", TensorMeta(DType::F64, {3, 1, 4}));
  Value e = g.add(Op::Expand, {x}, {{"size", IntList{3, 5, 4}}});
  Value p = g.add(Op::Permute, {e}, {{"dims", IntList{2, 0, 1}}});
  Value s = g.add(Op::Slice, {p}, slice_attrs(2, 1, std::nullopt, 2));
  g.set_outputs({g.add(Op::Reshape, {s}, {{"shape", IntList{-1}}})});
  EXPECT_TRUE(gradcheck_graph(g, {rnd({3, 1, 4}, 1)}));
}
