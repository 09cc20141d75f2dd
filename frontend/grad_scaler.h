#pragma once
// The grad scaler inside a training step (torch.amp.GradScaler's policy as graph ops): the loss
// is scaled by `scale` (the backward's seed), the gradients are unscaled by its reciprocal
// (exact: a power of two), one reduction says whether any is inf or NaN, a step that found one
// keeps every parameter and state, and the scale backs off or grows.
#include <vector>

#include "frontend/optim.h"
#include "frontend/param_update.h"
#include "ir/builder.h"

namespace kiln {

// kiln::Error unless the factors are powers of two (scaling stays exact) and the interval >= 1.
void check_scaler(const GradScalerConfig& c);

// The scaler's state inputs of a step graph.
struct ScalerState {
  Value scale, good_steps, skipped_steps;
};

// Unscales every u.grad, and returns whether one is inf or NaN (bool[]).
Var unscale_and_check(Builder& b, const ScalerState& s, std::vector<ParamUpdate>& updates);
// A step that `found` an inf or NaN keeps the parameter and its state.
void skip_if_found(Builder& b, Var found, ParamUpdate& u);
// The scaler's new state, in ScalerState's order: scale * backoff_factor after an inf or NaN
// (and the good steps start again), scale * growth_factor after growth_interval good steps.
std::vector<Value> next_scaler_state(Builder& b, const GradScalerConfig& c, const ScalerState& s, Var found);

}  // namespace kiln
