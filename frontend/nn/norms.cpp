#include "frontend/nn/norms.h"

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

}  // namespace kiln::nn
