// merge_linears beyond its .kir cases (tests/passes/cases/merge_linears_*.kir, which fix the
// rewritten text): every case computes the same values after the rewrite; a training graph's
// joint merges its projections before differentiating, so that its backward has one GEMM for the
// input's gradient, and its gradients match finite differences in float64 and the gradients of
// the graph left unmerged.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "passes/merge_linears.h"
#include "tests/passes/case_values.h"
#include "tests/support/gradcheck_util.h"

namespace kiln {
namespace {

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (Node* node : g.nodes()) n += node->op() == op;
  return n;
}

// The same products, summed in the same order: bf16 results round the same f32 sums.
TEST(MergeLinears, EveryCaseComputesTheSameValuesAfterTheRewrite) {
  EXPECT_GE(kiln::testing::expect_cases_keep_their_values("merge_linears_", [](Graph& g) { run_merge_linears(g); }, 0, 0, 31), 3);
}

// q, k and v projections with biases of one input of 1024 rows, and a gated MLP's two
// projections of another, read by products so that every gradient is non-trivial.
constexpr const char* kProjections = R"(
graph f(%x: f64[2,512,3], %wq: f64[4,3], %bq: f64[4], %wk: f64[2,3], %bk: f64[2], %wv: f64[2,3], %bv: f64[2], %wg: f64[5,4], %wu: f64[5,4]) {
  %q = linear(%x, %wq, %bq) : f64[2,512,4]
  %k = linear(%x, %wk, %bk) : f64[2,512,2]
  %v = linear(%x, %wv, %bv) : f64[2,512,2]
  %kv = mul(%k, %v) : f64[2,512,2]
  %s = sum(%kv, dim=[-1], keepdim=true) : f64[2,512,1]
  %h = mul(%q, %s) : f64[2,512,4]
  %g = linear(%h, %wg) : f64[2,512,5]
  %u = linear(%h, %wu) : f64[2,512,5]
  %a = silu(%g) : f64[2,512,5]
  %y = mul(%a, %u) : f64[2,512,5]
  return (%y)
})";

TEST(MergeLinears, TheJointMergesBeforeDifferentiatingAndItsGradientsHold) {
  Graph f = parse_graph(kProjections);
  autograd::JointGraph merged = autograd::build_joint(f);
  autograd::JointOptions apart_options;
  apart_options.merge_linears = false;
  autograd::JointGraph apart = autograd::build_joint(f, apart_options);
  // Two splits in the forward (qkv, gate+up); their gradients are two concatenations, and each
  // merged product's backward is one GEMM for the input's gradient and one for the weights'.
  EXPECT_EQ(count_op(merged.graph, Op::Split), 2) << print_graph(merged.graph);
  EXPECT_EQ(count_op(apart.graph, Op::Split), 0);
  EXPECT_LT(count_op(merged.graph, Op::Matmul) + count_op(merged.graph, Op::Linear),
            count_op(apart.graph, Op::Matmul) + count_op(apart.graph, Op::Linear));

  std::vector<HostTensor> in;
  for (size_t i = 0; i < f.inputs().size(); ++i)
    in.push_back(kiln::testing::random_input(f.inputs()[i]->meta(), kiln::testing::Range::Any, 7 + i));
  HostTensor tangent = kiln::testing::random_input(f.outputs()[0].meta(), kiln::testing::Range::Any, 99);
  std::vector<HostTensor> with_tangent = in;
  with_tangent.push_back(tangent);
  std::vector<HostTensor> got = interpret(merged.graph, with_tangent), want = interpret(apart.graph, with_tangent);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(kiln::testing::tensors_close(got[i], want[i], 1e-12, 1e-12)) << merged.graph.outputs()[i].name();

  autograd::GradcheckOptions fast;
  fast.fast = true;  // 1024 rows: random directions, not every element
  fast.directions = 4;
  EXPECT_TRUE(kiln::testing::gradcheck_graph(f, in, fast));
}

TEST(MergeLinears, AGroupBelowTheRowMinimumStaysApartInTheJoint) {
  Graph f = parse_graph(R"(
graph f(%x: f64[4,3], %wq: f64[4,3], %wk: f64[2,3]) {
  %q = linear(%x, %wq) : f64[4,4]
  %k = linear(%x, %wk) : f64[4,2]
  return (%q, %k)
})");
  static_assert(kMergeLinearsMinRows > 4);
  EXPECT_EQ(count_op(autograd::build_joint(f).graph, Op::Split), 0);
}

}  // namespace
}  // namespace kiln
