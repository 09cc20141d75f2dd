#pragma once
// The built-in decompositions, one install function per file of passes/decompose/, and the
// small helpers they share.
#include <optional>

#include "ir/meta/meta.h"
#include "passes/decompose.h"

namespace kiln::decompositions {

void install_linalg();      // linear, addmm, embedding
void install_reductions();  // mean, var, softmax, log_softmax, layer_norm, logsumexp
void install_losses();      // nll_loss, cross_entropy
void install_masks();       // tril, triu, dropout
void install_activations(); // hardsigmoid, hardswish, leaky_relu, elu, selu, softplus, mish
void install_nonfinite();   // isnan, isinf, nan_to_num
void install_attention();   // scaled_dot_product_attention
void install_conv();        // convolution, max_pool, avg_pool
void install_norms();       // rms_norm, group_norm
void install_bitwise();     // bitwise_not
void install_einsum();      // einsum
void install_scatter();     // scatter_reduce

// The dtype a decomposition computes in: f16 and bf16 go through f32 and are rounded once at
// the end (the reference kernels compute in double and round once); others compute in place.
inline DType compute_dtype(DType dt) { return dt == DType::F16 || dt == DType::BF16 ? DType::F32 : dt; }

// A reduction's `dim` attribute as a list; empty when absent (= every dim).
inline IntList dims_attr(const Attrs& a) { return a.opt_ints("dim").value_or(IntList{}); }

// How many elements of `x` each result of a reduction over `dims` (empty = all) folds.
inline int64_t reduced_count(const TensorMeta& x, const IntList& dims) {
  std::vector<bool> reduced = meta::reduced_dims(x, dims.empty() ? std::nullopt : std::optional<IntList>(dims));
  int64_t n = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) n *= x.shape[d];
  return n;
}

}  // namespace kiln::decompositions
