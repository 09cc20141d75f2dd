// Gradchecks (float64, every element) of the derivative rules of matrix products and indexing.
#include <gtest/gtest.h>

#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

using namespace kiln;
using namespace kiln::autograd;
using kiln::testing::gradcheck_graph;
using kiln::testing::gradcheck_values;

namespace {

HostTensor rnd(const Shape& s, uint64_t seed) { return random_tensor(TensorMeta(DType::F64, s), seed); }
HostTensor idx(const Shape& s, std::vector<int64_t> v) { return kiln::testing::ints(DType::I64, s, std::move(v)); }

}  // namespace

TEST(LinalgRules, MatmulVectorCases) {
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({5}, 1), rnd({5}, 2)}));           // dot
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({3}, 3), rnd({3, 4}, 4)}));        // vector @ matrix
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({2, 3}, 5), rnd({3}, 6)}));        // matrix @ vector
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({3}, 7), rnd({2, 3, 4}, 8)}));     // vector @ batch
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({2, 4, 3}, 9), rnd({3}, 10)}));    // batch @ vector
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({1}, 11), rnd({1}, 12)}));
}

TEST(LinalgRules, MatmulMatrices) {
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({2, 3}, 1), rnd({3, 4}, 2)}));
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({1, 33}, 3), rnd({33, 7}, 4)}));
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({7, 1}, 5), rnd({1, 1}, 6)}));
}

TEST(LinalgRules, MatmulBatchedWithBroadcasting) {
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({2, 5, 3}, 1), rnd({3, 4}, 2)}));        // matrix broadcast over batch
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({5, 3}, 3), rnd({2, 3, 4}, 4)}));
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({2, 1, 3, 4}, 5), rnd({3, 4, 2}, 6)}));  // batch dims 1 and missing
  EXPECT_TRUE(gradcheck_values(Op::Matmul, {rnd({1, 2, 2, 3}, 7), rnd({3, 1, 3, 2}, 8)}));
}

// einsum is differentiated through its decomposition's parts (diagonals as strided slices).
TEST(LinalgRules, EinsumThroughItsDecomposition) {
  auto eq = [](const char* e) { return Attrs{{"equation", std::string(e)}}; };
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({2, 3}, 1), rnd({3, 4}, 2)}, eq("ij,jk->ik")));
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({2, 3, 4}, 3), rnd({1, 5, 4}, 4)}, eq("bij,bkj->bik")));
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({3, 3}, 5)}, eq("ii->i")));
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({2, 4, 4}, 6)}, eq("...ii")));
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({3}, 7), rnd({4}, 8), rnd({3, 4}, 9)}, eq("i,j,ij->")));
  EXPECT_TRUE(gradcheck_values(Op::Einsum, {rnd({2, 1, 3}, 10), rnd({4, 3}, 11)}, eq("...j,kj->...k")));
}

TEST(LinalgRules, Bmm) {
  EXPECT_TRUE(gradcheck_values(Op::Bmm, {rnd({2, 3, 4}, 1), rnd({2, 4, 5}, 2)}));
  EXPECT_TRUE(gradcheck_values(Op::Bmm, {rnd({1, 1, 7}, 3), rnd({1, 7, 1}, 4)}));
}

TEST(LinalgRules, LinearWithAndWithoutBias) {
  EXPECT_TRUE(gradcheck_values(Op::Linear, {rnd({3, 4}, 1), rnd({5, 4}, 2), rnd({5}, 3)}));
  EXPECT_TRUE(gradcheck_values(Op::Linear, {rnd({2, 3, 4}, 4), rnd({5, 4}, 5)}));
  EXPECT_TRUE(gradcheck_values(Op::Linear, {rnd({4}, 6), rnd({7, 4}, 7), rnd({7}, 8)}));  // 1-d input
  EXPECT_TRUE(gradcheck_values(Op::Linear, {rnd({2, 3, 4}, 9), rnd({4}, 10), rnd({}, 11)}));  // 1-d weight
  EXPECT_TRUE(gradcheck_values(Op::Linear, {rnd({2, 1, 33}, 12), rnd({1, 33}, 13), rnd({1}, 14)}));
}

TEST(LinalgRules, AddmmWithBroadcastSelfAndScales) {
  EXPECT_TRUE(gradcheck_values(Op::Addmm, {rnd({3, 4}, 1), rnd({3, 2}, 2), rnd({2, 4}, 3)}));
  EXPECT_TRUE(gradcheck_values(Op::Addmm, {rnd({4}, 4), rnd({3, 2}, 5), rnd({2, 4}, 6)},
                          {{"beta", 0.5}, {"alpha", 2.0}}));
  EXPECT_TRUE(gradcheck_values(Op::Addmm, {rnd({3, 1}, 7), rnd({3, 7}, 8), rnd({7, 4}, 9)},
                          {{"beta", int64_t{3}}, {"alpha", -1.5}}));
  EXPECT_TRUE(gradcheck_values(Op::Addmm, {rnd({}, 10), rnd({1, 1}, 11), rnd({1, 5}, 12)}, {{"beta", 0.0}}));
}

TEST(LinalgRules, GatherWithRepeatedIndices) {
  EXPECT_TRUE(gradcheck_values(Op::Gather, {rnd({3, 4}, 1), idx({3, 2}, {0, 0, 3, 3, 1, 3})}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Gather, {rnd({3, 4}, 2), idx({4, 2}, {2, 2, 2, 0, 0, 1, 2, 2})}, {{"dim", int64_t{-2}}}));
  EXPECT_TRUE(gradcheck_values(Op::Gather, {rnd({5}, 3), idx({}, {4})}, {{"dim", int64_t{0}}}));
}

TEST(LinalgRules, ScatterAddSelfAndSource) {
  // index smaller than src: src's elements outside the index's extent get zero gradient.
  EXPECT_TRUE(gradcheck_values(Op::ScatterAdd, {rnd({3, 4}, 1), idx({2, 3}, {0, 2, 2, 1, 1, 0}), rnd({3, 5}, 2)},
                          {{"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::ScatterAdd, {rnd({2, 5}, 3), idx({2, 3}, {4, 4, 0, 1, 2, 1}), rnd({2, 3}, 4)},
                          {{"dim", int64_t{-1}}}));
}

// scatter: self's gradient is zero where src wrote, src's the gradient where it wrote (unique
// destinations: a write another overwrites has PyTorch's gradient, gather's, not zero).
TEST(LinalgRules, ScatterSelfAndSource) {
  EXPECT_TRUE(gradcheck_values(Op::Scatter, {rnd({3, 4}, 1), idx({2, 3}, {0, 2, 1, 1, 0, 2}), rnd({3, 5}, 2)},
                               {{"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::Scatter, {rnd({2, 5}, 3), idx({2, 2}, {4, 0, 1, 3}), rnd({2, 3}, 4)}, {{"dim", int64_t{-1}}}));
}

// sort and topk: each value's gradient goes back to where it came from (distinct random
// values: central differences do not reorder a row).
TEST(LinalgRules, SortAndTopk) {
  EXPECT_TRUE(gradcheck_values(Op::Sort, {rnd({3, 6}, 5)}, {{"descending", true}}));
  EXPECT_TRUE(gradcheck_values(Op::Sort, {rnd({4, 3, 2}, 6)}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Topk, {rnd({3, 7}, 7)}, {{"k", int64_t{3}}}));
  EXPECT_TRUE(gradcheck_values(Op::Topk, {rnd({5, 2}, 8)}, {{"k", int64_t{2}}, {"dim", int64_t{0}}, {"largest", false}}));
}

TEST(LinalgRules, AttentionLikeChain) {
  // q @ k^T scaled, softmax-free: matmul of transposed views and a batch broadcast.
  Graph g("chain");
  Value q = g.add_input("q", TensorMeta(DType::F64, {2, 3, 4}));
  Value k = g.add_input("k", TensorMeta(DType::F64, {3, 4}));
  Value v = g.add_input("v", TensorMeta(DType::F64, {2, 3, 2}));
  Value kt = g.add(Op::Transpose, {k}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  Value s = g.add(Op::Matmul, {q, kt});
  g.set_outputs({g.add(Op::Matmul, {s, v})});
  EXPECT_TRUE(gradcheck_graph(g, {rnd({2, 3, 4}, 1), rnd({3, 4}, 2), rnd({2, 3, 2}, 3)}));
}

namespace {
int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (Node* node : g.nodes()) n += node->op() == op;
  return n;
}
}  // namespace

TEST(LinalgRules, OnlyTheWantedGradientsAreBuilt) {
  // linear's forward is one linear node: each wanted gradient of x or W is one matmul.
  Graph g = kiln::testing::one_op_graph(Op::Linear, {kiln::testing::F64({3, 4}), kiln::testing::F64({5, 4}),
                                                     kiln::testing::F64({5})});
  EXPECT_EQ(count_ops(build_joint(g, {{"x1"}}).graph, Op::Matmul), 1);
  EXPECT_EQ(count_ops(build_joint(g, {{"x2"}}).graph, Op::Matmul), 0);
  EXPECT_EQ(count_ops(build_joint(g).graph, Op::Matmul), 2);
  Graph mm = kiln::testing::one_op_graph(Op::Matmul, {kiln::testing::F64({2, 3}), kiln::testing::F64({3, 4})});
  EXPECT_EQ(count_ops(build_joint(mm, {{"x0"}}).graph, Op::Matmul), 2);  // the forward one and one backward
}
