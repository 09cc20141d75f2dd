#include "frontend/losses.h"

#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {

namespace {

Tensor reduce(const Tensor& loss, const std::string& reduction, const char* fn, bool batchmean_too = false) {
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  if (reduction == "mean") return mean(loss);
  if (batchmean_too && reduction == "batchmean") {
    // the sum over the batch's elements divided by the batch size (a 0-d input is its own batch)
    return loss.dim() == 0 ? sum(loss) : sum(loss) / static_cast<double>(loss.size(0));
  }
  fail("{}: reduction '{}' is not one of 'none', 'mean', 'sum'{}", fn, reduction, batchmean_too ? ", 'batchmean'" : "");
}

void check_floating(const Tensor& t, const char* what, const char* fn) {
  if (!is_floating(t.dtype())) fail("{}: {} must be floating point, got {}", fn, what, dtype_name(t.dtype()));
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_floating(input, "input", "mse_loss");
  return reduce(square(input - target), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_floating(input, "input", "l1_loss");
  return reduce(abs(input - target), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  check_floating(input, "input", "smooth_l1_loss");
  if (beta < 0) fail("smooth_l1_loss: beta must be at least 0, got {}", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  Tensor d = abs(input - target);
  return reduce(where(d < beta, square(d) * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  check_floating(input, "input", "huber_loss");
  if (delta <= 0) fail("huber_loss: delta must be above 0, got {}", delta);
  Tensor d = abs(input - target);
  return reduce(where(d < delta, square(d) * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        const std::string& reduction, const std::optional<Tensor>& pos_weight) {
  check_floating(input, "input", "binary_cross_entropy_with_logits");
  check_floating(target, "target", "binary_cross_entropy_with_logits");
  // -log s(x) = softplus(-x), -log(1 - s(x)) = x + softplus(-x): the loss is
  // (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x), PyTorch's form, with softplus(-x)
  // written max(-x, 0) + log1p(exp(-|x|)), which neither overflows nor loses small values.
  Tensor log_sig_neg = maximum(-input, 0.0) + log1p(exp(-abs(input)));
  Tensor loss = pos_weight ? (1.0 - target) * input + (1.0 + (*pos_weight - 1.0) * target) * log_sig_neg
                           : (1.0 - target) * input + log_sig_neg;
  if (weight) loss = loss * *weight;
  return reduce(loss, reduction, "binary_cross_entropy_with_logits");
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  check_floating(input, "input", "kl_div");
  check_floating(target, "target", "kl_div");
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // xlogy(t, t) - t x: 0 where t is 0 (log 0 is not looked at: the safe argument is 1)
    Tensor positive = target > 0.0;
    Tensor t_log_t = where(positive, target * log(where(positive, target, 1.0)), 0.0);
    loss = t_log_t - target * input;
  }
  return reduce(loss, reduction, "kl_div", /*batchmean_too=*/true);
}

}  // namespace kiln
