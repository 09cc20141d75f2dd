#include "frontend/nn/attention.h"

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
