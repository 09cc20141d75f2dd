#pragma once
// The optimizers' update rules as graph ops, one parameter at a time, as torch.optim writes them
// (frontend/optim.h's configs): SGD (momentum, dampening, Nesterov, weight decay) and AdamW.
#include <string>
#include <vector>

#include "frontend/optim.h"
#include "frontend/param_update.h"
#include "ir/builder.h"

namespace kiln {

// kiln::Error naming the bad field ("AdamW: invalid beta1 1.5").
void check_config(const OptimizerConfig& optimizer);
// The names of a parameter's state under `optimizer`: AdamW's exp_avg and exp_avg_sq, SGD's
// momentum_buffer (with momentum), none.
std::vector<std::string> state_kinds(const OptimizerConfig& optimizer);
// Fills u.new_param and u.new_state from u.param, u.grad and u.state at step `step` (from 1).
void apply_update(Builder& b, const OptimizerConfig& optimizer, Var step, ParamUpdate& u);

}  // namespace kiln
