#pragma once
// Linear layers that read the same input become one linear over their weights concatenated,
// its result split back (Inductor groups such GEMMs in its pre-grad passes):
//
//   linear(x, w1[, b1]), linear(x, w2[, b2])
//     -> split(linear(x, cat(w1, w2)[, cat(b1, b2)]), [n1, n2], dim=-1)
//
// and matmul(x, w1), matmul(x, w2) with 2-D weights [K, n] the same way, along the weights'
// dim 1. Attention's q, k and v projections and SwiGLU's gate and up are the cases: one GEMM of
// n1 + n2 + ... columns runs nearer the device's peak than several narrow ones (a grouped-query
// block's k and v projections are 256 columns wide), and in the backward the input's gradient
// is one GEMM over the concatenated output gradients where it was a sum of several, and the
// weights' gradients one GEMM that reads x once.
//
// Two linears read the same input when they read the same value or the same cast of it
// (`to(x, bf16)` written once per projection, as autocast traces it). Members must agree on
// the weights' dtype and K and on having a bias. A weight computed after the group's first
// linear (autocast's cast of each weight, made just before its linear) is recomputed before it
// when it is a short chain of pointwise and view ops of values already there.
//
// The concatenation copies the weights at every call (constant_fold folds only small
// constants), so a group merges only when x has at least kMergeLinearsMinRows rows: a GEMM does
// 2 * rows flops per weight element it reads, and below that the copy's bytes weigh against
// what the narrow GEMMs lose (a decode step's single row reads each weight once; the copy would
// triple that). Under autocast the copy fuses with the weights' casts, which copy them anyway.
// KILN_LOGS=merge_linears logs each merge and each near miss (why linears reading one input
// stay apart).
#include <cstdint>

#include "ir/graph.h"

namespace kiln {

inline constexpr int64_t kMergeLinearsMinRows = 1024;

bool run_merge_linears(Graph& g);  // whether any linears were merged

}  // namespace kiln
