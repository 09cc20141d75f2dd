// gradcheck itself: it passes on correct rules, fails (and says where) on wrong ones, in full
// and fast mode, and re-types graphs to float64.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/vjp.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using autograd::gradcheck;
using autograd::GradcheckOptions;
using autograd::VjpContext;

// A user op y = 2x whose derivative rule is `rule`.
Op twice_with_rule(const std::string& name, autograd::VjpRule rule) {
  Op op = register_op(
      name, OpCategory::Pointwise, "Tensor self",
      [](std::span<const TensorMeta> in, const Attrs&) { return std::vector<TensorMeta>{in[0].contiguous()}; },
      [](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> outs) {
        HostTensor y = HostTensor::empty(outs[0]);
        for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 2 * in[0].get(i));
        return std::vector<HostTensor>{y};
      });
  autograd::register_vjp(op, std::move(rule));
  return op;
}

Op twice_right() {
  static Op op = twice_with_rule("test_gc_twice_right", [](VjpContext& c) { return std::vector<Value>{c.grad() * 2.0}; });
  return op;
}
Op twice_off_by_one_percent() {
  static Op op =
      twice_with_rule("test_gc_twice_off", [](VjpContext& c) { return std::vector<Value>{c.grad() * 2.02}; });
  return op;
}
Op twice_off_by_1e_7() {
  static Op op = twice_with_rule("test_gc_twice_close",
                                 [](VjpContext& c) { return std::vector<Value>{c.grad() * (2.0 * (1 + 1e-7))}; });
  return op;
}
// Right everywhere except element [1,2] of a [2,3] input.
Op twice_wrong_at_one_element() {
  static Op op = twice_with_rule("test_gc_twice_one_wrong", [](VjpContext& c) {
    Attrs a;
    a.set("size", IntList{2, 3});
    a.set("dtype", c.grad().dtype());
    a.set("values", FloatList{2, 2, 2, 2, 2, 2.5});
    return std::vector<Value>{c.grad() * c.b.op(Op::Constant, {}, a)};
  });
  return op;
}

// %y = op(%x) * %w, so the wrong rule sits inside a chain.
Graph chain(Op op, const Shape& shape) {
  Graph g("chain");
  Value x = g.add_input("x", TensorMeta(DType::F32, shape));
  Value w = g.add_input("w", TensorMeta(DType::F32, shape));
  g.set_outputs({g.add(Op::Mul, {g.add(op, {x}), w}, {}, "y")});
  return g;
}

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed = 5) {
  std::vector<HostTensor> in;
  for (size_t k = 0; k < g.inputs().size(); ++k) in.push_back(random_input(g.inputs()[k]->meta(), Range::Any, seed + k));
  return in;
}

TEST(Gradcheck, PassesOnACorrectRuleAndReportsEveryInput) {
  Graph g = chain(twice_right(), {2, 3});
  auto r = gradcheck(g, random_inputs(g));
  EXPECT_TRUE(r.ok) << format_gradcheck(r);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].name, "x");
  EXPECT_EQ(r.inputs[0].checked, 6);
  EXPECT_EQ(r.inputs[1].name, "w");
  EXPECT_LT(r.inputs[0].max_abs_error, 1e-8);
  EXPECT_TRUE(r.failure.empty());
}

TEST(Gradcheck, FailsOnAWrongRuleAndSaysWhere) {
  Graph g = chain(twice_off_by_one_percent(), {2, 3});
  auto r = gradcheck(g, random_inputs(g));
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_FALSE(r.inputs[0].ok);  // x goes through the wrong rule
  EXPECT_TRUE(r.inputs[1].ok);   // w does not
  EXPECT_GT(r.inputs[0].max_rel_error, 5e-3);
  EXPECT_TRUE(has(r.failure, "'%x'")) << r.failure;
  EXPECT_TRUE(has(r.failure, "analytic")) << r.failure;
  std::string text = format_gradcheck(r);
  EXPECT_TRUE(has(text, "FAILED")) << text;
  EXPECT_TRUE(has(text, "MISMATCH")) << text;
  // The helper tests use says so as well.
  EXPECT_FALSE(gradcheck_graph(g, random_inputs(g)));
}

TEST(Gradcheck, FindsAWrongElement) {
  Graph g = chain(twice_wrong_at_one_element(), {2, 3});
  auto r = gradcheck(g, random_inputs(g));
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(has(r.failure, "element [1,2]")) << r.failure;
}

TEST(Gradcheck, ToleratesErrorsBelowRtol) {
  Graph g = chain(twice_off_by_1e_7(), {4});
  auto r = gradcheck(g, random_inputs(g));
  EXPECT_TRUE(r.ok) << format_gradcheck(r);
  // ...and a tighter tolerance catches it.
  GradcheckOptions tight;
  tight.atol = 1e-12;
  tight.rtol = 1e-9;
  EXPECT_FALSE(gradcheck(g, random_inputs(g), tight).ok);
}

TEST(Gradcheck, FastModeChecksRandomDirections) {
  GradcheckOptions fast;
  fast.fast = true;
  fast.directions = 4;
  Graph good = chain(twice_right(), {3, 5});
  auto r = gradcheck(good, random_inputs(good), fast);
  EXPECT_TRUE(r.ok) << format_gradcheck(r);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[0].checked, 4);
  Graph bad = chain(twice_off_by_one_percent(), {3, 5});
  auto rb = gradcheck(bad, random_inputs(bad), fast);
  EXPECT_FALSE(rb.ok);
  EXPECT_TRUE(has(rb.failure, "random direction")) << rb.failure;
}

TEST(Gradcheck, WrtSubsetAndIntegerInputs) {
  Graph g = parse_graph(R"(
graph f(%x: f32[3], %w: f32[3], %i: i64[3]) {
  %c = to(%i, dtype=f32) : f32[3]
  %a = mul(%x, %w) : f32[3]
  %y = add(%a, %c) : f32[3]
  return (%y, %i)
})");
  auto in = random_inputs(g);
  auto all = gradcheck(g, in);
  EXPECT_TRUE(all.ok) << format_gradcheck(all);
  ASSERT_EQ(all.inputs.size(), 2u);  // the i64 input has no gradient
  GradcheckOptions only_w;
  only_w.wrt = {"w"};
  auto r = gradcheck(g, in, only_w);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].name, "w");
}

TEST(Gradcheck, ToFloat64RetypesInputsAndFloatingDtypeAttributes) {
  Graph g = parse_graph(R"(
graph f(%x: f32[2,3], %h: bf16[3], %i: i32[3]) {
  %hx = to(%h, dtype=f32) : f32[3]
  %a = add(%x, %hx) : f32[2,3]
  %z = full(size=[3], fill_value=0.5, dtype=f32) : f32[3]
  %b = mul(%a, %z) : f32[2,3]
  %s = sum(%b, dim=[0], dtype=f32) : f32[3]
  %n = sum(%i, dtype=i64) : i64[]
  %k = to(%s, dtype=i32) : i32[3]
  return (%s, %n, %k)
})");
  std::string text = print_graph(autograd::to_float64(g));
  EXPECT_EQ(text, R"(graph f(%x: f64[2,3], %h: f64[3], %i: i32[3]) {
  %hx = to(%h, dtype=f64) : f64[3]
  %a = add(%x, %hx) : f64[2,3]
  %z = full(size=[3], fill_value=0.5, dtype=f64) : f64[3]
  %b = mul(%a, %z) : f64[2,3]
  %s = sum(%b, dim=[0], dtype=f64) : f64[3]
  %n = sum(%i, dtype=i64) : i64[]
  %k = to(%s, dtype=i32) : i32[3]
  return (%s, %n, %k)
}
)");
  // gradcheck takes f32 and bf16 values and works in f64.
  auto r = gradcheck(g, random_inputs(g));
  EXPECT_TRUE(r.ok) << format_gradcheck(r);
  EXPECT_EQ(r.inputs.size(), 2u);
}

TEST(Gradcheck, WrongInputCountIsAnError) {
  Graph g = chain(twice_right(), {2});
  auto in = random_inputs(g);
  in.pop_back();
  EXPECT_TRUE(has(error_of([&] { gradcheck(g, in); }), "2 inputs, 1 tensors given"));
}

}  // namespace
}  // namespace kiln
