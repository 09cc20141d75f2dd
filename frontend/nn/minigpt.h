#pragma once
// MiniGPT: a small GPT-2-style language model, the frontend's end-to-end example.
//   tokens [B, T] (i64) -> token embedding + position embedding -> n_layers Blocks
//   -> final LayerNorm -> lm_head (no bias) -> logits [B, T, vocab]
//
//   nn::MiniGPT model({}, /*seed=*/0);                   // the default config
//   Tensor logits = model.forward(tokens);              // eager
//   TracedGraph g = trace([&](const Tensor& t) { return model.forward(t); }, tokens);
//   // g.parameters / g.parameter_names: the model's weights as the graph's extra inputs
#include <memory>
#include <vector>

#include "frontend/nn/block.h"

namespace kiln::nn {

struct MiniGPTConfig {
  int64_t vocab_size = 600;
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t n_layers = 2;
  int64_t context = 32;  // the longest sequence the model takes
};

class MiniGPT : public Module {
 public:
  explicit MiniGPT(const MiniGPTConfig& config = {}, uint64_t seed = 0);
  // tokens [B, T] with T <= context -> logits [B, T, vocab_size]; kiln::Error otherwise.
  Tensor forward(const Tensor& tokens) const;
  Tensor operator()(const Tensor& tokens) const { return forward(tokens); }
  // Mean cross-entropy of the next-token predictions: targets [B, T] (i64).
  Tensor loss(const Tensor& tokens, const Tensor& targets) const;

  const MiniGPTConfig& config() const { return config_; }

  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;

 private:
  MiniGPTConfig config_;
};

}  // namespace kiln::nn
