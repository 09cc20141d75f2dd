#include "frontend/nn/layers.h"

#include <cmath>

#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, uint64_t seed) {
  if (in_features <= 0 || out_features <= 0) fail("Linear({}, {}): sizes must be positive", in_features, out_features);
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", init::uniform({out_features, in_features}, -bound, bound, derive_seed(seed, "weight")));
  if (with_bias) bias = register_parameter("bias", init::uniform({out_features}, -bound, bound, derive_seed(seed, "bias")));
}

Tensor Linear::forward(const Tensor& x) const { return linear(x, weight, bias); }

LayerNorm::LayerNorm(int64_t d, double eps_) : eps(eps_) {
  if (d <= 0) fail("LayerNorm({}): the size must be positive", d);
  weight = register_parameter("weight", init::constant({d}, 1.0));
  bias = register_parameter("bias", init::constant({d}, 0.0));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, {weight.size(0)}, weight, bias, eps); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    fail("Embedding({}, {}): sizes must be positive", num_embeddings, embedding_dim);
  weight = register_parameter("weight", init::normal({num_embeddings, embedding_dim}, 0.0, 1.0, derive_seed(seed, "weight")));
}

Tensor Embedding::forward(const Tensor& indices) const { return embedding(indices, weight); }

}  // namespace kiln::nn
