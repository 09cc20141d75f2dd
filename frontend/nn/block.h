#pragma once
// A pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)).
#include <memory>

#include "frontend/nn/attention.h"
#include "frontend/nn/mlp.h"

namespace kiln::nn {

class Block : public Module {
 public:
  Block(int64_t d_model, int64_t n_heads, int64_t context, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<MLP> mlp;
};

}  // namespace kiln::nn
