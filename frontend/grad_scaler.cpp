#include "frontend/grad_scaler.h"

#include <cmath>

#include "ir/error.h"

namespace kiln {

namespace {

bool power_of_two(double x) {
  int e = 0;
  return x > 0 && std::frexp(x, &e) == 0.5;
}

}  // namespace

void check_scaler(const GradScalerConfig& c) {
  if (!power_of_two(c.init_scale)) fail("GradScaler: init_scale {} must be a power of two (scaling stays exact)", c.init_scale);
  if (!power_of_two(c.growth_factor) || c.growth_factor <= 1)
    fail("GradScaler: growth_factor {} must be a power of two above 1", c.growth_factor);
  if (!power_of_two(c.backoff_factor) || c.backoff_factor >= 1)
    fail("GradScaler: backoff_factor {} must be a power of two below 1", c.backoff_factor);
  if (c.growth_interval < 1) fail("GradScaler: growth_interval {} must be at least 1", c.growth_interval);
}

Var unscale_and_check(Builder& b, const ScalerState& s, std::vector<ParamUpdate>& updates) {
  // Unscale: times 1 / scale, exact for a power of two. Then one reduction over every
  // gradient: x * 0 is 0 for a finite x and NaN for an inf or a NaN, so the sum of all of them
  // is NaN exactly when one is not finite.
  Var inv = b.reciprocal(b.wrap(s.scale));
  std::vector<Value> flat;
  for (auto& u : updates) {
    Var g = b.wrap(u.grad);
    u.grad = b.mul(g, b.to(inv, g.dtype())).v;
    flat.push_back(b.reshape(b.to(b.wrap(u.grad), DType::F32), {-1}).v);
  }
  Var all = flat.size() == 1 ? b.wrap(flat[0]) : b.cat(flat, 0);
  Var poisoned = b.sum(b.mul(all, b.scalar(0.0, DType::F32)), {});
  return b.ne(poisoned, poisoned);
}

void skip_if_found(Builder& b, Var found, ParamUpdate& u) {
  u.new_param = b.where(found, b.wrap(u.param), b.wrap(u.new_param)).v;
  for (size_t s = 0; s < u.new_state.size(); ++s) u.new_state[s] = b.where(found, b.wrap(u.state[s]), b.wrap(u.new_state[s])).v;
}

std::vector<Value> next_scaler_state(Builder& b, const GradScalerConfig& c, const ScalerState& s, Var found) {
  Var scale = b.wrap(s.scale), good = b.wrap(s.good_steps) + 1.0;
  Var grow = b.logical_and(b.logical_not(found), b.ge(good, b.scalar(static_cast<double>(c.growth_interval), DType::F32)));
  Var new_scale = b.where(found, scale * c.backoff_factor, b.where(grow, scale * c.growth_factor, scale));
  Var zero = b.scalar(0.0, DType::F32);
  Var new_good = b.where(b.logical_or(found, grow), zero, good);
  Var new_skipped = b.wrap(s.skipped_steps) + b.to(found, DType::F32);
  return {new_scale.v, new_good.v, new_skipped.v};
}

}  // namespace kiln
