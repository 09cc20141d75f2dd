#pragma once
// torch.nn.functional's regression and binary losses, as composites of the table's pointwise
// ops and reductions: they fuse with their neighbours and differentiate through their parts.
// (cross_entropy and nll_loss are ops of the table: frontend/ops.h.) `reduction` is "mean"
// (over every element), "sum" or "none" (the elementwise loss); kl_div also takes "batchmean"
// (the sum divided by the first dim's size, which is KL divergence proper). Input and target
// broadcast against each other as in PyTorch; any other reduction is a kiln::Error.
#include <optional>
#include <string>

#include "frontend/tensor.h"

namespace kiln {

// (input - target)^2
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// |input - target|
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// 0.5 d^2 / beta where d = |input - target| < beta, else d - 0.5 beta (l1_loss when beta is 0).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double beta = 1.0);
// 0.5 d^2 where d < delta, else delta (d - 0.5 delta).
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);
// -w [pos_weight y log s(x) + (1 - y) log(1 - s(x))], computed from the logits x without
// forming s(x) (softplus: stable for large |x|); weight and pos_weight broadcast.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                                        const std::string& reduction = "mean", const std::optional<Tensor>& pos_weight = std::nullopt);
// target (log target - input), input holding log-probabilities; 0 where target is 0. With
// log_target the target holds log-probabilities too: exp(target) (target - input).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", bool log_target = false);

}  // namespace kiln
