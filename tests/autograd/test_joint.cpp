// build_joint: the structure of the joint graph (names, tangents, summed gradients, wrt
// subsets, errors), its numbers against hand-computed gradients, and its text round trip.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/vjp.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using autograd::build_joint;
using autograd::JointGraph;
using autograd::JointOptions;

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (Node* node : g.nodes()) n += node->op() == op;
  return n;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> out;
  for (Node* in : g.inputs()) out.push_back(in->name());
  return out;
}

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> out;
  for (const Value& v : g.outputs()) out.push_back(v.name());
  return out;
}

TEST(Joint, GoldenTextForMulSum) {
  Graph f = parse_graph(R"(
graph f(%x: f32[3], %w: f32[3]) {
  %m = mul(%x, %w) : f32[3]
  %y = sum(%m) : f32[]
  return (%y)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(print_graph(j.graph), R"(graph f(%x: f32[3], %w: f32[3], %tangent_y: f32[]) {
  %m = mul(%x, %w) : f32[3]
  %y = sum(%m) : f32[]
  %grad_reshape = reshape(%tangent_y, shape=[1]) : f32[1]
  %grad_expand = expand(%grad_reshape, size=[3]) : f32[3]{0}
  %grad_x = mul(%grad_expand, %w) : f32[3]
  %grad_w = mul(%grad_expand, %x) : f32[3]
  return (%y, %grad_x, %grad_w)
}
)");
  EXPECT_EQ(j.num_primals, 2);
  EXPECT_EQ(j.num_tangents, 1);
  EXPECT_EQ(j.num_forward_outputs, 1);
  EXPECT_EQ(j.wrt, (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(j.tangent_for_output, (std::vector<int>{2}));
}

TEST(Joint, EachBackwardNodeNamesTheForwardNodeItDifferentiates) {
  // The graph of GoldenTextForMulSum: sum's rule broadcasts the tangent, mul's makes both grads.
  Graph f = parse_graph(R"(
graph f(%x: f32[3], %w: f32[3]) {
  %m = mul(%x, %w) : f32[3]
  %y = sum(%m) : f32[]
  return (%y)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(j.derivative_of, (std::unordered_map<std::string, std::string>{
                                 {"grad_reshape", "y"}, {"grad_expand", "y"}, {"grad_x", "m"}, {"grad_w", "m"}}));
}

TEST(Joint, SummedGradientsBelongToTheRuleThatAddedAndZerosToNone) {
  // add passes the tangent through with no node; exp's rule makes grad_mul, and the sum of x's
  // two contributions (the tangent through add, grad_mul through exp) is made with it.
  Graph f = parse_graph(R"(
graph f(%x: f64[3], %unused: f64[2]) {
  %e = exp(%x) : f64[3]
  %y = add(%e, %x) : f64[3]
  return (%y)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(j.derivative_of, (std::unordered_map<std::string, std::string>{{"grad_mul", "e"}, {"grad_x", "e"}}));
  EXPECT_EQ(j.graph.outputs().back().name(), "grad_unused");  // zeros: in no rule's part
}

TEST(Joint, PrintedJointGraphParsesBack) {
  Graph f = parse_graph(R"(
graph f(%x: f32[2,3], %b: f32[3], %i: i64[2,3]) {
  %a = add(%x, %b) : f32[2,3]
  %t = tanh(%a) : f32[2,3]
  %c = to(%i, dtype=f32) : f32[2,3]
  %p = mul(%t, %c) : f32[2,3]
  %m = amax(%p, dim=[-1]) : f32[2]
  %s, %s_1 = split(%x, split_sizes=[1,2], dim=1) : f32[2,1]{3,1}, f32[2,2]{3,1}
  return (%m, %s_1, %i)
})");
  JointGraph j = build_joint(f);
  std::string text = print_graph(j.graph);
  Graph back = parse_graph(text);
  EXPECT_EQ(print_graph(back), text);
}

TEST(Joint, OneTangentPerFloatingOutputPosition) {
  // y twice, an input as an output, and an integer output that gets no tangent.
  Graph f = parse_graph(R"(
graph f(%x: f32[2], %i: i64[2]) {
  %y = exp(%x) : f32[2]
  return (%y, %x, %y, %i)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(input_names(j.graph), (std::vector<std::string>{"x", "i", "tangent_y", "tangent_x", "tangent_y_1"}));
  EXPECT_EQ(j.tangent_for_output, (std::vector<int>{2, 3, 4, -1}));
  EXPECT_EQ(j.num_tangents, 3);
  EXPECT_EQ(output_names(j.graph), (std::vector<std::string>{"y", "x", "y", "i", "grad_x"}));
  // grad_x = exp(x) * (t0 + t2) + t1.
  HostTensor x = make(DType::F32, {2}, {0.5, -1.0});
  HostTensor i = ints(DType::I64, {2}, {1, 2});
  HostTensor t0 = make(DType::F32, {2}, {1, 2}), t1 = make(DType::F32, {2}, {3, 4}), t2 = make(DType::F32, {2}, {5, 6});
  auto outs = interpret(j.graph, std::vector<HostTensor>{x, i, t0, t1, t2});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_TRUE(tensors_close(outs[4], make(DType::F32, {2}, {std::exp(0.5) * 6 + 3, std::exp(-1.0) * 8 + 4}), 1e-5));
}

TEST(Joint, TangentOfAStridedOutputIsContiguous) {
  Graph f = parse_graph(R"(
graph f(%x: f32[2,3]) {
  %t = transpose(%x, dim0=0, dim1=1) : f32[3,2]{1,3}
  return (%t)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(j.graph.inputs()[1]->meta(), TensorMeta(DType::F32, {3, 2}));
  EXPECT_EQ(j.graph.outputs()[1].meta().shape, (Shape{2, 3}));
}

TEST(Joint, GradientsOfAValueUsedTwiceAreSummed) {
  Graph f = parse_graph(R"(
graph f(%x: f64[3]) {
  %e = exp(%x) : f64[3]
  %s = sin(%x) : f64[3]
  %y = add(%e, %s) : f64[3]
  return (%y)
})");
  JointGraph j = build_joint(f);
  // One add in the forward, one summing the two contributions to x.
  EXPECT_EQ(count_op(j.graph, Op::Add), 2);
  HostTensor x = make(DType::F64, {3}, {0.1, -0.7, 2.0});
  HostTensor t = make(DType::F64, {3}, {1.5, -2.0, 0.5});
  auto outs = interpret(j.graph, std::vector<HostTensor>{x, t});
  std::vector<double> expected;
  for (int k = 0; k < 3; ++k) expected.push_back(vals(t)[k] * (std::exp(vals(x)[k]) + std::cos(vals(x)[k])));
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F64, {3}, expected), 1e-12));
}

TEST(Joint, SquareViaMulSumsBothOperands) {
  Graph f = parse_graph(R"(
graph f(%x: f64[2]) {
  %y = mul(%x, %x) : f64[2]
  return (%y)
})");
  JointGraph j = build_joint(f);
  auto outs = interpret(j.graph, std::vector<HostTensor>{make(DType::F64, {2}, {3, -2}), make(DType::F64, {2}, {1, 10})});
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F64, {2}, {6, -40})));
}

TEST(Joint, IntegerInputsGetNoGradient) {
  Graph f = parse_graph(R"(
graph f(%x: f32[3], %i: i64[3]) {
  %c = to(%i, dtype=f32) : f32[3]
  %y = mul(%x, %c) : f32[3]
  return (%y)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(j.wrt, (std::vector<std::string>{"x"}));
  EXPECT_EQ(output_names(j.graph), (std::vector<std::string>{"y", "grad_x"}));
  // Nothing differentiates the cast of %i.
  EXPECT_EQ(count_op(j.graph, Op::To), 1);
  std::string err = error_of([&] { build_joint(f, JointOptions{{"i"}}); });
  EXPECT_TRUE(has(err, "'%i'")) << err;
  EXPECT_TRUE(has(err, "i64")) << err;
}

TEST(Joint, WrtSubsetBuildsOnlyWhatItNeeds) {
  Graph f = parse_graph(R"(
graph f(%x: f32[4], %w: f32[4]) {
  %y = mul(%x, %w) : f32[4]
  return (%y)
})");
  JointGraph all = build_joint(f);
  JointGraph only_w = build_joint(f, JointOptions{{"w"}});
  EXPECT_EQ(count_op(all.graph, Op::Mul), 3);
  EXPECT_EQ(count_op(only_w.graph, Op::Mul), 2);
  EXPECT_EQ(only_w.wrt, (std::vector<std::string>{"w"}));
  EXPECT_EQ(output_names(only_w.graph), (std::vector<std::string>{"y", "grad_w"}));
  // wrt order is output order.
  JointGraph reversed = build_joint(f, JointOptions{{"w", "x"}});
  EXPECT_EQ(output_names(reversed.graph), (std::vector<std::string>{"y", "grad_w", "grad_x"}));
}

TEST(Joint, OutputsThatDoNotReachWrtBuildNoBackward) {
  Graph f = parse_graph(R"(
graph f(%x: f32[4], %c: f32[4]) {
  %y = exp(%x) : f32[4]
  %z = sin(%c) : f32[4]
  %k = cos(%z) : f32[4]
  return (%y, %k)
})");
  JointGraph j = build_joint(f, JointOptions{{"x"}});
  // Both outputs get tangents; only y's flows back (no sin or cos is differentiated).
  EXPECT_EQ(j.num_tangents, 2);
  EXPECT_EQ(count_op(j.graph, Op::Sin), 1);
  EXPECT_EQ(count_op(j.graph, Op::Cos), 1);
  EXPECT_EQ(j.graph.num_nodes(), f.num_nodes() + 1);  // grad_x = tangent_y * y
}

TEST(Joint, InputTheOutputsDoNotUseGetsZeros) {
  Graph f = parse_graph(R"(
graph f(%x: f32[2,3], %unused: f32[5]) {
  %y = neg(%x) : f32[2,3]
  return (%y)
})");
  JointGraph j = build_joint(f);
  Value g = j.graph.outputs().back();
  EXPECT_EQ(g.name(), "grad_unused");
  EXPECT_EQ(g.node->op(), Op::Full);
  EXPECT_EQ(g.meta(), TensorMeta(DType::F32, {5}));
}

TEST(Joint, GradientThatIsATangentOrSharedGetsItsOwnName) {
  // d(a+b)/da = d(a+b)/db = the tangent itself; d(x)/dx for an output that is an input.
  Graph f = parse_graph(R"(
graph f(%a: f32[3], %b: f32[3]) {
  %y = add(%a, %b) : f32[3]
  return (%y, %a)
})");
  JointGraph j = build_joint(f);
  EXPECT_EQ(output_names(j.graph), (std::vector<std::string>{"y", "a", "grad_a", "grad_b"}));
  // a's two contributions (tangent_a, and tangent_y through add) are summed with add's rule;
  // grad_b, a copy of tangent_y that carries the name, belongs to no rule.
  EXPECT_EQ(j.derivative_of, (std::unordered_map<std::string, std::string>{{"grad_a", "y"}}));
  EXPECT_EQ(print_graph(parse_graph(print_graph(j.graph))), print_graph(j.graph));
  HostTensor a = make(DType::F32, {3}, {1, 2, 3}), b = make(DType::F32, {3}, {4, 5, 6});
  HostTensor ty = make(DType::F32, {3}, {1, -1, 2}), ta = make(DType::F32, {3}, {10, 20, 30});
  auto outs = interpret(j.graph, std::vector<HostTensor>{a, b, ty, ta});
  EXPECT_TRUE(tensors_close(outs[2], make(DType::F32, {3}, {11, 19, 32})));
  EXPECT_TRUE(tensors_close(outs[3], ty));
}

TEST(Joint, UnknownWrtNameIsAnError) {
  Graph f = parse_graph(R"(
graph f(%x: f32[2]) {
  %y = exp(%x) : f32[2]
  return (%y)
})");
  std::string err = error_of([&] { build_joint(f, JointOptions{{"nope"}}); });
  EXPECT_TRUE(has(err, "no input named '%nope'")) << err;
  err = error_of([&] { build_joint(f, JointOptions{{"y"}}); });  // a value, not an input
  EXPECT_TRUE(has(err, "'%y'")) << err;
  err = error_of([&] { build_joint(f, JointOptions{{"x", "x"}}); });
  EXPECT_TRUE(has(err, "twice")) << err;
}

TEST(Joint, NonDifferentiableOpsStopGradients) {
  Graph f = parse_graph(R"(
graph f(%x: f32[4]) {
  %s = sign(%x) : f32[4]
  %y = mul(%s, %x) : f32[4]
  %a = argmax(%x) : i64[]
  return (%y, %a)
})");
  JointGraph j = build_joint(f);
  HostTensor x = make(DType::F32, {4}, {1, -2, 3, -4});
  HostTensor t = make(DType::F32, {4}, {1, 1, 2, 2});
  auto outs = interpret(j.graph, std::vector<HostTensor>{x, t});
  EXPECT_TRUE(tensors_close(outs[2], make(DType::F32, {4}, {1, -1, 2, -2})));
}

// A user op y = 2x, once without a rule and once with a rule of the wrong shape.
Op double_op(const std::string& name) {
  return register_op(
      name, OpCategory::Pointwise, "Tensor self",
      [](std::span<const TensorMeta> in, const Attrs&) { return std::vector<TensorMeta>{in[0].contiguous()}; },
      [](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> outs) {
        HostTensor y = HostTensor::empty(outs[0]);
        for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 2 * in[0].get(i));
        return std::vector<HostTensor>{y};
      });
}

TEST(Joint, OpWithoutRuleIsAnErrorNamingOpAndNode) {
  static Op op = double_op("test_joint_double_norule");
  Graph f("f");
  Value x = f.add_input("x", TensorMeta(DType::F32, {3}));
  Value y = f.add(op, {x}, {}, "twice");
  f.set_outputs({f.add(Op::Exp, {y}, {}, "e")});
  std::string err = error_of([&] { build_joint(f); });
  EXPECT_TRUE(has(err, "'test_joint_double_norule'")) << err;
  EXPECT_TRUE(has(err, "%twice")) << err;
  // Off the path to wrt, a missing rule does not matter.
  Graph g("g");
  Value a = g.add_input("a", TensorMeta(DType::F32, {3}));
  Value c = g.add_input("c", TensorMeta(DType::F32, {3}));
  g.set_outputs({g.add(Op::Mul, {g.add(op, {c}), a})});
  EXPECT_NO_THROW(build_joint(g, JointOptions{{"a"}}));
}

TEST(Joint, RuleGivingAWrongShapeIsAnError) {
  static Op op = [] {
    Op o = double_op("test_joint_double_badshape");
    autograd::register_vjp(o, [](autograd::VjpContext& c) {
      return std::vector<Value>{c.b.sum(c.grad())};  // a scalar instead of the input's shape
    });
    return o;
  }();
  Graph f("f");
  Value x = f.add_input("x", TensorMeta(DType::F32, {3}));
  f.set_outputs({f.add(op, {x}, {}, "twice")});
  std::string err = error_of([&] { build_joint(f); });
  EXPECT_TRUE(has(err, "test_joint_double_badshape")) << err;
  EXPECT_TRUE(has(err, "f32[]")) << err;
  EXPECT_TRUE(has(err, "f32[3]")) << err;
}

TEST(Joint, DifferentiableOpsOfTheCoreCategoriesHaveRules) {
  // Pointwise and reduction rules live in rules_pointwise.cpp and rules_reduction.cpp.
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    Op op = static_cast<Op>(i);
    OpCategory cat = op_info(op).category;
    if (!autograd::is_differentiable(op) || (cat != OpCategory::Pointwise && cat != OpCategory::Reduction)) continue;
    EXPECT_NE(autograd::find_vjp(op), nullptr) << op_name(op) << " has no derivative rule";
  }
  EXPECT_EQ(autograd::find_vjp(Op::Argmax), nullptr);
  EXPECT_FALSE(autograd::is_differentiable(Op::Argmax));
}

// Every category, the view/linalg/composite rules included.
TEST(Joint, EveryDifferentiableOpHasARule) {
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    Op op = static_cast<Op>(i);
    if (!autograd::is_differentiable(op)) continue;
    auto first = autograd::decomposed_before_differentiation();
    if (std::find(first.begin(), first.end(), op) != first.end()) {
      EXPECT_EQ(autograd::find_vjp(op), nullptr) << op_name(op) << " is decomposed before differentiation: a rule would never run";
      continue;
    }
    EXPECT_NE(autograd::find_vjp(op), nullptr) << op_name(op) << " has no derivative rule";
  }
}

TEST(Joint, TheJointGraphOfAChainPassesGradcheck) {
  Graph f = parse_graph(R"(
graph f(%x: f64[3,4], %w: f64[4], %s: f64[]) {
  %a = mul(%x, %w) : f64[3,4]
  %b = add(%a, %s) : f64[3,4]
  %t = tanh(%b) : f64[3,4]
  %m = mean(%t, dim=[1]) : f64[3]
  %e = exp(%m) : f64[3]
  %p = mul(%e, %e) : f64[3]
  return (%p, %t)
})");
  std::vector<HostTensor> in;
  for (size_t k = 0; k < f.inputs().size(); ++k) in.push_back(random_input(f.inputs()[k]->meta(), Range::Any, k + 3));
  EXPECT_TRUE(gradcheck_graph(f, in));
}

}  // namespace
}  // namespace kiln
