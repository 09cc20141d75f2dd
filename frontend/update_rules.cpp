#include "frontend/update_rules.h"

#include "ir/error.h"

namespace kiln {

namespace {

// torch.optim.SGD, one parameter:
//   g = grad + weight_decay * p
//   buf = g on the first step, else momentum * buf + (1 - dampening) * g
//   g = g + momentum * buf (nesterov) or buf
//   p = p - lr * g
void sgd_update(Builder& b, const SGDConfig& c, Var step, ParamUpdate& u) {
  Var p = b.wrap(u.param), g = b.wrap(u.grad);
  if (c.weight_decay != 0) g = g + p * c.weight_decay;
  if (c.momentum != 0) {
    Var buf = b.wrap(u.state[0]);
    Var first = b.eq(step, b.scalar(1.0, step.dtype()));
    Var next = buf * c.momentum + g * (1.0 - c.dampening);
    Var new_buf = b.where(first, g, next);
    u.new_state.push_back(new_buf);
    g = c.nesterov ? g + new_buf * c.momentum : new_buf;
  }
  u.new_param = p - g * c.lr;
}

// torch.optim.AdamW, one parameter (step t counts from 1):
//   p = p * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
void adamw_update(Builder& b, const AdamWConfig& c, Var step, ParamUpdate& u) {
  Var p = b.wrap(u.param), g = b.wrap(u.grad), m = b.wrap(u.state[0]), v = b.wrap(u.state[1]);
  DType dt = p.dtype();
  Var t = b.to(step, dt);
  Var decayed = c.weight_decay != 0 ? p * (1.0 - c.lr * c.weight_decay) : p;
  Var new_m = m * c.beta1 + g * (1.0 - c.beta1);
  Var new_v = v * c.beta2 + b.mul(g, g) * (1.0 - c.beta2);
  Var bias1 = 1.0 - b.pow(b.scalar(c.beta1, dt), t);
  Var bias2 = 1.0 - b.pow(b.scalar(c.beta2, dt), t);
  Var step_size = c.lr / bias1;
  Var denom = b.sqrt(new_v) / b.sqrt(bias2) + c.eps;
  u.new_param = decayed - step_size * (new_m / denom);
  u.new_state = {new_m, new_v};
}

}  // namespace

void check_config(const OptimizerConfig& optimizer) {
  if (const auto* s = std::get_if<SGDConfig>(&optimizer)) {
    if (s->lr < 0) fail("SGD: invalid learning rate {}", s->lr);
    if (s->momentum < 0) fail("SGD: invalid momentum {}", s->momentum);
    if (s->weight_decay < 0) fail("SGD: invalid weight_decay {}", s->weight_decay);
    if (s->nesterov && (s->momentum <= 0 || s->dampening != 0))
      fail("SGD: nesterov momentum requires a momentum and zero dampening");
  } else {
    const auto& a = std::get<AdamWConfig>(optimizer);
    if (a.lr < 0) fail("AdamW: invalid learning rate {}", a.lr);
    if (a.eps < 0) fail("AdamW: invalid epsilon {}", a.eps);
    if (a.beta1 < 0 || a.beta1 >= 1) fail("AdamW: invalid beta1 {}", a.beta1);
    if (a.beta2 < 0 || a.beta2 >= 1) fail("AdamW: invalid beta2 {}", a.beta2);
    if (a.weight_decay < 0) fail("AdamW: invalid weight_decay {}", a.weight_decay);
  }
}

std::vector<std::string> state_kinds(const OptimizerConfig& optimizer) {
  if (std::holds_alternative<AdamWConfig>(optimizer)) return {"exp_avg", "exp_avg_sq"};
  if (std::get<SGDConfig>(optimizer).momentum != 0) return {"momentum_buffer"};
  return {};
}

void apply_update(Builder& b, const OptimizerConfig& optimizer, Var step, ParamUpdate& u) {
  if (const auto* a = std::get_if<AdamWConfig>(&optimizer)) adamw_update(b, *a, step, u);
  else sgd_update(b, std::get<SGDConfig>(optimizer), step, u);
}

}  // namespace kiln
