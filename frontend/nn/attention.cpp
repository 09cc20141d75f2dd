#include "frontend/nn/attention.h"

#include <cmath>
#include <limits>

#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

CausalSelfAttention::CausalSelfAttention(int64_t d_model_, int64_t n_heads_, int64_t context_, uint64_t seed)
    : d_model(d_model_), n_heads(n_heads_), context(context_) {
  if (n_heads <= 0 || d_model % n_heads != 0)
    fail("CausalSelfAttention: d_model {} must be a positive multiple of n_heads {}", d_model, n_heads);
  qkv = register_module("qkv", std::make_shared<Linear>(d_model, 3 * d_model, true, derive_seed(seed, "qkv")));
  proj = register_module("proj", std::make_shared<Linear>(d_model, d_model, true, derive_seed(seed, "proj")));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  if (x.dim() != 3 || x.size(2) != d_model)
    fail("CausalSelfAttention expects [B, T, {}], got {}", d_model, shape_str(x.shape()));
  const int64_t B = x.size(0), T = x.size(1), C = d_model, H = n_heads, Dh = C / H;
  if (T > context) fail("CausalSelfAttention: sequence length {} exceeds the context {}", T, context);

  std::vector<Tensor> parts = split(qkv->forward(x), C, /*dim=*/2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, Dh}).transpose(1, 2); };  // [B,H,T,Dh]
  Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);

  // Position t sees positions <= t (is_causal); run as the flash kernels (passes/attention_math.h).
  Tensor y = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, /*is_causal=*/true).transpose(1, 2).reshape({B, T, C});
  return proj->forward(y);
}

}  // namespace kiln::nn

namespace kiln::nn {

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, bool bias, uint64_t seed)
    : embed_dim(embed_dim_), num_heads(num_heads_) {
  if (num_heads <= 0 || embed_dim <= 0 || embed_dim % num_heads != 0)
    fail("MultiheadAttention: embed_dim {} must be a positive multiple of num_heads {}", embed_dim, num_heads);
  const double bound = std::sqrt(6.0 / static_cast<double>(embed_dim + 3 * embed_dim));  // xavier_uniform of [3E, E]
  in_proj_weight = register_parameter("in_proj_weight", init::uniform({3 * embed_dim, embed_dim}, -bound, bound, derive_seed(seed, "in_proj_weight")));
  if (bias) in_proj_bias = register_parameter("in_proj_bias", init::constant({3 * embed_dim}, 0.0));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, derive_seed(seed, "out_proj")));
  if (bias) out_proj->bias->impl()->set_storage_from(*init::constant({embed_dim}, 0.0).impl());  // PyTorch zeroes it
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& key_padding_mask,
                                   const std::optional<Tensor>& attn_mask, bool is_causal) const {
  const int64_t E = embed_dim, H = num_heads, Dh = E / H;
  for (const Tensor* t : {&query, &key, &value})
    if (t->dim() != 3 || t->size(2) != E) fail("MultiheadAttention expects [B, L, {}] tensors, got {}", E, shape_str(t->shape()));
  const int64_t B = query.size(0), L = query.size(1), S = key.size(1);
  if (key.size(0) != B || value.size(0) != B || value.size(1) != S)
    fail("MultiheadAttention: key {} and value {} do not match query {}", shape_str(key.shape()), shape_str(value.shape()), shape_str(query.shape()));
  auto project = [&](const Tensor& x, int64_t part, int64_t len) {
    Tensor w = slice(in_proj_weight, 0, part * E, (part + 1) * E);
    std::optional<Tensor> b;
    if (in_proj_bias) b = slice(*in_proj_bias, 0, part * E, (part + 1) * E);
    return linear(x, w, b).reshape({B, len, H, Dh}).transpose(1, 2);  // [B, H, len, Dh]
  };
  Tensor q = project(query, 0, L), k = project(key, 1, S), v = project(value, 2, S);
  // PyTorch's masks say what to ignore; scaled_dot_product_attention's bool mask what to attend.
  std::optional<Tensor> mask;
  if (attn_mask) {
    Tensor m = *attn_mask;
    if (m.dim() == 3) m = m.reshape({B, H, L, S});
    mask = m.dtype() == DType::Bool ? logical_not(m) : m;
  }
  if (key_padding_mask) {
    if (key_padding_mask->dim() != 2 || key_padding_mask->size(0) != B || key_padding_mask->size(1) != S)
      fail("MultiheadAttention: key_padding_mask must be [{}, {}], got {}", B, S, shape_str(key_padding_mask->shape()));
    Tensor keep = logical_not(key_padding_mask->reshape({B, 1, 1, S}));
    if (!mask) mask = keep;
    else if (mask->dtype() == DType::Bool) mask = logical_and(*mask, keep);
    else mask = where(keep, *mask, -std::numeric_limits<double>::infinity());
  }
  Tensor y = scaled_dot_product_attention(q, k, v, mask, 0.0, is_causal);
  return out_proj->forward(y.transpose(1, 2).reshape({B, L, E}));
}

}  // namespace kiln::nn
