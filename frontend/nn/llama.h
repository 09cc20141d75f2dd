#pragma once
// The parts of a Llama-style transformer, written as Hugging Face's LlamaModel writes them:
// rotary position embeddings (RoPE), attention with grouped-query heads (GQA), the SwiGLU
// feed-forward block, and the pre-norm block of the three with RMSNorm.
#include <memory>
#include <vector>

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
             uint64_t seed = 0, double rope_base = 10000.0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<RMSNorm> input_norm, post_attention_norm;
  std::shared_ptr<GroupedQueryAttention> attn;
  std::shared_ptr<SwiGLU> mlp;
};

// The sizes of a Llama-style language model (Hugging Face's LlamaConfig, by its other names).
struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t d_model = 4096;     // hidden_size
  int64_t n_layers = 32;      // num_hidden_layers
  int64_t n_heads = 32;       // num_attention_heads
  int64_t n_kv_heads = 32;    // num_key_value_heads
  int64_t hidden = 11008;     // intermediate_size
  int64_t context = 2048;     // max_position_embeddings
  double rms_eps = 1e-6;      // rms_norm_eps
  double rope_base = 10000.0; // rope_theta
};

// The blocks of a LlamaForCausalLM, named "0", "1", ... as Hugging Face's `layers` list.
class LlamaLayers : public Module {
 public:
  void add(std::shared_ptr<LlamaBlock> block);
  std::vector<std::shared_ptr<LlamaBlock>> blocks;
};

// Hugging Face's LlamaForCausalLM without its cache: token embedding, n_layers LlamaBlocks, a
// final RMSNorm and an untied linear head. Parameters in that order (embed_tokens, layers.N...,
// norm, lm_head), so that a script can set them in named_parameters order.
class LlamaForCausalLM : public Module {
 public:
  explicit LlamaForCausalLM(const LlamaConfig& config, uint64_t seed = 0);
  // token ids [B, T] (integers, T <= context) -> logits [B, T, vocab_size]
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }

  LlamaConfig config;
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<LlamaLayers> layers;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace kiln::nn
