#pragma once
// Derivative (VJP) rules, one per differentiable op, in a registry keyed by Op (PyTorch's
// derivatives.yaml, tinygrad's gradient table). A rule receives the forward node and the
// gradients of its results, and builds with the Builder the gradients of its inputs, using
// only ops that are themselves differentiable and compilable.
//
// Rules live beside their op's category: passes/autograd/rules_<category>.cpp, each file
// registering its rules from one install function (see vjp.cpp).
#include <functional>
#include <span>
#include <vector>

#include "ir/builder.h"

namespace kiln::autograd {

struct VjpContext {
  Builder& b;
  const Node& node;                      // the forward node (its inputs and results are primals)
  std::span<const Value> grad_outputs;   // one per result; an empty Value = no gradient flows back
  std::span<const bool> needs_grad;      // one per input: whether the caller wants its gradient

  Var input(int i) const { return b.wrap(node.input(i)); }
  Var result(int i = 0) const { return b.wrap(const_cast<Node&>(node).result(i)); }
  Var grad(int i = 0) const { return b.wrap(grad_outputs[static_cast<size_t>(i)]); }
  const Attrs& attrs() const { return node.attrs(); }
};

// Returns one Value per forward input: its gradient (same shape and dtype as the input), or an
// empty Value where needs_grad is false or no gradient exists (integer inputs, masks).
using VjpRule = std::function<std::vector<Value>(VjpContext&)>;

// Throws kiln::Error if the op already has a rule.
// The number `v` as a 0-d tensor of `like`'s dtype, for the rules' constants.
inline Var num(VjpContext& c, double v, const Var& like) { return c.b.scalar(v, like.dtype()); }

void register_vjp(Op op, VjpRule rule);
const VjpRule* find_vjp(Op op);  // nullptr: the op has no rule

// Ops build_joint decomposes before differentiating, so their derivative is their parts' (as
// AOTAutograd traces through CompositeImplicit ops): scaled_dot_product_attention, whose
// decomposition picks flash_attention (the forward then saves its out and log-sum-exp) or the
// written-out form. They are differentiable and have no rule of their own.
std::span<const Op> decomposed_before_differentiation();

// Whether gradients flow through the op at all (false for comparisons, argmax, creation...);
// ops that are differentiable must have a rule.
bool is_differentiable(Op op);

}  // namespace kiln::autograd
