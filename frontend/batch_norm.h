#pragma once
// batch_norm (frontend/ops.h) with the running statistics' factor a 0-d tensor computed in the
// program: BatchNorm's momentum=None, a cumulative average, passes 1 / num_batches_tracked
// (PyTorch reads that on the host; here it stays in the graph, so a compiled training step
// follows it from step to step).
#include <optional>

#include "frontend/tensor.h"

namespace kiln {

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, const Tensor& momentum,
                  double eps);

}  // namespace kiln
