#include "frontend/nn/block.h"

#include "frontend/ops.h"

namespace kiln::nn {

Block::Block(int64_t d_model, int64_t n_heads, int64_t context, uint64_t seed) {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(d_model));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(d_model, n_heads, context, derive_seed(seed, "attn")));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(d_model));
  mlp = register_module("mlp", std::make_shared<MLP>(d_model, 0, derive_seed(seed, "mlp")));
}

Tensor Block::forward(const Tensor& x) const {
  Tensor h = x + attn->forward(ln1->forward(x));
  return h + mlp->forward(ln2->forward(h));
}

}  // namespace kiln::nn
