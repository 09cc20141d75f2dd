// torch.nn.functional.batch_norm (frontend/ops.h) as the ops that compute it: the batch's
// mean and biased variance per channel in training, the running statistics otherwise. Its
// derivative is theirs; the running statistics' update is written in place (Tensor::copy_),
// which a compiled training step returns and writes back without differentiating it.
#include <fmt/format.h>

#include <variant>

#include "frontend/batch_norm.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {

namespace {

// The factor of the running statistics' update: a number, or a 0-d tensor of the program.
using Factor = std::variant<double, Tensor>;

Tensor update(const Tensor& running, const Tensor& statistic, const Factor& factor, double scale) {
  if (const double* m = std::get_if<double>(&factor)) return running * (1.0 - *m) + statistic * (*m * scale);
  const Tensor f = std::get<Tensor>(factor).to(running.dtype());
  return running * (1.0 - f) + statistic * (f * scale);
}

Tensor batch_norm_with(const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, const Factor& momentum,
                       double eps) {
  if (input.dim() < 2) fail("batch_norm: the input must be [N, C, ...], got {}", input.str());
  const int64_t channels = input.size(1);
  for (const auto& [what, t] : {std::pair{"running_mean", running_mean}, std::pair{"running_var", running_var},
                                std::pair{"weight", weight}, std::pair{"bias", bias}})
    if (t && (t->dim() != 1 || t->size(0) != channels))
      fail("batch_norm: {} must have one value per channel ([{}]), got {}", what, channels, t->str());
  if (running_mean.has_value() != running_var.has_value())
    fail("batch_norm: give both running statistics or neither (running_mean {}, running_var {})", running_mean ? "given" : "missing",
         running_var ? "given" : "missing");
  if (!training && !running_mean) fail("batch_norm: not training, the running statistics are needed (running_mean, running_var)");
  IntList per_channel(static_cast<size_t>(input.dim()), 1);  // [1, C, 1, ...]: broadcasts over N and the spatial dims
  per_channel[1] = channels;
  auto channel = [&](const Tensor& t) { return t.reshape(per_channel); };
  Tensor mean, var;
  if (training) {
    IntList dims{0};
    for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
    const Dims over(dims);
    const int64_t n = input.numel() / std::max<int64_t>(channels, 1);
    if (n <= 1)
      fail("batch_norm: training needs more than 1 value per channel (input {}): the batch's variance is undefined", input.str());
    mean = input.mean(over, /*keepdim=*/true);
    var = kiln::var(input, over, /*correction=*/0, /*keepdim=*/true);
    if (running_mean) {
      Tensor rm = *running_mean, rv = *running_var;
      const double unbiased = static_cast<double>(n) / static_cast<double>(n - 1);
      rm.copy_(update(rm, mean.reshape({channels}).to(rm.dtype()), momentum, 1.0));
      rv.copy_(update(rv, var.reshape({channels}).to(rv.dtype()), momentum, unbiased));
    }
  } else {
    mean = channel(running_mean->to(input.dtype()));
    var = channel(running_var->to(input.dtype()));
  }
  Tensor y = (input - mean) * rsqrt(var + eps);
  if (weight) y = y * channel(*weight);
  if (bias) y = y + channel(*bias);
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, double momentum, double eps) {
  return batch_norm_with(input, running_mean, running_var, weight, bias, training, Factor{momentum}, eps);
}

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, const Tensor& momentum,
                  double eps) {
  if (momentum.dim() != 0) fail("batch_norm: a momentum tensor is 0-d, got {}", momentum.str());
  return batch_norm_with(input, running_mean, running_var, weight, bias, training, Factor{momentum}, eps);
}

}  // namespace kiln
