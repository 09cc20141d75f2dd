// Custom operators (frontend/custom_op.h): registration errors, the .kir round trip, the
// float64 gradient check, eager and traced Tensor code, and compiled results against the
// reference kernel on every device, with the fusable op inside its neighbours' kernel.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/compile.h"
#include "backend/explain.h"
#include "frontend/custom_op.h"
#include "frontend/dispatcher.h"
#include "ir/dot.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"

namespace kiln {
namespace {

using testing::DeviceTest;

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// The reference kernel of x * sigmoid(beta * x) (one input, any strides, contiguous result).
ReferenceFn swish_reference() {
  return [](std::span<const HostTensor> in, const Attrs& a, std::span<const TensorMeta> out) {
    const double beta = a.get_float("beta");
    HostTensor y = HostTensor::empty(out[0]);
    for (int64_t i = 0; i < y.numel(); ++i) {
      double x = in[0].get(i);
      y.set(i, x * sigmoid(beta * x));
    }
    return std::vector<HostTensor>{std::move(y)};
  };
}

// d/dx [x s(bx)] = s(bx) + b x s(bx) (1 - s(bx)), with the Builder as the built-in rules.
autograd::VjpRule swish_vjp() {
  return [](autograd::VjpContext& c) -> std::vector<Value> {
    if (!c.needs_grad[0]) return {Value{}};
    Var x = c.input(0);
    const double beta = c.attrs().get_float("beta");
    Var s = c.b.sigmoid(x * beta);
    return {(c.grad() * (s + x * beta * s * (1.0 - s))).v};
  };
}

// Registered once for the whole program, as a user would at start-up.
Op scaled_swish() {
  static Op op = register_custom_op({.schema = "mylib::scaled_swish(Tensor x, float beta=1.0) -> Tensor",
                                     .reference = swish_reference(),
                                     .vjp = swish_vjp(),
                                     .scalar_expr = "x * sigmoid(beta * x)"});
  return op;
}

// A composite custom op (a decomposition, no expression): softplus(x) = log1p(exp(x)).
Op my_softplus() {
  static Op op = register_custom_op(
      {.schema = "mylib::softplus(Tensor x) -> Tensor",
       .meta = [](std::span<const TensorMeta> in, const Attrs&) { return std::vector<TensorMeta>{TensorMeta(in[0].dtype, in[0].shape)}; },
       .reference =
           [](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> out) {
             HostTensor y = HostTensor::empty(out[0]);
             for (int64_t i = 0; i < y.numel(); ++i) y.set(i, std::log1p(std::exp(in[0].get(i))));
             return std::vector<HostTensor>{std::move(y)};
           },
       .decomposition = [](DecompositionContext& c) -> std::vector<Value> { return {c.b.log1p(c.b.exp(c.input(0))).v}; }});
  return op;
}

std::string error_of(const CustomOp& def) {
  try {
    register_custom_op(def);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CustomOpRegistration, ErrorsNameTheProblem) {
  scaled_swish();
  CustomOp ok{.schema = "t::f(Tensor x) -> Tensor", .reference = swish_reference(), .scalar_expr = "x"};
  auto with = [&](auto change) {
    CustomOp d = ok;
    change(d);
    return error_of(d);
  };
  EXPECT_NE(with([](CustomOp& d) { d.schema = "t::f Tensor x -> Tensor"; }).find("not of the form"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.schema = "t::f(Tensor x)"; }).find("no result"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.schema = "t::f(Tenzor x) -> Tensor"; }).find("unknown type 'Tenzor'"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.schema = "t::f g(Tensor x) -> Tensor"; }).find("identifiers"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.schema = "mylib::scaled_swish(Tensor x) -> Tensor"; }).find("exists"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.schema = "add(Tensor x) -> Tensor"; }).find("exists"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.scalar_expr = "x * (x + 1"; }).find("expected ')'"), std::string::npos);
  std::string unknown = with([](CustomOp& d) { d.scalar_expr = "x * sigmod(x)"; });
  EXPECT_NE(unknown.find("unknown function 'sigmod'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("column 5"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("sigmoid"), std::string::npos) << unknown;  // the known ones are listed
  EXPECT_NE(with([](CustomOp& d) { d.scalar_expr = "x * gamma"; }).find("unknown name 'gamma'"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.scalar_expr = "pow(x)"; }).find("pow takes 2 arguments, given 1"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.scalar_expr = "x $ 2"; }).find("unexpected '$'"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.reference = nullptr; }).find("reference kernel is required"), std::string::npos);
  EXPECT_NE(with([](CustomOp& d) { d.scalar_expr.clear(); }).find("cannot be compiled"), std::string::npos);
  // None of the failed registrations left an op behind.
  EXPECT_EQ(find_op("t::f"), nullptr);
}

TEST(CustomOpRegistration, DifferentiatingAnOpWithoutAVjpNamesIt) {
  static Op op = register_custom_op({.schema = "t::no_grad(Tensor x) -> Tensor", .reference = swish_reference(), .scalar_expr = "x"});
  (void)op;
  Graph g = parse_graph("graph f(%x: f32[4]) {\n  %y = t::no_grad(%x) : f32[4]\n  return (%y)\n}");
  try {
    autograd::build_joint(g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t::no_grad"), std::string::npos) << e.what();
  }
}

TEST(CustomOpIr, RoundTripsThroughKirAndTheInterpreter) {
  scaled_swish();
  const std::string text =
      "graph f(%x: f32[3,5]) {\n"
      "  %y = mylib::scaled_swish(%x, beta=0.5) : f32[3,5]\n"
      "  %z = mylib::scaled_swish(%y) : f32[3,5]\n"
      "  return (%z)\n"
      "}\n";
  Graph g = parse_graph(text);
  std::string printed = print_graph(g);
  EXPECT_NE(printed.find("mylib::scaled_swish(%x, beta=0.5)"), std::string::npos) << printed;
  EXPECT_EQ(print_graph(parse_graph(printed)), printed);
  // The default attribute was filled in, and the interpreter runs the reference kernel.
  HostTensor x = random_tensor(g.inputs()[0]->meta(), 3);
  HostTensor z = interpret(g, std::vector<HostTensor>{x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) {
    double y = x.get(i) * sigmoid(0.5 * x.get(i));
    EXPECT_NEAR(z.get(i), y * sigmoid(y), 1e-6);
  }
}

// A fusable op with a decomposition and no VJP rule: its gradient comes from the decomposition.
Op softplus_expr() {
  static Op op = register_custom_op(
      {.schema = "mylib::softplus_beta(Tensor x, Tensor w, float beta=1.0) -> Tensor",
       .reference =
           [](std::span<const HostTensor> in, const Attrs& a, std::span<const TensorMeta> out) {
             const double beta = a.get_float("beta");
             HostTensor y = HostTensor::empty(out[0]);
             const int64_t cols = in[1].numel();
             for (int64_t i = 0; i < y.numel(); ++i) y.set(i, in[1].get(i % cols) * std::log1p(std::exp(beta * in[0].get(i))) / beta);
             return std::vector<HostTensor>{std::move(y)};
           },
       .decomposition = [](DecompositionContext& c) -> std::vector<Value> {
         const double beta = c.attrs().get_float("beta");
         return {c.input(1) * c.b.log1p(c.b.exp(c.input(0) * beta)) * (1.0 / beta)};
       },
       .scalar_expr = "w * log1p(exp(beta * x)) / beta"});
  return op;
}

TEST(CustomOpIr, AVjpDerivedFromTheDecompositionPassesTheGradientCheck) {
  softplus_expr();
  Graph g = parse_graph(
      "graph f(%x: f64[3,4], %w: f64[4]) {\n"
      "  %y = mylib::softplus_beta(%x, %w, beta=0.7) : f64[3,4]\n"
      "  %z = mul(%y, %x) : f64[3,4]\n"
      "  return (%z)\n"
      "}\n");
  std::vector<HostTensor> in{random_tensor(g.inputs()[0]->meta(), 1), random_tensor(g.inputs()[1]->meta(), 2)};
  autograd::GradcheckResult r = autograd::gradcheck(g, in);
  EXPECT_TRUE(r.ok) << autograd::format_gradcheck(r);
}

TEST(CustomOpIr, PassesTheFloat64GradientCheck) {
  scaled_swish();
  Graph g = parse_graph(
      "graph f(%x: f64[2,3], %w: f64[3]) {\n"
      "  %a = mul(%x, %w) : f64[2,3]\n"
      "  %y = mylib::scaled_swish(%a, beta=1.7) : f64[2,3]\n"
      "  return (%y)\n"
      "}\n");
  std::vector<HostTensor> in{random_tensor(g.inputs()[0]->meta(), 1), random_tensor(g.inputs()[1]->meta(), 2)};
  autograd::GradcheckResult r = autograd::gradcheck(g, in);
  EXPECT_TRUE(r.ok) << autograd::format_gradcheck(r);
}

TEST(CustomOpFrontend, TensorCodeCallsItEagerlyAndTracesIt) {
  scaled_swish();
  Tensor x = randn({4, 6}, 7);
  Tensor y = call_op("mylib::scaled_swish", std::vector<Tensor>{x}, {{"beta", 2.0}})[0];
  HostTensor xh = x.host_data(), yh = y.host_data();
  for (int64_t i = 0; i < xh.numel(); ++i) EXPECT_NEAR(yh.get(i), xh.get(i) * sigmoid(2 * xh.get(i)), 1e-6);
  TracedGraph t = trace([](const Tensor& a) { return call_op("mylib::scaled_swish", std::vector<Tensor>{a * 2.0})[0]; }, x, "f");
  EXPECT_NE(print_graph(t.graph).find("mylib::scaled_swish"), std::string::npos) << print_graph(t.graph);
  EXPECT_THROW(call_op("mylib::nope", std::vector<Tensor>{x}), Error);
}

TEST(CustomOpFrontend, TheDispatchTraceAndDotNameIt) {
  scaled_swish();
  std::vector<std::string> lines;
  set_dispatch_trace_sink([&](const std::string& l) { lines.push_back(l); });
  set_dispatch_trace(true);
  Tensor x = randn({3}, 1);
  call_op("mylib::scaled_swish", std::vector<Tensor>{x});
  set_dispatch_trace(false);
  set_dispatch_trace_sink({});
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("[dispatch] mylib::scaled_swish"), std::string::npos) << lines.back();
  Graph g = parse_graph("graph f(%x: f32[4]) {\n  %y = mylib::scaled_swish(%x, beta=2.0) : f32[4]\n  return (%y)\n}");
  EXPECT_NE(to_dot(g).find("mylib::scaled_swish"), std::string::npos) << to_dot(g);
}

TEST(CustomOpExplain, NamesTheOpInItsFusedGroup) {
  KILN_REQUIRE_JIT();
  scaled_swish();
  Graph g = parse_graph(
      "graph f(%x: f32[16,32], %b: f32[32]) {\n"
      "  %a = add(%x, %b) : f32[16,32]\n"
      "  %y = mylib::scaled_swish(%a, beta=0.5) : f32[16,32]\n"
      "  %s = sum(%y) : f32[]\n"
      "  return (%s)\n"
      "}\n");
  backend::Explanation x = backend::explain(g);
  EXPECT_NE(x.text.find("ops: add, mylib::scaled_swish, sum"), std::string::npos) << x.text;
  EXPECT_NE(x.text.find("%y = mylib::scaled_swish joins k0"), std::string::npos) << x.text;
  EXPECT_NE(x.fused_dot.find("mylib::scaled_swish"), std::string::npos);
}

class CustomOpCompiled : public DeviceTest {};

TEST_P(CustomOpCompiled, FusesWithItsNeighboursAndMatchesTheReference) {
  KILN_REQUIRE_JIT();
  scaled_swish();
  // Broadcast, a neighbour on each side, f32 and a non-default attribute: one kernel.
  Graph g = parse_graph(
      "graph f(%x: f32[33,65], %b: f32[65]) {\n"
      "  %a = add(%x, %b) : f32[33,65]\n"
      "  %y = mylib::scaled_swish(%a, beta=0.75) : f32[33,65]\n"
      "  %z = mul(%y, %x) : f32[33,65]\n"
      "  return (%z)\n"
      "}\n");
  backend::CompiledGraph c = testing::compile_for_test(g);
  EXPECT_EQ(c.report.kernels, 1) << c.report.str();
  // The expression is inline: the kernel computes sigmoid's exp itself, calling nothing of the op.
  EXPECT_EQ(c.executable.source().find("scaled_swish("), std::string::npos);
  EXPECT_NE(c.executable.source().find("mylib::scaled_swish"), std::string::npos);  // named in the kernel's comment
  testing::expect_matches_reference(g, testing::inputs_for(g, 11));
}

TEST_P(CustomOpCompiled, RunsInsideAReductionKernelAndInF16AndF64) {
  KILN_REQUIRE_JIT();
  scaled_swish();
  for (const char* dt : {"f16", "f64"}) {
    Graph g = parse_graph(fmt::format(
        "graph f(%x: {0}[8,100]) {{\n"
        "  %y = mylib::scaled_swish(%x, beta=-0.5) : {0}[8,100]\n"
        "  %s = sum(%y, dim=[1]) : {0}[8]\n"
        "  return (%s)\n"
        "}}\n",
        dt));
    backend::CompiledGraph c = testing::compile_for_test(g);
    EXPECT_EQ(c.report.kernels, 1) << dt << "\n" << c.report.str();
    testing::expect_matches_reference(g, testing::inputs_for(g, 5), 4);
  }
}

TEST_P(CustomOpCompiled, ACompositeOpIsDecomposedAndCompiled) {
  KILN_REQUIRE_JIT();
  my_softplus();
  Graph g = parse_graph(
      "graph f(%x: f32[1000]) {\n"
      "  %y = mylib::softplus(%x) : f32[1000]\n"
      "  %z = neg(%y) : f32[1000]\n"
      "  return (%z)\n"
      "}\n");
  backend::CompiledGraph c = testing::compile_for_test(g);
  EXPECT_EQ(c.report.kernels, 1) << c.report.str();
  testing::expect_matches_reference(g, testing::inputs_for(g, 3));
}

TEST_P(CustomOpCompiled, WithADecompositionItStaysFusedAndItsJointGraphCompiles) {
  KILN_REQUIRE_JIT();
  softplus_expr();
  Graph g = parse_graph(
      "graph f(%x: f32[16,32], %w: f32[32]) {\n"
      "  %y = mylib::softplus_beta(%x, %w, beta=2.0) : f32[16,32]\n"
      "  %l = sum(%y) : f32[]\n"
      "  return (%l)\n"
      "}\n");
  backend::CompiledGraph c = testing::compile_for_test(g);
  EXPECT_EQ(c.report.kernels, 1) << c.report.str();  // the expression, not the decomposition, is compiled
  Graph joint = autograd::build_joint(g).graph;
  testing::expect_matches_reference(joint, testing::inputs_for(joint, 9), 4);
}

TEST_P(CustomOpCompiled, TheJointGraphCompilesWithTheUsersVjp) {
  KILN_REQUIRE_JIT();
  scaled_swish();
  Graph g = parse_graph(
      "graph f(%x: f32[16,32]) {\n"
      "  %y = mylib::scaled_swish(%x, beta=1.5) : f32[16,32]\n"
      "  %l = sum(%y) : f32[]\n"
      "  return (%l)\n"
      "}\n");
  Graph joint = autograd::build_joint(g).graph;
  testing::expect_matches_reference(joint, testing::inputs_for(joint, 9));
}

KILN_DEVICE_TESTS(CustomOpCompiled);

}  // namespace
}  // namespace kiln
