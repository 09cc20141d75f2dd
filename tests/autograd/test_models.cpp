// Model-level gradchecks: an MLP, a transformer Block and MiniGPT, traced from the nn modules
// with a cross-entropy loss, differentiated with respect to every parameter. Configs are tiny
// and the many-parameter models use fast mode (random directions) so this runs in seconds.
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"

using namespace kiln;
using namespace kiln::autograd;

namespace {

Tensor class_targets(int64_t n, int64_t classes, uint64_t seed) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 5 + static_cast<int64_t>(seed) * 3 + 1) % classes);
  return tensor_of_ints(ids, {n});
}

// Gradchecks the traced loss with respect to all its parameters; the graph must have some.
void expect_parameter_grads_ok(const TracedGraph& tg, const std::vector<HostTensor>& example_inputs,
                               GradcheckOptions options) {
  ASSERT_FALSE(tg.parameter_names.empty());
  ASSERT_EQ(tg.graph.outputs().size(), 1u);
  ASSERT_EQ(tg.graph.outputs()[0].meta().rank(), 0);  // a scalar loss
  options.wrt = tg.parameter_names;
  std::vector<HostTensor> inputs = tg.graph_inputs(example_inputs);
  GradcheckResult r = gradcheck(tg.graph, inputs, options);
  EXPECT_TRUE(r.ok) << format_gradcheck(r);
  ASSERT_EQ(r.inputs.size(), tg.parameter_names.size());
  for (const auto& in : r.inputs) EXPECT_GT(in.checked, 0) << in.name;
}

}  // namespace

TEST(ModelGradcheck, MlpWithCrossEntropyEveryElement) {
  nn::MLP mlp(/*d=*/5, /*hidden=*/7, /*seed=*/1);
  Tensor x = randn({3, 5}, 2), targets = class_targets(3, 5, 1);
  TracedGraph tg = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(mlp(in[0]), in[1])}; },
      {x, targets}, "mlp_loss");
  expect_parameter_grads_ok(tg, {x.data(), targets.data()}, {});
}

TEST(ModelGradcheck, TransformerBlock) {
  const int64_t B = 2, T = 3, C = 8;
  nn::Block block(C, /*n_heads=*/2, /*context=*/4, /*seed=*/3);
  Tensor x = randn({B, T, C}, 4), targets = class_targets(B * T, C, 2);
  TracedGraph tg = trace(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cross_entropy(block(in[0]).reshape({B * T, C}), in[1])};
      },
      {x, targets}, "block_loss");
  GradcheckOptions options;
  options.fast = true;
  options.directions = 4;
  options.seed = 7;
  expect_parameter_grads_ok(tg, {x.data(), targets.data()}, options);
}

TEST(ModelGradcheck, MiniGpt) {
  nn::MiniGPTConfig cfg{.vocab_size = 11, .d_model = 8, .n_heads = 2, .n_layers = 2, .context = 4};
  nn::MiniGPT model(cfg, 5);
  Tensor tokens = tensor_of_ints({1, 5, 9, 5, 0, 10}, {2, 3});
  Tensor targets = tensor_of_ints({5, 9, 5, 2, 10, 3}, {2, 3});
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; },
                         {tokens, targets}, "minigpt_loss");
  EXPECT_EQ(tg.parameter_names.size(), model.named_parameters().size());
  GradcheckOptions options;
  options.fast = true;
  options.directions = 2;
  options.seed = 3;
  expect_parameter_grads_ok(tg, {tokens.data(), targets.data()}, options);
}

TEST(ModelGradcheck, JointOfMiniGptHasAGradientPerParameter) {
  nn::MiniGPTConfig cfg{.vocab_size = 7, .d_model = 4, .n_heads = 1, .n_layers = 1, .context = 3};
  nn::MiniGPT model(cfg, 2);
  Tensor tokens = tensor_of_ints({1, 2, 3}, {1, 3}), targets = tensor_of_ints({2, 3, 4}, {1, 3});
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; },
                         {tokens, targets}, "minigpt_loss");
  JointGraph j = build_joint(tg.graph, {tg.parameter_names});
  ASSERT_EQ(j.graph.outputs().size(), 1 + tg.parameter_names.size());
  for (size_t i = 0; i < tg.parameter_names.size(); ++i) {
    const Value& grad = j.graph.outputs()[1 + i];
    EXPECT_EQ(grad.name(), "grad_" + tg.parameter_names[i]);
    EXPECT_EQ(grad.meta().shape, tg.graph.find(tg.parameter_names[i]).meta().shape);
  }
}
