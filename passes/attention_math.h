#pragma once
// What scaled_dot_product_attention means in graph ops, for its decomposition
// (passes/decompose/attention.cpp, which build_joint also runs before differentiating):
// whether a call can run as the FlashAttention primitives, and when it cannot (a mask,
// dropout, broadcast batch dims, very wide heads), the attention written out as matmuls and a
// softmax.
#include <optional>
#include <string>

#include "ir/builder.h"

namespace kiln::attention {

// The widest head (E and Ev) the flash kernels of every target take; wider heads are written out.
inline constexpr int64_t kMaxFlashHead = 256;

// Why an sdpa call cannot run as flash_attention, or nullopt when it can: "it has an
// attn_mask", "dropout_p is 0.1", "query's batch dims [2,1] and key's [2,4] differ (broadcast)",
// "head dim 320 is wider than the kernels' 256".
std::optional<std::string> why_not_flash(const Node& sdpa);

// The scale an sdpa call applies: its `scale`, or 1/sqrt(E).
double scale_of(const Node& sdpa);

// softmax(q kᵀ·scale + mask) in the compute dtype (f32 for f16/bf16), as written out: `weights`
// before dropout ([batch..., L, S], the broadcast batch), `dropped` after (the same Value when
// dropout_p is 0). A query that attends to no key has weights 0.
struct Weights {
  Var weights, dropped;
};
Weights explicit_weights(Builder& b, const Node& sdpa);

// The computed dtype of attention's arithmetic for inputs of `dt`.
DType compute_dtype(DType dt);

}  // namespace kiln::attention
