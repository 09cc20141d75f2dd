#pragma once
// The transformer's feed-forward block: Linear(d -> hidden) -> GELU -> Linear(hidden -> d).
#include <memory>

#include "frontend/nn/layers.h"

namespace kiln::nn {

class MLP : public Module {
 public:
  // hidden = 0 means 4 * d, as in GPT-2.
  explicit MLP(int64_t d, int64_t hidden = 0, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<Linear> fc, proj;
};

}  // namespace kiln::nn
