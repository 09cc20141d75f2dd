#include "frontend/nn/mlp.h"

#include "frontend/ops.h"

namespace kiln::nn {

MLP::MLP(int64_t d, int64_t hidden, uint64_t seed) {
  if (hidden == 0) hidden = 4 * d;
  fc = register_module("fc", std::make_shared<Linear>(d, hidden, true, derive_seed(seed, "fc")));
  proj = register_module("proj", std::make_shared<Linear>(hidden, d, true, derive_seed(seed, "proj")));
}

Tensor MLP::forward(const Tensor& x) const { return proj->forward(gelu(fc->forward(x))); }

}  // namespace kiln::nn
