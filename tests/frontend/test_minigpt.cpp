// MiniGPT end to end: parameters, eager forward, tracing, and traced == eager bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/cpu_kernel.h"
#include "frontend/kiln.h"
#include "ir/error.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::tensors_close;

namespace {
Tensor token_batch(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < B * T; ++i) ids.push_back((i * 7919 + static_cast<int64_t>(seed) * 31) % vocab);
  return tensor_of_ints(ids, {B, T});
}
}  // namespace

TEST(MiniGPT, DefaultConfigParameterCount) {
  nn::MiniGPT model;
  // By hand, with V=600, C=64, L=2, context=32, hidden=4C=256:
  //   tok_emb 600*64 = 38400; pos_emb 32*64 = 2048
  //   per block: ln1 128; qkv 64*192+192 = 12480; attn.proj 64*64+64 = 4160; ln2 128;
  //              mlp.fc 64*256+256 = 16640; mlp.proj 256*64+64 = 16448   -> 49984, two: 99968
  //   ln_f 128; lm_head (no bias) 600*64 = 38400
  EXPECT_EQ(model.num_parameters(), 38400 + 2048 + 99968 + 128 + 38400);
  EXPECT_EQ(model.num_parameters(), 178944);
  EXPECT_EQ(model.named_parameters().size(), 2u + 2 * 12 + 2 + 1);
  EXPECT_EQ(model.blocks[0]->attn->qkv->weight.name(), "blocks.0.attn.qkv.weight");
  EXPECT_EQ(model.named_parameters().back().first, "lm_head.weight");
}

TEST(MiniGPT, EagerForwardShapeAndLoss) {
  nn::MiniGPTConfig cfg{.vocab_size = 50, .d_model = 16, .n_heads = 2, .context = 8};
  nn::MiniGPT model(cfg, 3);
  Tensor tokens = token_batch(2, 5, 50, 1), targets = token_batch(2, 5, 50, 2);
  Tensor logits = model(tokens);
  EXPECT_EQ(logits.meta().str(), "f32[2,5,50]");
  double loss = model.loss(tokens, targets).item();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
}

TEST(MiniGPT, ContextLimitIsAnError) {
  nn::MiniGPT model;
  try {
    model(zeros({1, 33}, DType::I64));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the context length 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(trace([&](const Tensor& t) { return model(t); }, zeros({1, 33}, DType::I64)), Error);
  EXPECT_FALSE(is_tracing());
  EXPECT_THROW(model(zeros({33}, DType::I64)), Error);  // tokens must be [B, T]
}

TEST(MiniGPT, TracedForwardMatchesEagerBitForBit) {
  EagerCpuReference reference;  // eager on the reference kernels, as the interpreter runs them
  nn::MiniGPT model({}, 1);
  Tensor tokens = token_batch(2, 16, 600, 3);
  TracedGraph g = trace([&](const Tensor& t) { return model.forward(t); }, tokens, "forward");

  ASSERT_EQ(g.graph.outputs().size(), 1u);
  EXPECT_EQ(g.graph.outputs()[0].meta().str(), "f32[2,16,600]");
  // Every parameter became a graph input, in order of first use (here: registration order).
  auto named = model.named_parameters();
  ASSERT_EQ(g.parameters.size(), named.size());
  ASSERT_EQ(g.graph.inputs().size(), 1 + named.size());
  EXPECT_EQ(g.graph.inputs()[0]->name(), "x0");
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(g.parameter_paths[i], named[i].first);
    EXPECT_EQ(g.graph.inputs()[1 + i]->name(), g.parameter_names[i]);
  }
  EXPECT_EQ(g.parameter_names[4], "blocks_0_attn_qkv_weight");

  std::vector<HostTensor> out = interpret(g.graph, g.graph_inputs({tokens.data()}));
  ASSERT_EQ(out.size(), 1u);
  Tensor eager = model.forward(tokens);
  EXPECT_TRUE(tensors_close(out[0], eager.data(), 0.0, 0.0));  // same kernels: identical bits
}

TEST(MiniGPT, TracedLossMatchesEager) {
  nn::MiniGPTConfig cfg{.n_layers = 1};
  nn::MiniGPT model(cfg, 2);
  Tensor tokens = token_batch(2, 8, 600, 4), targets = token_batch(2, 8, 600, 5);
  TracedGraph g = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; }, {tokens, targets},
      "loss");
  EXPECT_EQ(g.graph.outputs()[0].meta().str(), "f32[]");
  std::vector<HostTensor> out = interpret(g.graph, g.graph_inputs({tokens.data(), targets.data()}));
  EXPECT_EQ(out[0].get(0), model.loss(tokens, targets).item());
}
