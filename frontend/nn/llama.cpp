#include "frontend/nn/llama.h"

#include <cmath>
#include <vector>

#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

namespace {

// The second half of the features negated and moved first: [x1, x2] -> [-x2, x1].
Tensor rotate_half(const Tensor& x) {
  const int64_t d = x.size(-1), half = d / 2;
  return cat({-slice(x, -1, half, d), slice(x, -1, 0, half)}, -1);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(int64_t head_dim_, int64_t max_positions_, double base) : head_dim(head_dim_), max_positions(max_positions_) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("RotaryEmbedding: head_dim must be a positive even number, got {}", head_dim);
  if (max_positions <= 0) fail("RotaryEmbedding: max_positions must be positive, got {}", max_positions);
  // Computed here in double and stored in f32 (as Hugging Face's inv_freq tables are made once).
  std::vector<double> c(static_cast<size_t>(max_positions * head_dim)), s(c.size());
  const int64_t half = head_dim / 2;
  for (int64_t p = 0; p < max_positions; ++p)
    for (int64_t i = 0; i < head_dim; ++i) {
      const double inv_freq = std::pow(base, -2.0 * static_cast<double>(i % half) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * inv_freq;
      c[static_cast<size_t>(p * head_dim + i)] = std::cos(angle);
      s[static_cast<size_t>(p * head_dim + i)] = std::sin(angle);
    }
  cos = register_buffer("cos", tensor(c, {max_positions, head_dim}));
  sin = register_buffer("sin", tensor(s, {max_positions, head_dim}));
}

Tensor RotaryEmbedding::forward(const Tensor& x, int64_t offset) const {
  if (x.dim() < 2 || x.size(-1) != head_dim) fail("RotaryEmbedding expects [..., T, {}], got {}", head_dim, shape_str(x.shape()));
  const int64_t T = x.size(-2);
  if (offset < 0 || offset + T > max_positions)
    fail("RotaryEmbedding: positions {}..{} are past its {} positions", offset, offset + T - 1, max_positions);
  Tensor c = slice(cos, 0, offset, offset + T), s = slice(sin, 0, offset, offset + T);
  if (x.dtype() != c.dtype()) {
    c = kiln::to(c, x.dtype());
    s = kiln::to(s, x.dtype());
  }
  return x * c + rotate_half(x) * s;
}

GroupedQueryAttention::GroupedQueryAttention(int64_t d_model_, int64_t n_heads_, int64_t n_kv_heads_, int64_t context_, double rope_base,
                                             uint64_t seed)
    : d_model(d_model_), n_heads(n_heads_), n_kv_heads(n_kv_heads_), head_dim(0), context(context_) {
  if (n_heads <= 0 || d_model % n_heads != 0)
    fail("GroupedQueryAttention: d_model {} must be a positive multiple of n_heads {}", d_model, n_heads);
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0)
    fail("GroupedQueryAttention: n_heads {} must be a multiple of n_kv_heads {}", n_heads, n_kv_heads);
  head_dim = d_model / n_heads;
  q_proj = register_module("q_proj", std::make_shared<Linear>(d_model, n_heads * head_dim, false, derive_seed(seed, "q_proj")));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d_model, n_kv_heads * head_dim, false, derive_seed(seed, "k_proj")));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d_model, n_kv_heads * head_dim, false, derive_seed(seed, "v_proj")));
  o_proj = register_module("o_proj", std::make_shared<Linear>(n_heads * head_dim, d_model, false, derive_seed(seed, "o_proj")));
  rope = register_module("rope", std::make_shared<RotaryEmbedding>(head_dim, context, rope_base));
}

Tensor GroupedQueryAttention::forward(const Tensor& x) const {
  if (x.dim() != 3 || x.size(2) != d_model) fail("GroupedQueryAttention expects [B, T, {}], got {}", d_model, shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1);
  if (T > context) fail("GroupedQueryAttention: sequence length {} exceeds the context {}", T, context);
  auto heads = [&](const Tensor& t, int64_t n) { return t.reshape({B, T, n, head_dim}).transpose(1, 2); };  // [B, n, T, Dh]
  Tensor q = rope->forward(heads(q_proj->forward(x), n_heads));
  Tensor k = rope->forward(heads(k_proj->forward(x), n_kv_heads));
  Tensor v = heads(v_proj->forward(x), n_kv_heads);
  // Each key/value head serves n_heads / n_kv_heads query heads in a row (Hugging Face's repeat_kv).
  k = repeat_interleave(k, n_heads / n_kv_heads, 1);
  v = repeat_interleave(v, n_heads / n_kv_heads, 1);
  Tensor y = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, /*is_causal=*/true);
  return o_proj->forward(y.transpose(1, 2).reshape({B, T, n_heads * head_dim}));
}

SwiGLU::SwiGLU(int64_t d_model, int64_t hidden, uint64_t seed) {
  gate_proj = register_module("gate_proj", std::make_shared<Linear>(d_model, hidden, false, derive_seed(seed, "gate_proj")));
  up_proj = register_module("up_proj", std::make_shared<Linear>(d_model, hidden, false, derive_seed(seed, "up_proj")));
  down_proj = register_module("down_proj", std::make_shared<Linear>(hidden, d_model, false, derive_seed(seed, "down_proj")));
}

Tensor SwiGLU::forward(const Tensor& x) const { return down_proj->forward(silu(gate_proj->forward(x)) * up_proj->forward(x)); }

LlamaBlock::LlamaBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t hidden, int64_t context, double rms_eps,
                       uint64_t seed, double rope_base) {
  input_norm = register_module("input_norm", std::make_shared<RMSNorm>(d_model, rms_eps));
  attn = register_module("attn", std::make_shared<GroupedQueryAttention>(d_model, n_heads, n_kv_heads, context, rope_base,
                                                                         derive_seed(seed, "attn")));
  post_attention_norm = register_module("post_attention_norm", std::make_shared<RMSNorm>(d_model, rms_eps));
  mlp = register_module("mlp", std::make_shared<SwiGLU>(d_model, hidden, derive_seed(seed, "mlp")));
}

Tensor LlamaBlock::forward(const Tensor& x) const {
  Tensor h = x + attn->forward(input_norm->forward(x));
  return h + mlp->forward(post_attention_norm->forward(h));
}

void LlamaLayers::add(std::shared_ptr<LlamaBlock> block) {
  blocks.push_back(register_module(std::to_string(blocks.size()), std::move(block)));
}

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& c, uint64_t seed) : config(c) {
  if (c.vocab_size <= 0 || c.n_layers < 0 || c.hidden <= 0 || c.context <= 0)
    fail("LlamaForCausalLM: vocab_size, hidden and context must be positive and n_layers not negative (got {}, {}, {}, {})",
         c.vocab_size, c.hidden, c.context, c.n_layers);
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.d_model, derive_seed(seed, "embed_tokens")));
  layers = register_module("layers", std::make_shared<LlamaLayers>());
  for (int64_t i = 0; i < c.n_layers; ++i)
    layers->add(std::make_shared<LlamaBlock>(c.d_model, c.n_heads, c.n_kv_heads, c.hidden, c.context, c.rms_eps,
                                             derive_seed(seed, "layers." + std::to_string(i)), c.rope_base));
  norm = register_module("norm", std::make_shared<RMSNorm>(c.d_model, c.rms_eps));
  lm_head = register_module("lm_head", std::make_shared<Linear>(c.d_model, c.vocab_size, false, derive_seed(seed, "lm_head")));
}

Tensor LlamaForCausalLM::forward(const Tensor& ids) const {
  if (ids.dim() != 2) fail("LlamaForCausalLM expects token ids [B, T], got {}", shape_str(ids.shape()));
  Tensor x = embed_tokens->forward(ids);
  for (const auto& b : layers->blocks) x = b->forward(x);
  return lm_head->forward(norm->forward(x));
}

}  // namespace kiln::nn
