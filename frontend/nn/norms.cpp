#include "frontend/nn/norms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frontend/batch_norm.h"
#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

RMSNorm::RMSNorm(int64_t d, std::optional<double> eps_, bool elementwise_affine) : eps(eps_) {
  if (d <= 0) fail("RMSNorm({}): the size must be positive", d);
  if (elementwise_affine) weight = register_parameter("weight", init::constant({d}, 1.0));
  size_ = d;
}

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, {size_}, weight, eps); }

GroupNorm::GroupNorm(int64_t num_groups_, int64_t num_channels, double eps_, bool affine) : num_groups(num_groups_), eps(eps_) {
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups != 0)
    fail("GroupNorm({}, {}): num_channels must be a positive multiple of num_groups", num_groups, num_channels);
  if (affine) {
    weight = register_parameter("weight", init::constant({num_channels}, 1.0));
    bias = register_parameter("bias", init::constant({num_channels}, 0.0));
  }
}

Tensor GroupNorm::forward(const Tensor& x) const { return group_norm(x, num_groups, weight, bias, eps); }

BatchNorm::BatchNorm(int64_t num_features_, double eps_, std::optional<double> momentum_, bool affine, bool track_running_stats,
                     std::vector<int64_t> ranks,
                     std::string kind)
    : num_features(num_features_), eps(eps_), momentum(momentum_), ranks_(std::move(ranks)), kind_(std::move(kind)) {
  if (num_features <= 0) fail("{}({}): num_features must be positive", kind_, num_features);
  if (affine) {
    weight = register_parameter("weight", init::constant({num_features}, 1.0));
    bias = register_parameter("bias", init::constant({num_features}, 0.0));
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", init::constant({num_features}, 0.0));
    running_var = register_buffer("running_var", init::constant({num_features}, 1.0));
    num_batches_tracked = register_buffer("num_batches_tracked", tensor_of_ints({0}, {}));
  }
}

Tensor BatchNorm::forward(const Tensor& x) const {
  if (std::find(ranks_.begin(), ranks_.end(), x.dim()) == ranks_.end() || x.size(1) != num_features)
    fail("{}({}): expected {}D input [N, {}, ...], got {}", kind_, num_features, fmt::join(ranks_, "D or "), num_features, x.str());
  // Without running statistics a module normalizes by the batch's, in evaluation too (PyTorch's).
  const bool batch_statistics = is_training() || !running_mean;
  if (is_training() && num_batches_tracked) {
    Tensor n = *num_batches_tracked;
    n.copy_(n + 1);
    // momentum=None: the cumulative average, 1 / (batches seen, this one included).
    if (!momentum) return batch_norm(x, running_mean, running_var, weight, bias, true, reciprocal(kiln::to(n, x.dtype())), eps);
  }
  return batch_norm(x, running_mean, running_var, weight, bias, batch_statistics, momentum.value_or(0.0), eps);
}

}  // namespace kiln::nn
