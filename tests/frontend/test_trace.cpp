// kiln::trace: the recorded graph's text, lifted parameters, outputs, and error behaviour.
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

using namespace kiln;

TEST(Trace, SmallFunctionPrintsExpectedKir) {
  Tensor w = tensor({1, 2, 3}, {3});
  w.set_name("scale.weight");
  TracedGraph g = trace(
      [&](const std::vector<Tensor>& in) {
        Tensor h = relu(in[0] * w + 1.0);
        return std::vector<Tensor>{softmax(h, -1), h.sum({1}, true)};
      },
      {zeros({2, 3})}, "small");
  const char* expected =
      "graph small(%x0: f32[2,3], %scale_weight: f32[3]) {\n"
      "  %mul = mul(%x0, %scale_weight) : f32[2,3]\n"
      "  %full = full(size=[], fill_value=1.0, dtype=f32) : f32[]\n"
      "  %add = add(%mul, %full) : f32[2,3]\n"
      "  %relu = relu(%add) : f32[2,3]\n"
      "  %softmax = softmax(%relu, dim=-1) : f32[2,3]\n"
      "  %sum = sum(%relu, dim=[1], keepdim=true) : f32[2,1]\n"
      "  return (%softmax, %sum)\n"
      "}\n";
  EXPECT_EQ(print_graph(g.graph), expected);
  ASSERT_EQ(g.parameters.size(), 1u);
  EXPECT_EQ(g.parameter_names, std::vector<std::string>{"scale_weight"});
  EXPECT_EQ(g.parameter_paths, std::vector<std::string>{"scale.weight"});
  EXPECT_EQ(g.parameters[0].to_doubles(), (std::vector<double>{1, 2, 3}));
}

TEST(Trace, TracedGraphComputesWhatEagerDoes) {
  Tensor w = randn({3, 4}, 1), x = randn({2, 4}, 2);
  auto fn = [&](const Tensor& in) { return softmax(linear(in, w) * 0.5, -1).sum(1); };
  TracedGraph g = trace(fn, x);
  std::vector<HostTensor> out = interpret(g.graph, g.graph_inputs({x.data()}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(kiln::testing::tensors_close(out[0], fn(x).data(), 0, 0));
}

TEST(Trace, InputsAreNamedAfterTheirTensors) {
  Tensor tokens = zeros({2, 4}, DType::I64);
  tokens.set_name("tokens");
  TracedGraph g = trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1]}; },
                        {tokens, zeros({2, 4}, DType::I64)});
  ASSERT_EQ(g.graph.inputs().size(), 2u);
  EXPECT_EQ(g.graph.inputs()[0]->name(), "tokens");
  EXPECT_EQ(g.graph.inputs()[1]->name(), "x1");
  EXPECT_TRUE(g.parameters.empty());
}

TEST(Trace, ParametersAreLiftedOnceInOrderOfFirstUse) {
  Tensor a = tensor({1, 1}, {2}), b = tensor({2, 2}, {2}), c = tensor({3, 3}, {2});
  a.set_name("layer.a");
  b.set_name("layer.b");  // c stays unnamed: a captured constant
  TracedGraph g = trace([&](const Tensor& x) { return ((x * b + a) * b + c) * a; }, zeros({2}));
  EXPECT_EQ(g.parameter_names, (std::vector<std::string>{"layer_b", "layer_a", "const"}));
  ASSERT_EQ(g.graph.inputs().size(), 4u);
  EXPECT_EQ(g.graph.inputs()[1]->name(), "layer_b");
  EXPECT_EQ(g.graph.inputs()[3]->name(), "const");
  EXPECT_EQ(g.parameters[2].to_doubles(), (std::vector<double>{3, 3}));
}

TEST(Trace, LiftedNamesAreMadeUnique) {
  Tensor a = tensor({1}, {1}), b = tensor({2}, {1});
  a.set_name("x0");  // collides with the example input's name
  b.set_name("x0");
  TracedGraph g = trace([&](const Tensor& x) { return x + a + b; }, zeros({1}));
  EXPECT_EQ(g.parameter_names, (std::vector<std::string>{"x0_1", "x0_2"}));
}

TEST(Trace, ReturningInputsAndParametersWorks) {
  Tensor w = tensor({5, 6}, {2});
  w.set_name("w");
  TracedGraph g = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0], w, in[0] + w}; }, {ones({2})});
  EXPECT_EQ(print_graph(g.graph),
            "graph forward(%x0: f32[2], %w: f32[2]) {\n"
            "  %add = add(%x0, %w) : f32[2]\n"
            "  return (%x0, %w, %add)\n"
            "}\n");
  std::vector<HostTensor> out = interpret(g.graph, g.graph_inputs({ones({2}).data()}));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{5, 6}));
  EXPECT_EQ(out[2].to_doubles(), (std::vector<double>{6, 7}));
}

TEST(Trace, CapturedExampleInputIsTheGraphInput) {
  Tensor x = ones({2});
  TracedGraph g = trace([&](const Tensor& in) { return in + x; }, x);  // x itself, not a copy
  EXPECT_TRUE(g.parameters.empty());
  EXPECT_EQ(print_node(*g.graph.nodes()[0]), "%add = add(%x0, %x0) : f32[2]");
}

TEST(Trace, CreationOpsAreRecorded) {
  // Separate statements: C++ leaves the evaluation order of operands (so the node order) open.
  TracedGraph g = trace(
      [](const Tensor& x) {
        Tensor h = x + arange(4);
        return h + tril({4, 4}, 0, DType::Bool);
      },
      zeros({4, 4}));
  EXPECT_EQ(print_graph(g.graph),
            "graph forward(%x0: f32[4,4]) {\n"
            "  %arange = arange(end=4) : i64[4]\n"
            "  %add = add(%x0, %arange) : f32[4,4]\n"
            "  %tril = tril(size=[4,4], dtype=bool) : bool[4,4]\n"
            "  %add_1 = add(%add, %tril) : f32[4,4]\n"
            "  return (%add_1)\n"
            "}\n");
  EXPECT_TRUE(g.parameters.empty());
}

TEST(Trace, SplitGivesOneTensorPerResult) {
  TracedGraph g = trace(
      [](const Tensor& x) {
        std::vector<Tensor> p = split(x, 2, 1);
        return p[1] * 2;
      },
      zeros({3, 4}));
  EXPECT_EQ(print_node(*g.graph.nodes()[0]), "%split, %split_1 = split(%x0, split_size=2, dim=1) : f32[3,2]{4,1}, f32[3,2]{4,1}");
}

TEST(Trace, DataOfATracedTensorIsAnError) {
  try {
    trace([](const Tensor& x) { return Tensor(x.data()); }, zeros({2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is being traced"), std::string::npos) << e.what();
  }
}

TEST(Trace, NestedTracesAreAnError) {
  auto inner = [](const Tensor& x) { return exp(x); };
  EXPECT_THROW(trace([&](const Tensor& x) { return trace(inner, x).graph.num_nodes() ? x : x; }, zeros({1})), Error);
  EXPECT_FALSE(is_tracing());
}

TEST(Trace, ExceptionsLeaveNoTraceBehind) {
  EXPECT_THROW(trace([](const Tensor&) -> Tensor { throw Error("boom"); }, zeros({1})), Error);
  EXPECT_FALSE(is_tracing());
  Tensor eager = exp(zeros({1}));  // runs eagerly again
  EXPECT_FALSE(eager.is_traced());
  EXPECT_EQ(eager.item(), 1.0);
  TracedGraph g = trace([](const Tensor& x) { return exp(x); }, zeros({1}));  // and tracing works again
  EXPECT_EQ(g.graph.num_nodes(), 1u);
}

TEST(Trace, TracedTensorsDoNotOutliveTheirTrace) {
  Tensor escaped;
  trace(
      [&](const Tensor& x) {
        escaped = exp(x);
        return escaped;
      },
      zeros({2}));
  EXPECT_TRUE(escaped.is_traced());
  EXPECT_THROW(neg(escaped), Error);
  EXPECT_THROW(escaped.data(), Error);
  // ... nor does one from an earlier trace work inside a later one.
  EXPECT_THROW(trace([&](const Tensor& x) { return x + escaped; }, zeros({2})), Error);
}

TEST(Trace, MustReturnSomething) {
  EXPECT_THROW(trace([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }, {zeros({1})}), Error);
}

TEST(Trace, GraphInputsChecksTheCount) {
  Tensor w = ones({2});
  TracedGraph g = trace([&](const Tensor& x) { return x * w; }, zeros({2}));
  EXPECT_EQ(g.graph_inputs({zeros({2}).data()}).size(), 2u);
  EXPECT_THROW(g.graph_inputs({}), Error);
}
