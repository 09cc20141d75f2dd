// Derivative rules of attention. flash_attention's is FlashAttention's backward: the weights
// are recomputed from q, k and the saved log-sum-exp, never stored, so training saves the output
// and one f32 per query for attention, not the [L, S] weights. scaled_dot_product_attention has
// no rule: build_joint decomposes it first (decomposed_before_differentiation in vjp.h), into
// flash_attention or the written-out form, whose parts have rules.
#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

// Gradients of q, k, v from flash_attention's results (out, lse) and their gradients (either
// may be absent). lse's gradient folds into delta: d lse_i / d s_ij = P_ij, so
// dS = P * (dP - delta) + P * g_lse = P * (dP - (delta - g_lse)).
std::vector<Value> flash_grads(Builder& b, Var q, Var k, Var v, Var out, Var lse, Value g_out, Value g_lse, const Attrs& a) {
  Var dout = g_out ? b.wrap(g_out) : b.zeros_like(out);
  DType st = lse.dtype();  // f32, or f64 for f64 attention
  Var delta = b.sum(b.to(dout, st) * b.to(out, st), {-1});
  if (g_lse) delta = delta - b.wrap(g_lse);
  std::vector<Var> g = b.op_n(Op::FlashAttentionBackward, {dout, q, k, v, lse, delta}, a);
  return {g[0], g[1], g[2]};
}

std::vector<Value> flash_attention_backward(VjpContext& c) {
  Attrs a{{"is_causal", c.attrs().get_bool("is_causal")}, {"scale", c.attrs().get_float("scale")}};
  return flash_grads(c.b, c.input(0), c.input(1), c.input(2), c.result(0), c.result(1), c.grad_outputs[0], c.grad_outputs[1], a);
}

}  // namespace

void install_attention_vjps() {
  register_vjp(Op::FlashAttention, flash_attention_backward);
  register_vjp(Op::FlashAttentionBackward, [](VjpContext& c) -> std::vector<Value> {
    fail("node %{}: flash_attention_backward has no derivative (a second derivative of attention is not supported)", c.node.name());
  });
}

}  // namespace kiln::autograd
