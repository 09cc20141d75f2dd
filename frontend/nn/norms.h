#pragma once
// RMSNorm, GroupNorm and BatchNorm1d/2d/3d (torch.nn's: same arguments, defaults and
// initialization: weight 1, bias 0), over frontend/ops.h's rms_norm, group_norm and batch_norm.
#include <optional>
#include <string>
#include <vector>

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

// Normalizes each channel of [N, C, ...] (BatchNorm1d: [N, C] or [N, C, L]; 2d: [N, C, H, W];
// 3d: [N, C, D, H, W]). Training (Module::train, the default): by the batch's statistics, and
// with track_running_stats the buffers running_mean, running_var and num_batches_tracked are
// updated in place (momentum: the running statistics' exponential factor; std::nullopt, PyTorch's
// momentum=None: their cumulative average, the factor 1 / num_batches_tracked); a compiled
// training step writes them back at each step. Evaluation (eval()): by the running statistics.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::optional<Tensor> weight, bias;
  std::optional<Tensor> running_mean, running_var, num_batches_tracked;
  int64_t num_features;
  double eps;
  std::optional<double> momentum;

 protected:
  // `ranks`: the input ranks the subclass takes; `kind`: its name, for messages.
  BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine, bool track_running_stats, std::vector<int64_t> ranks,
            std::string kind);

 private:
  std::vector<int64_t> ranks_;
  std::string kind_;
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats, {2, 3}, "BatchNorm1d") {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats, {4}, "BatchNorm2d") {}
};
class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNorm(num_features, eps, momentum, affine, track_running_stats, {5}, "BatchNorm3d") {}
};

}  // namespace kiln::nn
