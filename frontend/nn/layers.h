#pragma once
// The basic layers: Linear, LayerNorm, Embedding (torch.nn's, same shapes and defaults).
#include <optional>

#include "frontend/nn/module.h"

namespace kiln::nn {

// y = x @ weight^T + bias; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Tensor weight;
  std::optional<Tensor> bias;
};

// Normalizes over the last dim of size `d`, then scales by weight and shifts by bias.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Tensor weight, bias;
  double eps;
};

// A lookup table: indices [...] (i64) -> [..., d]; weight [n, d].
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, uint64_t seed = 0);
  Tensor forward(const Tensor& indices) const;
  Tensor operator()(const Tensor& indices) const { return forward(indices); }

  Tensor weight;
};

}  // namespace kiln::nn
