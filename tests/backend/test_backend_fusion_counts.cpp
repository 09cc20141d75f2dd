// How many kernels the CPU backend generates for real graphs (CompileReport::kernels and
// blas_calls): the fusion decisions users pay for, pinned so that a change that splits a
// softmax or a pointwise chain into more loops shows up here. Each graph is also run against
// the interpreter, so a count is never bought with a wrong result.
#include <fmt/format.h>

#include <limits>

#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class FusionCounts : public DeviceTest {};
KILN_DEVICE_TESTS(FusionCounts);

struct Counts {
  int kernels = 0;
  int blas_calls = 0;
};

Counts compile_counts(const Graph& g, int64_t int_bound = 4) {
  backend::CompiledGraph cg = compile_for_test(g);
  expect_matches_reference(g, inputs_for(g, 1, int_bound), 50);
  return {cg.report.kernels, cg.report.blas_calls};
}

Graph one(Op op, const std::vector<TensorMeta>& ins, const Attrs& attrs = {}) {
  Graph g(std::string(op_name(op)));
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), ins[i]));
  Node* n = g.add_node(op, vs, attrs, "y");
  g.set_outputs({n->result(0)});
  return g;
}

TEST_P(FusionCounts, SoftmaxIsOneKernel) {
  KILN_REQUIRE_JIT();
  Counts c = compile_counts(one(Op::Softmax, {F({7, 33})}, {{"dim", int64_t(-1)}}));
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.blas_calls, 0);
}

TEST_P(FusionCounts, LogSoftmaxIsOneKernel) {
  KILN_REQUIRE_JIT();
  Counts c = compile_counts(one(Op::LogSoftmax, {F({7, 33})}, {{"dim", int64_t(1)}}));
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.blas_calls, 0);
}

TEST_P(FusionCounts, LayerNormForwardIsOneKernel) {
  KILN_REQUIRE_JIT();
  Counts c = compile_counts(one(Op::LayerNorm, {F({7, 33}), F({33}), F({33})}, {{"normalized_shape", IntList{33}}}));
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.blas_calls, 0);
}

TEST_P(FusionCounts, LayerNormBackward) {
  KILN_REQUIRE_JIT();
  // loss = sum(layer_norm(x, w, b) * c); the backward graph of the default partition.
  Graph g("layer_norm_loss");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var w = b.wrap(g.add_input("w", F({33})));
  Var bias = b.wrap(g.add_input("b", F({33})));
  Var c = b.wrap(g.add_input("c", F({7, 33})));
  Var y = b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{33}}});
  g.set_outputs({b.sum(b.mul(y, c))});
  autograd::JointOptions o;
  o.wrt = {"x", "w", "b"};
  autograd::JointGraph j = autograd::build_joint(g, o);
  autograd::Partition p = autograd::partition(j, autograd::PartitionKind::Default);
  Counts counts = compile_counts(p.backward);
  EXPECT_EQ(counts.blas_calls, 0);
  // Row kernel (mean, rstd, x-hat and the pointwise products), column kernel (weight and bias
  // gradients), row kernel (input gradient): the tangent's expand(reshape(...)) view chain joins
  // the rows, as the 0-d operand below does.
  EXPECT_EQ(counts.kernels, 3) << "layer_norm backward: " << counts.kernels << " kernels";
}

// The backward above with `mul(%c, %tangent_s)` in place of the reshape/expand view chain:
// row kernel (mean, rstd, x-hat and the pointwise products), column kernel (weight and bias
// gradients), row kernel (input gradient).
TEST_P(FusionCounts, LayerNormBackwardWithZeroDimTangentOperandIsThreeKernels) {
  KILN_REQUIRE_JIT();
  Graph g("layer_norm_backward");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var w = b.wrap(g.add_input("w", F({33})));
  Var c = b.wrap(g.add_input("c", F({7, 33})));
  Var t = b.wrap(g.add_input("tangent", F({})));
  Var gy = b.mul(c, t);
  Var grad_b = b.sum(gy, {0});
  Var xc = b.sub(x, b.mean(x, {-1}, true));
  Var rstd = b.rsqrt(b.mean(b.mul(xc, xc), {-1}, true) + 1e-5);
  Var xhat = b.mul(xc, rstd);
  Var grad_w = b.sum(b.mul(gy, xhat), {0});
  Var gw = b.mul(gy, w);
  Var grad_x = b.mul(rstd, b.sub(b.sub(gw, b.mean(gw, {-1}, true)), b.mul(xhat, b.mean(b.mul(gw, xhat), {-1}, true))));
  g.set_outputs({grad_x, grad_w, grad_b});
  Counts counts = compile_counts(g);
  EXPECT_EQ(counts.blas_calls, 0);
  EXPECT_EQ(counts.kernels, 3);
}

TEST_P(FusionCounts, CrossEntropyForwardAndBackward) {
  KILN_REQUIRE_JIT();
  Graph g = one(Op::CrossEntropy, {F({33, 11}), I({33})});
  autograd::JointOptions o;
  o.wrt = {"x0"};
  autograd::JointGraph j = autograd::build_joint(g, o);
  Counts c = compile_counts(j.graph, 11);
  EXPECT_EQ(c.blas_calls, 0);
  EXPECT_LE(c.kernels, 3) << "cross_entropy forward+backward: " << c.kernels << " kernels";
  RecordProperty("cross_entropy_joint_kernels", c.kernels);
}

TEST_P(FusionCounts, ChainOfEightPointwiseOpsIsOneKernel) {
  KILN_REQUIRE_JIT();
  Graph g("chain8");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var y = b.wrap(g.add_input("y", F({33})));
  Var v = b.exp(x);          // 1
  v = b.mul(v, y);           // 2 (broadcast)
  v = b.tanh(v);             // 3
  v = b.add(v, x);           // 4
  v = b.sigmoid(v);          // 5
  v = b.sub(v, y);           // 6
  v = b.square(v);           // 7
  v = b.relu(v);             // 8
  g.set_outputs({v});
  Counts c = compile_counts(g);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.blas_calls, 0);
}

TEST_P(FusionCounts, LinearThenGeluIsOneBlasCallAndOneKernel) {
  KILN_REQUIRE_JIT();
  Graph g("linear_gelu");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var w = b.wrap(g.add_input("w", F({16, 33})));
  Var bias = b.wrap(g.add_input("b", F({16})));
  g.set_outputs({b.gelu(b.op(Op::Linear, {x, w, bias}))});
  Counts c = compile_counts(g);
  EXPECT_EQ(c.blas_calls, 1);
  EXPECT_EQ(c.kernels, 1);
}

// The grad scaler's inf/NaN check (frontend/optim.cpp): sum(cat(flattened gradients) * 0) is
// NaN exactly when a gradient holds an inf or a NaN. The flattening views read the gradients
// in place, so the whole check is one reduction kernel, however many gradients and shapes
// (issue 13: "detect inf/NaN across all gradients in one fused kernel"); odd sizes, a 1-element
// gradient and an empty one included.
TEST_P(FusionCounts, TheGradScalersInfCheckOverManyGradientsIsOneKernel) {
  KILN_REQUIRE_JIT();
  Graph g("inf_check");
  Builder b(g);
  std::vector<Value> flat;
  for (Shape s : {Shape{5, 7}, Shape{3}, Shape{2, 3, 5}, Shape{1}, Shape{0, 4}}) {
    Var x = b.wrap(g.add_input("g" + std::to_string(flat.size()), F(s)));
    flat.push_back(b.reshape(x, {-1}).v);
  }
  Var poisoned = b.sum(b.mul(b.cat(flat, 0), b.scalar(0.0, DType::F32)), {});
  g.set_outputs({b.ne(poisoned, poisoned)});
  Counts c = compile_counts(g);
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.blas_calls, 0);
  // And it finds an inf in any of them, in the last element of the last non-empty one too.
  for (size_t which : {size_t{0}, size_t{2}, size_t{3}}) {
    std::vector<HostTensor> in = inputs_for(g, 2);
    in[which].set(in[which].numel() - 1, which == 2 ? std::numeric_limits<double>::quiet_NaN() : -std::numeric_limits<double>::infinity());
    expect_matches_reference(g, in, 50);
  }
}

}  // namespace
}  // namespace kiln::testing
