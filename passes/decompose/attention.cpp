// Decomposition of scaled_dot_product_attention: the FlashAttention primitive (a kernel of its
// own: nothing [L, S] in memory) where it can run, else the attention written out as two
// matmuls around a softmax (passes/attention_math.h says when and why).
#include "passes/attention_math.h"
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

std::vector<Value> sdpa(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype;
  if (!attention::why_not_flash(c.node)) {
    Attrs a{{"is_causal", c.attrs().get_bool("is_causal")}, {"scale", attention::scale_of(c.node)}};
    return {b.op_n(Op::FlashAttention, {c.input(0), c.input(1), c.input(2)}, a)[0]};
  }
  attention::Weights w = attention::explicit_weights(b, c.node);
  Var v = b.to(c.input(2), attention::compute_dtype(dt));
  return {b.to(b.matmul(w.dropped, v), dt)};
}

}  // namespace

void install_attention() { register_decomposition(Op::ScaledDotProductAttention, sdpa); }

}  // namespace kiln::decompositions
