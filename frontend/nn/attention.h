#pragma once
// Causal multi-head self-attention (GPT-2's): one Linear makes q, k and v; each position
// attends to itself and the positions before it.
#include <memory>

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
