#pragma once
// RMSNorm and GroupNorm (torch.nn's: same arguments, defaults and initialization: weight 1,
// bias 0), over frontend/ops.h's rms_norm and group_norm.
#include <optional>

#include "frontend/nn/module.h"

namespace kiln::nn {

// x / sqrt(mean(x^2 over the last dim) + eps) * weight; eps left out: the dtype's machine
// epsilon, as PyTorch's.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t d, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::optional<Tensor> weight;
  std::optional<double> eps;

 private:
  int64_t size_;
};

// Normalizes each of num_groups groups of channels of [N, C, ...] over the group's channels
// and spatial positions, then scales and shifts per channel.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::optional<Tensor> weight, bias;
  int64_t num_groups;
  double eps;
};

}  // namespace kiln::nn
