// Derivative rules of the pointwise ops: gradcheck (float64, full mode) of every
// differentiable pointwise op on several shapes (broadcasting, 0-d, odd sizes), then hand-made
// cases at the points where PyTorch picks a convention (ties, bounds, zeros) and dtype cases.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/vjp.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TensorMeta B(const Shape& s) { return TensorMeta(DType::Bool, s); }

struct Case {
  std::string name;
  Op op;
  std::vector<TensorMeta> inputs;
  Attrs attrs;
  std::vector<Range> ranges;  // per input; one entry: every input
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  std::vector<Case> cs;
  // Unary ops on a 3-d tensor, a 0-d tensor, an odd-sized vector and a column.
  const std::vector<std::pair<std::string, Shape>> unary_shapes = {
      {"2x3x4", {2, 3, 4}}, {"scalar", {}}, {"5", {5}}, {"3x1", {3, 1}}};
  auto unary = [&](Op op, Range range, Attrs attrs = {}, std::string suffix = "") {
    for (auto& [sn, s] : unary_shapes)
      cs.push_back({std::string(op_name(op)) + suffix + "_" + sn, op, {F64(s)}, attrs, {range}});
  };
  unary(Op::Neg, Range::Any);
  unary(Op::Abs, Range::AwayFromZero);
  unary(Op::Exp, Range::Any);
  unary(Op::Log, Range::Positive);
  unary(Op::Log1p, Range::Any);
  unary(Op::Sqrt, Range::Positive);
  unary(Op::Rsqrt, Range::Positive);
  unary(Op::Reciprocal, Range::AwayFromZero);
  unary(Op::Sin, Range::Wide);
  unary(Op::Cos, Range::Wide);
  unary(Op::Tanh, Range::Wide);
  unary(Op::Sigmoid, Range::Wide);
  unary(Op::Relu, Range::AwayFromZero);
  unary(Op::Gelu, Range::Wide, {{"approximate", std::string("none")}}, "_none");
  unary(Op::Gelu, Range::Wide, {{"approximate", std::string("tanh")}}, "_tanh");
  unary(Op::Silu, Range::Wide);
  unary(Op::Square, Range::Any);
  unary(Op::Erf, Range::Wide);
  unary(Op::Erfinv, Range::Inside);
  unary(Op::Log2, Range::Positive);
  unary(Op::Exp2, Range::Any);
  unary(Op::To, Range::Any, {{"dtype", DType::F32}});  // gradcheck re-types it to f64
  unary(Op::Clamp, Range::Wide, {{"min", -1.0}, {"max", 1.0}}, "_min_max");
  unary(Op::Clamp, Range::Wide, {{"min", 0.5}}, "_min");
  unary(Op::Clamp, Range::Wide, {{"max", int64_t{-1}}}, "_int_max");

  // Binary ops: broadcasting both ways, a 0-d operand on either side, a trailing-dim vector.
  const std::vector<std::pair<std::string, std::vector<Shape>>> binary_shapes = {
      {"3x1_1x4", {{3, 1}, {1, 4}}}, {"scalar_2x3", {{}, {2, 3}}},  {"2x3x4_4", {{2, 3, 4}, {4}}},
      {"5_5", {{5}, {5}}},           {"2x3x4_scalar", {{2, 3, 4}, {}}}};
  auto binary = [&](Op op, std::vector<Range> ranges) {
    for (auto& [sn, s] : binary_shapes)
      cs.push_back({std::string(op_name(op)) + "_" + sn, op, {F64(s[0]), F64(s[1])}, {}, ranges});
  };
  binary(Op::Add, {Range::Any});
  binary(Op::Sub, {Range::Any});
  binary(Op::Mul, {Range::Any});
  binary(Op::Div, {Range::Any, Range::AwayFromZero});
  binary(Op::Pow, {Range::Positive, Range::Wide});
  binary(Op::Maximum, {Range::Any});
  binary(Op::Minimum, {Range::Any});
  // fmod and remainder jump where self / other crosses an integer: random inputs are that close
  // to one with probability of the step (1e-6), so finite differences see the slopes 1 and -q.
  binary(Op::Fmod, {Range::Wide, Range::AwayFromZero});
  binary(Op::Remainder, {Range::Wide, Range::AwayFromZero});
  binary(Op::Atan2, {Range::AwayFromZero, Range::AwayFromZero});

  cs.push_back({"where_3x1_1x4_3x4", Op::Where, {B({3, 1}), F64({1, 4}), F64({3, 4})}, {}, {Range::Any}});
  cs.push_back({"where_2x3_scalar_3", Op::Where, {B({2, 3}), F64({}), F64({3})}, {}, {Range::Any}});
  cs.push_back({"where_scalar_2x3x4_2x3x4", Op::Where, {B({}), F64({2, 3, 4}), F64({2, 3, 4})}, {}, {Range::Any}});
  cs.push_back({"masked_fill_2x3x4_3x4", Op::MaskedFill, {F64({2, 3, 4}), B({3, 4})}, {{"value", 0.5}}, {Range::Any}});
  cs.push_back({"masked_fill_5_scalar", Op::MaskedFill, {F64({5}), B({})}, {{"value", -2.0}}, {Range::Any}});
  cs.push_back({"masked_fill_scalar_scalar", Op::MaskedFill, {F64({}), B({})}, {{"value", 1.0}}, {Range::Any}});
  return cs;
}

class PointwiseRule : public ::testing::TestWithParam<Case> {};

TEST_P(PointwiseRule, Gradcheck) {
  const Case& c = GetParam();
  // Two draws of the inputs per case.
  for (uint64_t seed : {1, 2}) {
    std::vector<HostTensor> values;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      values.push_back(random_input(c.inputs[i], c.ranges[std::min(i, c.ranges.size() - 1)], seed * 31 + i));
    EXPECT_TRUE(gradcheck_values(c.op, values, c.attrs)) << c.name << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, PointwiseRule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(PointwiseRules, EveryDifferentiablePointwiseOpIsGradchecked) {
  std::set<Op> tested;
  for (const Case& c : cases()) tested.insert(c.op);
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    Op op = static_cast<Op>(i);
    if (op_info(op).category != OpCategory::Pointwise || !autograd::is_differentiable(op)) continue;
    EXPECT_NE(autograd::find_vjp(op), nullptr) << op_name(op) << " has no rule";
    EXPECT_TRUE(tested.count(op)) << op_name(op) << " has no gradcheck case";
  }
}

// The gradients of a one-op graph at `inputs`, output tangent `t`.
std::vector<HostTensor> grads(Op op, const std::vector<HostTensor>& inputs, const HostTensor& t, const Attrs& attrs = {}) {
  std::vector<TensorMeta> metas;
  for (auto& v : inputs) metas.push_back(v.meta());
  return joint_gradients(one_op_graph(op, metas, attrs), inputs, {t});
}

HostTensor D(const Shape& s, std::vector<double> v) { return make(DType::F64, s, std::move(v)); }

TEST(PointwiseRules, MaximumAndMinimumSplitTiesHalfAndHalf) {
  HostTensor a = D({4}, {1, 2, 3, -1}), b = D({4}, {1, 5, 0, -1}), t = D({4}, {2, 4, 6, 8});
  auto gmax = grads(Op::Maximum, {a, b}, t);
  EXPECT_TRUE(tensors_close(gmax[0], D({4}, {1, 0, 6, 4})));
  EXPECT_TRUE(tensors_close(gmax[1], D({4}, {1, 4, 0, 4})));
  auto gmin = grads(Op::Minimum, {a, b}, t);
  EXPECT_TRUE(tensors_close(gmin[0], D({4}, {1, 4, 0, 4})));
  EXPECT_TRUE(tensors_close(gmin[1], D({4}, {1, 0, 6, 4})));
  // A broadcast operand collects its share of every tie: max([2], [2,2,1]).
  auto gb = grads(Op::Maximum, {D({}, {2}), D({3}, {2, 2, 1})}, D({3}, {1, 1, 1}));
  EXPECT_TRUE(tensors_close(gb[0], D({}, {2})));
  EXPECT_TRUE(tensors_close(gb[1], D({3}, {0.5, 0.5, 0})));
}

TEST(PointwiseRules, ReluAbsAndClampAtTheirKinks) {
  HostTensor x = D({5}, {-1, 0, 0.5, 1, 2}), t = D({5}, {1, 1, 1, 1, 1});
  EXPECT_TRUE(tensors_close(grads(Op::Relu, {x}, t)[0], D({5}, {0, 0, 1, 1, 1})));  // threshold_backward: 0 at 0
  EXPECT_TRUE(tensors_close(grads(Op::Abs, {x}, t)[0], D({5}, {-1, 0, 1, 1, 1})));  // sign(0) = 0
  // clamp's bounds are inclusive: x == min and x == max let the gradient through.
  EXPECT_TRUE(tensors_close(grads(Op::Clamp, {x}, t, {{"min", 0.0}, {"max", 1.0}})[0], D({5}, {0, 1, 1, 1, 0})));
  EXPECT_TRUE(tensors_close(grads(Op::Clamp, {x}, t, {{"max", 0.5}})[0], D({5}, {1, 1, 1, 0, 0})));
}

TEST(PointwiseRules, WhereAndMaskedFillRouteTheGradient) {
  HostTensor cond = ints(DType::Bool, {3}, {1, 0, 1}), a = D({3}, {1, 2, 3}), b = D({}, {7}), t = D({3}, {1, 2, 4});
  auto g = grads(Op::Where, {cond, a, b}, t);
  EXPECT_TRUE(tensors_close(g[0], D({3}, {1, 0, 4})));
  EXPECT_TRUE(tensors_close(g[1], D({}, {2})));
  auto m = grads(Op::MaskedFill, {a, cond}, t, {{"value", 9.0}});
  EXPECT_TRUE(tensors_close(m[0], D({3}, {0, 2, 0})));
}

TEST(PointwiseRules, PowAtZeroBaseHasNoNan) {
  // d/db b^e = e*b^(e-1): 0 at b = 0 for e = 2, 0 for e = 0; d/de = b^e log b, masked to 0.
  HostTensor base = D({3}, {0, 0, 2}), e = D({3}, {2, 0, 3}), t = D({3}, {1, 1, 1});
  auto g = grads(Op::Pow, {base, e}, t);
  EXPECT_TRUE(tensors_close(g[0], D({3}, {0, 0, 12})));
  EXPECT_TRUE(tensors_close(g[1], D({3}, {0, 0, 8 * std::log(2.0)}), 1e-12));
  // Negative exponents and bases.
  EXPECT_TRUE(gradcheck_values(Op::Pow, {D({3}, {0.5, 1.5, 2.0}), D({3}, {-2.0, -0.5, 1.5})}));
  EXPECT_TRUE(gradcheck_values(Op::Pow, {D({2}, {-1.5, -0.5}), D({2}, {2.0, 3.0})}, {}, {.wrt = {"x0"}}));
}

TEST(PointwiseRules, GradientsHaveTheInputsDtypes) {
  // mul(f32[3], f64[]) is f32; each operand's gradient comes back in its own dtype.
  Graph g("mixed");
  Value a = g.add_input("a", TensorMeta(DType::F32, {3}));
  Value s = g.add_input("s", TensorMeta(DType::F64, {}));
  Value i = g.add_input("i", TensorMeta(DType::I64, {3}));
  Value m = g.add(Op::Mul, {a, s});
  g.set_outputs({g.add(Op::Mul, {m, i}, {}, "y")});
  auto j = autograd::build_joint(g);
  ASSERT_EQ(j.graph.outputs().size(), 3u);
  EXPECT_EQ(j.graph.outputs()[1].meta(), TensorMeta(DType::F32, {3}));
  EXPECT_EQ(j.graph.outputs()[2].meta(), TensorMeta(DType::F64, {}));
  auto outs = interpret(j.graph, std::vector<HostTensor>{make(DType::F32, {3}, {1, 2, 3}), D({}, {0.5}),
                                                          ints(DType::I64, {3}, {1, 2, 3}),
                                                          make(DType::F32, {3}, {1, 1, 2})});
  EXPECT_TRUE(tensors_close(outs[1], make(DType::F32, {3}, {0.5, 1, 3})));
  EXPECT_TRUE(tensors_close(outs[2], D({}, {1 + 4 + 18})));
}

TEST(PointwiseRules, ToCastsTheGradientBack) {
  Graph g("cast");
  Value x = g.add_input("x", TensorMeta(DType::F32, {2}));
  Value i = g.add_input("i", TensorMeta(DType::I32, {2}));
  Value up = g.add(Op::To, {x}, {{"dtype", DType::F64}});
  Value iu = g.add(Op::To, {i}, {{"dtype", DType::F64}});
  g.set_outputs({g.add(Op::Mul, {up, iu}, {}, "y")});
  auto j = autograd::build_joint(g);
  Value grad = j.graph.outputs().back();
  EXPECT_EQ(grad.meta().dtype, DType::F32);
  auto outs = interpret(j.graph, std::vector<HostTensor>{make(DType::F32, {2}, {1, 2}), ints(DType::I32, {2}, {3, 4}),
                                                          D({2}, {0.5, 2})});
  EXPECT_TRUE(tensors_close(outs.back(), make(DType::F32, {2}, {1.5, 8})));
}

TEST(PointwiseRules, LowPrecisionGradientsStayInTheirDtype) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (Op op : {Op::Tanh, Op::Sigmoid, Op::Gelu, Op::Exp}) {
      Graph g = one_op_graph(op, {TensorMeta(dt, {4})});
      auto j = autograd::build_joint(g);
      EXPECT_EQ(j.graph.outputs().back().meta().dtype, dt) << op_name(op);
      HostTensor x = make(dt, {4}, {-1, -0.25, 0.5, 1}), t = make(dt, {4}, {1, 1, 1, 1});
      HostTensor low = interpret(j.graph, std::vector<HostTensor>{x, t}).back();
      HostTensor ref = joint_gradients(one_op_graph(op, {F64({4})}), {x.to(DType::F64)}, {t.to(DType::F64)})[0];
      EXPECT_TRUE(tensors_close(low.to(DType::F64), ref, 2e-2, 2e-2)) << op_name(op) << " " << dtype_name(dt);
    }
  }
}

TEST(PointwiseRules, ExpTanhSigmoidSqrtUseTheirResults) {
  // PyTorch's formulas read the forward result: no second exp/tanh/sigmoid/sqrt in the backward.
  for (Op op : {Op::Exp, Op::Tanh, Op::Sigmoid, Op::Sqrt, Op::Rsqrt, Op::Reciprocal}) {
    auto j = autograd::build_joint(one_op_graph(op, {F64({3})}));
    int count = 0;
    for (Node* n : j.graph.nodes()) count += n->op() == op;
    EXPECT_EQ(count, 1) << op_name(op);
  }
}

}  // namespace
}  // namespace kiln
