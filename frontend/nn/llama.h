#pragma once
// The parts of a Llama-style transformer, written as Hugging Face's LlamaModel writes them:
// rotary position embeddings (RoPE), attention with grouped-query heads (GQA), the SwiGLU
// feed-forward block, and the pre-norm block of the three with RMSNorm.
#include <memory>

#include "frontend/nn/layers.h"
#include "frontend/nn/norms.h"

namespace kiln::nn {

// Rotates each pair (i, i + head_dim/2) of a head's features by the angle pos * base^(-2i/head_dim).
// The cos and sin tables ([max_positions, head_dim]) are buffers: computed once, named
// ("rope.cos"), moved with the module, inputs of a traced graph (not constants of it).
class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(int64_t head_dim, int64_t max_positions, double base = 10000.0);
  // x [..., T, head_dim] -> the same, positions offset..offset+T-1.
  Tensor forward(const Tensor& x, int64_t offset = 0) const;
  Tensor operator()(const Tensor& x, int64_t offset = 0) const { return forward(x, offset); }

  int64_t head_dim, max_positions;
  Tensor cos, sin;
};

// Causal self-attention with n_kv_heads key/value heads shared by groups of n_heads / n_kv_heads
// query heads (n_kv_heads = n_heads: multi-head attention; 1: multi-query), RoPE on q and k,
// no biases (Llama's q_proj, k_proj, v_proj, o_proj).
class GroupedQueryAttention : public Module {
 public:
  GroupedQueryAttention(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t context, double rope_base = 10000.0,
                        uint64_t seed = 0);
  // x [B, T, d_model] -> [B, T, d_model]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t d_model, n_heads, n_kv_heads, head_dim, context;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RotaryEmbedding> rope;
};

// down(silu(gate(x)) * up(x)), no biases.
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t d_model, int64_t hidden, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// x + attn(input_norm(x)), then x + mlp(post_attention_norm(x)).
class LlamaBlock : public Module {
 public:
  LlamaBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t hidden, int64_t context, double rms_eps = 1e-6,
             uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<RMSNorm> input_norm, post_attention_norm;
  std::shared_ptr<GroupedQueryAttention> attn;
  std::shared_ptr<SwiGLU> mlp;
};

}  // namespace kiln::nn
