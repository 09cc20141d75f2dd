// Derivative rules of the reductions: gradcheck (float64, full mode) of every differentiable
// reduction over all dims, single and several dims, negative dims, keepdim on and off, 0-d
// and odd-sized inputs; then ties (amax/amin), zeros (prod), dtype= casts and argmax by hand.
#include <gtest/gtest.h>

#include <set>

#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/vjp.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct Case {
  std::string name;
  Op op;
  Shape shape;
  Attrs attrs;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Attrs dims(IntList d, bool keepdim) {
  Attrs a;
  if (!d.empty()) a.set("dim", d);
  a.set("keepdim", keepdim);
  return a;
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  // (name, shape, dims) reduced with keepdim off and on.
  const std::vector<std::tuple<std::string, Shape, IntList>> reductions = {
      {"all_2x3x4", {2, 3, 4}, {}},     {"d1_2x3x4", {2, 3, 4}, {1}},  {"dneg1_2x3x4", {2, 3, 4}, {-1}},
      {"d0_2_2x3x4", {2, 3, 4}, {0, 2}}, {"all_5", {5}, {}},           {"d0_5", {5}, {0}},
      {"all_scalar", {}, {}},            {"dneg2_3x1", {3, 1}, {-2}}};
  for (Op op : {Op::Sum, Op::Mean, Op::Amax, Op::Amin})
    for (auto& [n, shape, d] : reductions)
      for (bool keep : {false, true})
        cs.push_back({std::string(op_name(op)) + "_" + n + (keep ? "_keep" : ""), op, shape, dims(d, keep)});
  // var: corrections 0 (population), 1 (sample), 2.
  for (auto& [n, shape, d] : reductions) {
    if (shape.empty() || numel(shape) < 3) continue;  // n - correction must stay positive
    for (double corr : {0.0, 1.0, 2.0})
      for (bool keep : {false, true}) {
        Attrs a = dims(d, keep);
        a.set("correction", corr);
        cs.push_back({"var_" + n + "_c" + std::to_string(static_cast<int>(corr)) + (keep ? "_keep" : ""), Op::Var,
                      shape, a});
      }
  }
  // prod: all dims or one dim.
  const std::vector<std::tuple<std::string, Shape, std::optional<int64_t>>> prods = {
      {"all_2x3x4", {2, 3, 4}, std::nullopt}, {"d1_2x3x4", {2, 3, 4}, 1}, {"dneg1_2x3x4", {2, 3, 4}, -1},
      {"all_5", {5}, std::nullopt},           {"d0_5", {5}, 0},          {"all_scalar", {}, std::nullopt}};
  for (auto& [n, shape, d] : prods)
    for (bool keep : {false, true}) {
      Attrs a;
      if (d) a.set("dim", *d);
      a.set("keepdim", keep);
      cs.push_back({"prod_" + n + (keep ? "_keep" : ""), Op::Prod, shape, a});
    }
  // dtype= on sum and mean (gradcheck re-types it to f64; the cast back is tested below).
  cs.push_back({"sum_dtype_f32", Op::Sum, {3, 4}, {{"dim", IntList{0}}, {"dtype", DType::F32}}});
  cs.push_back({"mean_dtype_f32", Op::Mean, {3, 4}, {{"dtype", DType::F32}}});
  return cs;
}

class ReductionRule : public ::testing::TestWithParam<Case> {};

TEST_P(ReductionRule, Gradcheck) {
  const Case& c = GetParam();
  // prod's gradient grows with the input: keep factors near 1 so tolerances stay meaningful.
  Range range = c.op == Op::Prod ? Range::Positive : Range::Any;
  for (uint64_t seed : {1, 2}) EXPECT_TRUE(gradcheck_op(c.op, {F64(c.shape)}, c.attrs, range, seed)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(AllOps, ReductionRule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ReductionRules, EveryDifferentiableReductionIsGradchecked) {
  std::set<Op> tested;
  for (const Case& c : cases()) tested.insert(c.op);
  for (size_t i = 0; i < static_cast<size_t>(Op::NumBuiltin); ++i) {
    Op op = static_cast<Op>(i);
    if (op_info(op).category != OpCategory::Reduction || !autograd::is_differentiable(op)) continue;
    EXPECT_NE(autograd::find_vjp(op), nullptr) << op_name(op) << " has no rule";
    EXPECT_TRUE(tested.count(op)) << op_name(op) << " has no gradcheck case";
  }
}

HostTensor D(const Shape& s, std::vector<double> v) { return make(DType::F64, s, std::move(v)); }

HostTensor grad_of(Op op, const HostTensor& x, const HostTensor& t, const Attrs& attrs) {
  return joint_gradients(one_op_graph(op, {x.meta()}, attrs), {x}, {t})[0];
}

TEST(ReductionRules, AmaxAndAminSplitTiesEvenly) {
  HostTensor x = D({2, 4}, {3, 1, 3, 3, -2, 5, 0, -2});
  // Row 0: three elements tie for the max; row 1 has one max and two tied mins.
  EXPECT_TRUE(tensors_close(grad_of(Op::Amax, x, D({2}, {3, 10}), dims({1}, false)),
                            D({2, 4}, {1, 0, 1, 1, 0, 10, 0, 0})));
  EXPECT_TRUE(tensors_close(grad_of(Op::Amin, x, D({2, 1}, {4, 6}), dims({-1}, true)),
                            D({2, 4}, {0, 4, 0, 0, 3, 0, 0, 3})));
  // Over everything: the max 5 is unique; the min -2 is shared by two.
  EXPECT_TRUE(tensors_close(grad_of(Op::Amax, x, D({}, {2}), dims({}, false)), D({2, 4}, {0, 0, 0, 0, 0, 2, 0, 0})));
  EXPECT_TRUE(tensors_close(grad_of(Op::Amin, x, D({}, {2}), dims({}, false)), D({2, 4}, {0, 0, 0, 0, 1, 0, 0, 1})));
}

TEST(ReductionRules, ProdWithZerosHasNoNan) {
  Attrs row;
  row.set("dim", int64_t{1});
  // Row 0 no zero, row 1 one zero, row 2 two zeros.
  HostTensor x = D({3, 3}, {2, 3, 4, 2, 0, 5, 0, 7, 0});
  HostTensor g = grad_of(Op::Prod, x, D({3}, {1, 1, 1}), row);
  EXPECT_TRUE(tensors_close(g, D({3, 3}, {12, 8, 6, 0, 10, 0, 0, 0, 0})));
  // The gradient is continuous there, so gradcheck agrees at zeros too.
  EXPECT_TRUE(gradcheck_values(Op::Prod, {x}, row));
  EXPECT_TRUE(gradcheck_values(Op::Prod, {x}));
  EXPECT_TRUE(gradcheck_values(Op::Prod, {D({4}, {0, 0.5, -1.5, 2})}));
}

TEST(ReductionRules, MeanDividesByTheReducedCount) {
  HostTensor g = grad_of(Op::Mean, D({2, 3, 4}, std::vector<double>(24, 1.0)), D({3}, {12, 24, 36}), dims({0, 2}, false));
  std::vector<double> expected;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) expected.push_back(1.5 * (b + 1));
  EXPECT_TRUE(tensors_close(g, D({2, 3, 4}, expected)));
}

TEST(ReductionRules, VarMatchesTheClosedForm) {
  // d var / dx_i = 2 (x_i - mean) / (n - correction): mean 4, n - correction 3.
  HostTensor x = D({4}, {1, 2, 4, 9});
  Attrs a = dims({}, false);
  a.set("correction", 1.0);
  EXPECT_TRUE(tensors_close(grad_of(Op::Var, x, D({}, {1}), a), D({4}, {-2, -4.0 / 3, 0, 10.0 / 3}), 1e-12));
}

TEST(ReductionRules, DtypeArgumentsAreCastBack) {
  for (Op op : {Op::Sum, Op::Mean, Op::Prod}) {
    Graph g = one_op_graph(op, {TensorMeta(DType::F32, {2, 3})}, {{"dtype", DType::F64}});
    auto j = autograd::build_joint(g);
    // Same dtype and shape as x (an expanded gradient may have zero strides).
    EXPECT_EQ(j.graph.outputs().back().meta().dtype, DType::F32) << op_name(op);
    EXPECT_EQ(j.graph.outputs().back().meta().shape, (Shape{2, 3})) << op_name(op);
    HostTensor x = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
    HostTensor got = interpret(j.graph, std::vector<HostTensor>{x, D({}, {2})}).back();
    HostTensor want = grad_of(op, x.to(DType::F64), D({}, {2}), {}).to(DType::F32);
    EXPECT_TRUE(tensors_close(got, want, 1e-5, 1e-5)) << op_name(op);
  }
}

TEST(ReductionRules, ChainsOfReductionsPassGradcheck) {
  // A hand-written softmax and logsumexp (amax for stability), and a normalization by var.
  Graph g = parse_graph(R"(
graph f(%x: f64[3,5]) {
  %m = amax(%x, dim=[-1], keepdim=true) : f64[3,1]
  %s = sub(%x, %m) : f64[3,5]
  %e = exp(%s) : f64[3,5]
  %z = sum(%e, dim=[-1], keepdim=true) : f64[3,1]
  %p = div(%e, %z) : f64[3,5]
  %l = log(%z) : f64[3,1]
  %lse = add(%l, %m) : f64[3,1]
  %mu = mean(%x, dim=[0]) : f64[5]
  %v = var(%x, dim=[0], correction=1) : f64[5]
  %r = rsqrt(%v) : f64[5]
  %c = sub(%x, %mu) : f64[3,5]
  %n = mul(%c, %r) : f64[3,5]
  %q = prod(%n, dim=1) : f64[3]
  return (%p, %lse, %q)
})");
  for (uint64_t seed : {1, 2, 3}) EXPECT_TRUE(gradcheck_graph(g, {random_input(F64({3, 5}), Range::Any, seed)}));
}

TEST(ReductionRules, ArgmaxIsNotDifferentiable) {
  EXPECT_FALSE(autograd::is_differentiable(Op::Argmax));
  EXPECT_EQ(autograd::find_vjp(Op::Argmax), nullptr);
  // An integer sum of an argmax carries no gradient back; x's comes from the other output.
  Graph g("g");
  Value x = g.add_input("x", TensorMeta(DType::F64, {2, 3}));
  g.set_outputs({g.add(Op::Argmax, {x}, {{"dim", int64_t{1}}}), g.add(Op::Sum, {x}, {}, "s")});
  auto j = autograd::build_joint(g);
  EXPECT_EQ(j.tangent_for_output, (std::vector<int>{-1, 1}));
  HostTensor out = interpret(j.graph, std::vector<HostTensor>{random_input(F64({2, 3}), Range::Any, 1), D({}, {3})}).back();
  EXPECT_TRUE(tensors_close(out, D({2, 3}, {3, 3, 3, 3, 3, 3})));
}

}  // namespace
}  // namespace kiln
