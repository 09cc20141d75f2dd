// Composite ops (compiled after decompose) and whole models traced with frontend/nn: the
// MLP, a transformer Block and the MiniGPT forward, compiled for the CPU and compared with the
// reference interpreter.
#include "frontend/kiln.h"
#include "ir/builder.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendComposites : public DeviceTest {};
KILN_DEVICE_TESTS(BackendComposites);
class BackendModels : public DeviceTest {};
KILN_DEVICE_TESTS(BackendModels);

Graph one(Op op, const std::vector<TensorMeta>& ins, const Attrs& attrs = {}) {
  Graph g(std::string(op_name(op)));
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), ins[i]));
  Node* n = g.add_node(op, vs, attrs, "y");
  std::vector<Value> outs;
  for (int r = 0; r < n->num_results(); ++r) outs.push_back(n->result(r));
  g.set_outputs(outs);
  return g;
}

TEST_P(BackendComposites, EveryCompositeAfterDecompose) {
  KILN_REQUIRE_JIT();
  expect_matches_reference(one(Op::Softmax, {F({7, 33})}, {{"dim", int64_t(-1)}}));
  expect_matches_reference(one(Op::Softmax, {F({7, 33})}, {{"dim", int64_t(0)}}));
  expect_matches_reference(one(Op::LogSoftmax, {F({3, 1023})}, {{"dim", int64_t(1)}}));
  expect_matches_reference(one(Op::LogSoftmax, {T(DType::F16, {3, 33})}, {{"dim", int64_t(1)}}));
  expect_matches_reference(one(Op::LayerNorm, {F({7, 33}), F({33}), F({33})}, {{"normalized_shape", IntList{33}}}), 1, 10);
  expect_matches_reference(one(Op::LayerNorm, {F({2, 3, 4, 5})}, {{"normalized_shape", IntList{4, 5}}}), 1, 10);
  expect_matches_reference(one(Op::Mean, {F({7, 33})}, {{"dim", IntList{1}}}));
  expect_matches_reference(one(Op::Var, {F({7, 33})}, {{"dim", IntList{0}}}), 1, 10);
  expect_matches_reference(one(Op::Var, {T(DType::F64, {7, 33})}, {{"dim", IntList{0, 1}}, {"correction", int64_t(0)}}));
  expect_matches_reference(one(Op::Linear, {F({7, 33}), F({5, 33}), F({5})}), 1, 4);
  expect_matches_reference(one(Op::Linear, {F({2, 7, 33}), F({5, 33})}), 1, 4);
  expect_matches_reference(one(Op::Addmm, {F({5}), F({7, 33}), F({33, 5})}, {{"beta", 0.5}, {"alpha", 2.0}}), 1, 4);
  expect_matches_reference(one(Op::Tril, {F({3, 5, 5})}, {{"diagonal", int64_t(1)}}));
  expect_matches_reference(one(Op::Triu, {F({5, 7})}, {{"diagonal", int64_t(-1)}}));
  expect_matches_reference(one(Op::Dropout, {F({7, 33})}, {{"p", 0.25}, {"seed", int64_t(3)}}));
  {
    Graph g = one(Op::Embedding, {F({10, 8}), I({3, 5})});
    expect_matches_reference(g, inputs_for(g, 1, 10));
  }
  {
    Graph g = one(Op::CrossEntropy, {F({6, 11}), I({6})});
    expect_matches_reference(g, inputs_for(g, 2, 11), 1, {});
    Graph s = one(Op::CrossEntropy, {F({6, 11}), I({6})}, {{"reduction", std::string("sum")}, {"label_smoothing", 0.1}});
    expect_matches_reference(s, inputs_for(s, 3, 11), 4, {});
  }
  {
    Graph g = one(Op::NllLoss, {F({6, 11}), I({6})}, {{"reduction", std::string("none")}});
    expect_matches_reference(g, inputs_for(g, 4, 11));
  }
}

// Graph inputs of a trace: the example inputs, then the parameters.
void check_traced(const TracedGraph& tg, const std::vector<HostTensor>& examples, double slack) {
  expect_matches_reference(tg.graph, tg.graph_inputs(examples), slack);
}

TEST_P(BackendModels, MLP) {
  KILN_REQUIRE_JIT();
  nn::MLP mlp(33, 64, 1);
  Tensor x = randn({7, 33}, 2);
  TracedGraph tg = trace([&](const Tensor& t) { return mlp.forward(t); }, x, "mlp");
  check_traced(tg, {x.data()}, 10);
}

TEST_P(BackendModels, TransformerBlock) {
  KILN_REQUIRE_JIT();
  nn::Block block(16, 2, 8, 3);
  Tensor x = randn({2, 7, 16}, 4);
  TracedGraph tg = trace([&](const Tensor& t) { return block.forward(t); }, x, "block");
  check_traced(tg, {x.data()}, 10);
}

TEST_P(BackendModels, MiniGPTForward) {
  KILN_REQUIRE_JIT();
  nn::MiniGPTConfig cfg{.vocab_size = 50, .d_model = 16, .n_heads = 2, .context = 8};
  nn::MiniGPT model(cfg, 5);
  Tensor tokens = randint(0, 50, {2, 7}, 6);
  TracedGraph tg = trace([&](const Tensor& t) { return model.forward(t); }, tokens, "minigpt");
  check_traced(tg, {tokens.data()}, 10);
}

}  // namespace
}  // namespace kiln::testing
