// Derivative rules of the activations (hardsigmoid, hardswish, leaky_relu, elu, selu,
// softplus, mish) and of nan_to_num, as PyTorch's *_backward kernels compute them, written in
// pointwise ops so the backward fuses with its neighbours like the forward.
#include <limits>

#include "passes/autograd/rules.h"
#include "ir/selu.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {


using Rule = Var (*)(VjpContext&, Var x, Var g);

// One input, floating: the rule's gradient, or none when the input needs none.
template <Rule rule>
std::vector<Value> unary_backward(VjpContext& c) {
  if (!c.needs_grad[0]) return {Value{}};
  return {rule(c, c.input(0), c.grad())};
}

Var zero(VjpContext& c, Var like) { return c.b.scalar(0, like.dtype()); }

// hardsigmoid_backward: g / 6 strictly inside (-3, 3), else 0.
Var hardsigmoid_grad(VjpContext& c, Var x, Var g) {
  Builder& b = c.b;
  Var inside = b.logical_and(b.gt(x, num(c, -3, x)), b.lt(x, num(c, 3, x)));
  return b.where(inside, g / 6.0, zero(c, g));
}

// hardswish_backward: 0 below -3, g * (x / 3 + 1/2) up to 3, g above.
Var hardswish_grad(VjpContext& c, Var x, Var g) {
  Builder& b = c.b;
  Var middle = b.where(b.le(x, num(c, 3, x)), g * (x / 3.0 + 0.5), g);
  return b.where(b.lt(x, num(c, -3, x)), zero(c, g), middle);
}

Var leaky_relu_grad(VjpContext& c, Var x, Var g) {
  return c.b.where(c.b.gt(x, zero(c, x)), g, g * c.attrs().get_float("negative_slope"));
}

// elu_backward (from the input): g * scale above 0, else g * input_scale * alpha * scale * exp(x * input_scale).
Var elu_grad_of(VjpContext& c, Var x, Var g, double alpha, double scale, double input_scale) {
  Builder& b = c.b;
  Var negative = g * (b.exp(x * input_scale) * (input_scale * alpha * scale));
  return b.where(b.gt(x, zero(c, x)), g * scale, negative);
}

Var elu_grad(VjpContext& c, Var x, Var g) {
  const Attrs& a = c.attrs();
  return elu_grad_of(c, x, g, a.get_float("alpha"), a.get_float("scale"), a.get_float("input_scale"));
}

Var selu_grad(VjpContext& c, Var x, Var g) { return elu_grad_of(c, x, g, kSeluAlpha, kSeluScale, 1.0); }

// softplus_backward: g above the threshold, else g * sigmoid(x * beta).
Var softplus_grad(VjpContext& c, Var x, Var g) {
  Builder& b = c.b;
  Var bx = x * c.attrs().get_float("beta");
  return b.where(b.gt(bx, num(c, c.attrs().get_float("threshold"), x)), g, g * b.sigmoid(bx));
}

// mish_backward: g * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)), sp = softplus(x).
Var mish_grad(VjpContext& c, Var x, Var g) {
  Builder& b = c.b;
  Var t = b.tanh(b.log1p(b.exp(x)));
  return g * (t + x * b.sigmoid(x) * (1.0 - t * t));
}

// nan_to_num: the gradient passes where x was finite; a replaced value is a constant (0).
Var nan_to_num_grad(VjpContext& c, Var x, Var g) {
  Builder& b = c.b;
  Var finite = b.lt(b.abs(x), num(c, std::numeric_limits<double>::infinity(), x));  // false for nan and +-inf
  return b.where(finite, g, zero(c, g));
}

}  // namespace

void install_activation_vjps() {
  register_vjp(Op::NanToNum, unary_backward<nan_to_num_grad>);
  register_vjp(Op::Hardsigmoid, unary_backward<hardsigmoid_grad>);
  register_vjp(Op::Hardswish, unary_backward<hardswish_grad>);
  register_vjp(Op::LeakyRelu, unary_backward<leaky_relu_grad>);
  register_vjp(Op::Elu, unary_backward<elu_grad>);
  register_vjp(Op::Selu, unary_backward<selu_grad>);
  register_vjp(Op::Softplus, unary_backward<softplus_grad>);
  register_vjp(Op::Mish, unary_backward<mish_grad>);
}

}  // namespace kiln::autograd
