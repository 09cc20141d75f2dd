#pragma once
// Causal multi-head self-attention (GPT-2's): one Linear makes q, k and v; each position
// attends to itself and the positions before it.
#include <memory>
#include <optional>

#include "frontend/nn/layers.h"

namespace kiln::nn {

class CausalSelfAttention : public Module {
 public:
  // d_model must be a multiple of n_heads; sequences may be up to `context` long.
  CausalSelfAttention(int64_t d_model, int64_t n_heads, int64_t context, uint64_t seed = 0);
  // x [B, T, d_model] -> [B, T, d_model]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t d_model, n_heads, context;
  std::shared_ptr<Linear> qkv, proj;
};

}  // namespace kiln::nn

namespace kiln::nn {

// torch.nn.MultiheadAttention with batch_first=True: self- or cross-attention over [B, L, E]
// queries and [B, S, E] keys and values, num_heads heads, one packed in_proj ([3E, E] weight and
// [3E] bias, as PyTorch names and initializes them: xavier-uniform weight, zero biases) and
// out_proj (a Linear). key_padding_mask [B, S] (bool, true = ignore that key) and attn_mask
// ([L, S] or [B*heads, L, S]: bool true = ignore, or added) as PyTorch takes them; the output
// only (no attention weights).
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true, uint64_t seed = 0);
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const std::optional<Tensor>& key_padding_mask = std::nullopt, const std::optional<Tensor>& attn_mask = std::nullopt,
                 bool is_causal = false) const;
  Tensor operator()(const Tensor& x) const { return forward(x, x, x); }

  int64_t embed_dim, num_heads;
  Tensor in_proj_weight;
  std::optional<Tensor> in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

}  // namespace kiln::nn
