// nn::LlamaForCausalLM (frontend/nn/llama.h) against Hugging Face's Llama as PyTorch computes it:
// a two-block model with grouped-query heads, every parameter set by the formula of
// tests/support/formula_tensors.h, trained three AdamW steps through a compiled training step,
// matches PyTorch 1.13 in float64 step for step (tools/torch_check/llama_expected.py: the
// losses, parameters after the steps, the trained model's logits), on the CPU and on the GPU
// where there is one.
#include <gtest/gtest.h>

#include "backend/cuda_backend.h"
#include "frontend/compile.h"
#include "frontend/nn/llama.h"
#include "frontend/ops.h"
#include "runtime/cpu/jit.h"
#include "tests/support/formula_tensors.h"

namespace kiln {
namespace {

using testing::expect_values_near;

nn::LlamaConfig small_config() {
  nn::LlamaConfig c;
  c.vocab_size = 40;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.hidden = 24;
  c.context = 12;
  return c;
}

// The script's token ids and targets: (7k + 3) mod 40 and (5k + 1) mod 40 over [2, 8].
Tensor ids_of(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t k = 0; k < 16; ++k) v.push_back((a * k + b) % 40);
  return tensor_of_ints(v, {2, 8});
}

TEST(LlamaForCausalLM, ParametersInHuggingFacesOrder) {
  nn::LlamaForCausalLM m(small_config());
  auto params = m.named_parameters();
  ASSERT_EQ(params.size(), 21u);  // embedding, 2 x 9 per block, norm, head
  EXPECT_EQ(params[0].first, "embed_tokens.weight");
  EXPECT_EQ(params[3].first, "layers.0.attn.k_proj.weight");
  EXPECT_EQ(params[3].second.shape(), (Shape{8, 16}));  // 2 key/value heads of 4
  EXPECT_EQ(params[19].first, "norm.weight");
  EXPECT_EQ(params[20].first, "lm_head.weight");
  // 40*16 + 2*(16 + 16*16 + 2*8*16 + 16*16 + 16 + 3*16*24) + 16 + 16*40, as PyTorch counts it
  EXPECT_EQ(m.num_parameters(), 5200);
  EXPECT_EQ(m(ids_of(7, 3)).shape(), (Shape{2, 8, 40}));
  EXPECT_THROW(m(tensor_of_ints({1, 2, 3}, {3})), Error);                        // not [B, T]
  EXPECT_THROW(m(tensor_of_ints(std::vector<int64_t>(13, 1), {1, 13})), Error);  // past the context
}

void train_three_steps_and_check(const Device& device) {
  nn::LlamaForCausalLM m(small_config());
  testing::set_formula_parameters(m);
  m.to(device);
  const Tensor ids = ids_of(7, 3).to(device), targets = ids_of(5, 1).to(device);
  const std::string on = " on " + device.str();
  expect_values_near(slice(m(ids).reshape({-1}), 0, 0, 8), std::vector<double>{-0.1228729329, -0.2096063266, 0.03777072533, 0.2249416085, 0.05355775587, -0.2031966386, -0.1360575678, 0.1479559426},
                     "logits before training" + on, 1e-5);
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  CompiledTrainStep step = compile(m, [&](const std::vector<Tensor>& b) { return cross_entropy(m(b[0]).reshape({-1, 40}), b[1].reshape({-1})); }, adamw);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(step({ids, targets}));
  EXPECT_EQ(step.stats().compiles, 1) << "one compile for three steps" << on;
  expect_values_near(tensor(losses, {3}), std::vector<double>{3.707959976, 3.658889311, 3.606292892}, "losses" + on, 1e-5);
  const auto& b0 = *m.layers->blocks[0];
  const auto& b1 = *m.layers->blocks[1];
  expect_values_near(slice(b1.attn->k_proj->weight.reshape({-1}), 0, 0, 8), std::vector<double>{0.02316305128, -0.1642965817, -0.2705302067, -0.2625666295, -0.138420666, 0.06698360994, 0.2720258673, 0.3114548257},
                     "layers.1.attn.k_proj.weight" + on, 1e-4);
  expect_values_near(slice(b0.mlp->down_proj->weight.reshape({-1}), 0, 0, 8), std::vector<double>{-0.2551196509, -0.02387609041, 0.1236259636, 0.3114774423, 0.280889431, 0.1724715977, -0.03046928411, -0.2616404368},
                     "layers.0.mlp.down_proj.weight" + on, 1e-4);
  expect_values_near(*b0.input_norm->weight, std::vector<double>{0.3169635888, 0.3017053076, 0.1264807572, -0.04920308944, -0.2331012624, -0.2895283256, -0.2402763877, -0.02787006957, 0.1802508248, 0.3183225961, 0.299397422, 0.1228192646, -0.05408984794, -0.2358896978, -0.2890723194, -0.2366992172},
                     "layers.0.input_norm.weight" + on, 1e-4);
  expect_values_near(slice(m.embed_tokens->weight, 0, 3, 4), std::vector<double>{0.2154432038, 0.0463808763, -0.09883830481, -0.2428147053, -0.3187990122, -0.1991448526, 0.02755267848, 0.2431240397, 0.3184397923, 0.2125058491, 0.04149260625, -0.1033186682, -0.2448578199, -0.317405973, -0.1949509005, 0.03474190148},
                     "embed_tokens.weight[3]" + on, 1e-4);
  expect_values_near(slice(slice(slice(m(ids), 0, 1, 2), 1, 7, 8), 2, 0, 10), std::vector<double>{-0.1706195044, 0.03454343627, 0.02023460362, 0.03089454775, -0.1430702022, -0.1253483194, 0.01922165764, 0.007757786696, -0.01795297467, -0.1822354841},
                     "trained logits[1, 7, :10]" + on, 1e-4);
}

TEST(LlamaForCausalLM, TrainsAsPyTorchOnTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  train_three_steps_and_check(Device::cpu());
}

TEST(LlamaForCausalLM, TrainsAsPyTorchOnTheGpu) {
  if (!backend::cuda_device_present()) GTEST_SKIP() << "no GPU here";
  train_three_steps_and_check(Device::cuda());
}

}  // namespace
}  // namespace kiln
