// Derivative rules at NaN and +-inf, against PyTorch's formulas (tests/support/nonfinite_grads.cpp
// holds the cases and the expected gradients, each written out from derivatives.yaml or the
// ATen backward kernel it names): the joint graph run by the reference interpreter must put
// NaN and infinities exactly where PyTorch does, and agree on every finite value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "ir/npy.h"
#include "ir/printer.h"
#include "passes/autograd/vjp.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/nonfinite_grads.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// With KILN_NONFINITE_DUMP=DIR set, each case is also written out for
// tools/torch_check/nonfinite_grads.py, which recomputes the gradients with torch.autograd
// (where PyTorch is installed: the GPU machine): DIR/<case>/graph.kir, in/<input>.npy,
// tangent/<output>.npy and expected/<input>.npy (floating inputs only).
void dump(const NonfiniteGradCase& c, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d = fs::path(dir) / c.name;
  for (const char* sub : {"in", "tangent", "expected"}) fs::create_directories(d / sub);
  std::ofstream(d / "graph.kir") << print_graph(c.graph);
  size_t k = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::string name = c.graph.inputs()[i]->name();
    write_npy((d / "in" / (name + ".npy")).string(), c.inputs[i]);
    if (is_floating(c.inputs[i].dtype())) write_npy((d / "expected" / (name + ".npy")).string(), c.expected[k++]);
  }
  for (size_t o = 0; o < c.tangents.size(); ++o)
    write_npy((d / "tangent" / (c.graph.outputs()[o].name() + ".npy")).string(), c.tangents[o]);
}

TEST(NonfiniteRules, GradientsMatchPyTorch) {
  std::vector<NonfiniteGradCase> cases = nonfinite_grad_cases();
  ASSERT_GT(cases.size(), 40u);
  const char* dump_dir = std::getenv("KILN_NONFINITE_DUMP");
  for (const NonfiniteGradCase& c : cases) {
    SCOPED_TRACE(c.name + ": PyTorch's " + c.torch);
    std::vector<HostTensor> got = joint_gradients(c.graph, c.inputs, c.tangents);
    ASSERT_EQ(got.size(), c.expected.size()) << print_graph(c.graph);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_close(got[i], c.expected[i], 1e-12, 1e-12)) << "gradient " << i;
    if (dump_dir) dump(c, dump_dir);
  }
}

// Signed zeros are part of what PyTorch gives (1 / -inf is -0): tensors_close takes -0 == 0,
// so the zeros whose sign the formulas fix are checked bit for bit here.
TEST(NonfiniteRules, SignedZerosMatchPyTorch) {
  for (const NonfiniteGradCase& c : nonfinite_grad_cases()) {
    if (c.name != "log" && c.name != "rsqrt" && c.name != "reciprocal" && c.name != "cos") continue;
    SCOPED_TRACE(c.name);
    HostTensor got = joint_gradients(c.graph, c.inputs, c.tangents)[0];
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (c.expected[0].get(i) != 0) continue;
      EXPECT_EQ(std::signbit(got.get(i)), std::signbit(c.expected[0].get(i))) << "element " << i;
    }
  }
}

// Every differentiable op whose rule can turn a non-finite value into something else (a
// select, a comparison, a division) is in the table: the list is the issue's, plus the ops
// whose rules hold a where or a division.
TEST(NonfiniteRules, CoverTheRulesThatSelectOrDivide) {
  std::set<Op> covered;
  for (const NonfiniteGradCase& c : nonfinite_grad_cases())
    for (const Node* n : c.graph.nodes())
      if (!n->is_input()) covered.insert(n->op());
  for (Op op : {Op::Relu, Op::Gelu, Op::Tanh, Op::Sigmoid, Op::Silu, Op::Exp, Op::Log, Op::Log1p, Op::Sqrt, Op::Rsqrt,
                Op::Reciprocal, Op::Abs, Op::Square, Op::Erf, Op::Sin, Op::Cos, Op::Neg, Op::Clamp, Op::Maximum, Op::Minimum,
                Op::Where, Op::MaskedFill, Op::Mul, Op::Div, Op::Pow, Op::Amax, Op::Amin, Op::Sum, Op::Mean, Op::Var, Op::Prod,
                Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::CrossEntropy, Op::NllLoss})
    EXPECT_TRUE(covered.count(op)) << op_name(op) << " has no NaN/inf case";
}

// The rules that changed to agree with PyTorch, each at the point where it differed (kiln's
// answer before in the comment).
TEST(NonfiniteRules, WhereKilnDifferedBefore) {
  // relu at a NaN input: the upstream gradient (was 0: where(y > 0, g, 0)).
  Graph relu = one_op_graph(Op::Relu, {TensorMeta(DType::F32, {1})});
  HostTensor g = joint_gradients(relu, {make(DType::F32, {1}, {NAN})}, {make(DType::F32, {1}, {0.5})})[0];
  EXPECT_EQ(g.get(0), 0.5);
  // cross_entropy, every row ignored, "mean": 0 (was NaN: g / 0 * mask).
  Graph ce = one_op_graph(Op::CrossEntropy, {TensorMeta(DType::F32, {2, 3}), TensorMeta(DType::I64, {2})});
  HostTensor gce = joint_gradients(ce, {make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6}), ints(DType::I64, {2}, {-100, -100})},
                                   {make(DType::F32, {}, {1})})[0];
  EXPECT_TRUE(tensors_close(gce, make(DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0}), 0, 0));
  // var over every element with no degree of freedom: +inf on both sides of the mean (was
  // -inf below it).
  Graph var = one_op_graph(Op::Var, {TensorMeta(DType::F32, {2})}, {{"correction", int64_t{2}}});
  HostTensor gv = joint_gradients(var, {make(DType::F32, {2}, {1, 2})}, {make(DType::F32, {}, {1})})[0];
  EXPECT_TRUE(tensors_close(gv, make(DType::F32, {2}, {INFINITY, INFINITY}), 0, 0));
}

}  // namespace
}  // namespace kiln
