#pragma once
// Attention written out, found and rewritten to scaled_dot_product_attention (Inductor's
// fuse_attention patterns do this for PyTorch), so that it runs as the flash kernels and never
// holds the [L, S] scores in memory:
//
//   softmax(mask(matmul(q, kᵀ) * scale), dim=-1) [-> dropout] -> matmul(·, v)
//
// with the scale a constant multiply or divide (or none: scale 1), before or after the mask;
// the mask masked_fill(s, m, -inf), where(keep, s, -inf) or s + bias. A keep of
// tril(size=[L, S]) (or masked_fill with its complement, as kiln's nn attention wrote it) is
// is_causal; another bool mask or a bias becomes attn_mask. Every value of the chain must be
// read by the next node alone (otherwise the scores are needed anyway). KILN_LOGS=fuse_attention
// logs each rewrite and each near miss: a softmax that looked like attention and why it is not.
#include "ir/graph.h"

namespace kiln {

bool run_fuse_attention(Graph& g);  // whether any attention was rewritten

}  // namespace kiln
