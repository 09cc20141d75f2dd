// Decompositions of torch.nn.functional's activations into pointwise primitives (they fuse
// with their producers and consumers into one kernel). f16 and bf16 compute in f32 and round
// once, as the reference kernels compute in double and round once.
#include "ir/selu.h"
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

// Runs `f` on the input in its compute dtype and rounds the result back.
template <class F>
Values in_compute_dtype(DecompositionContext& c, F f) {
  Builder& b = c.b;
  const DType dt = c.out_meta().dtype;
  Var x = b.to(c.input(0), compute_dtype(dt));
  return {b.to(f(b, x), dt)};
}

// exp(z) - 1 without the cancellation near 0 that loses every digit of a small z: with
// t = tanh(z / 2), expm1(z) = 2t / (1 - t), exact in real arithmetic and accurate to a few
// ulps in floating point where z <= 0 (the only side elu evaluates it on).
Var expm1_of(Builder& b, Var z) {
  Var t = b.tanh(z * 0.5);
  return (t * 2.0) / (1.0 - t);
}

Var positive(Builder& b, Var x) { return b.gt(x, b.scalar(0, x.dtype())); }

Values hardsigmoid(DecompositionContext& c) {
  return in_compute_dtype(c, [](Builder& b, Var x) { return b.clamp(x + 3.0, 0.0, 6.0) / 6.0; });
}

Values hardswish(DecompositionContext& c) {
  return in_compute_dtype(c, [](Builder& b, Var x) { return x * b.clamp(x + 3.0, 0.0, 6.0) / 6.0; });
}

Values leaky_relu(DecompositionContext& c) {
  const double slope = c.attrs().get_float("negative_slope");
  return in_compute_dtype(c, [&](Builder& b, Var x) { return b.where(positive(b, x), x, x * slope); });
}

Var elu_of(Builder& b, Var x, double alpha, double scale, double input_scale) {
  Var negative = expm1_of(b, input_scale == 1 ? x : x * input_scale);
  return b.where(positive(b, x), scale == 1 ? x : x * scale, negative * (alpha * scale));
}

Values elu(DecompositionContext& c) {
  const Attrs& a = c.attrs();
  return in_compute_dtype(c, [&](Builder& b, Var x) {
    return elu_of(b, x, a.get_float("alpha"), a.get_float("scale"), a.get_float("input_scale"));
  });
}

Values selu(DecompositionContext& c) {
  return in_compute_dtype(c, [](Builder& b, Var x) { return elu_of(b, x, kSeluAlpha, kSeluScale, 1.0); });
}

// Above the threshold (in units of x * beta) softplus is x: log1p(exp(.)) would overflow.
Values softplus(DecompositionContext& c) {
  const double beta = c.attrs().get_float("beta"), threshold = c.attrs().get_float("threshold");
  return in_compute_dtype(c, [&](Builder& b, Var x) {
    Var bx = beta == 1 ? x : x * beta;
    Var soft = b.log1p(b.exp(bx));
    return b.where(b.gt(bx, b.scalar(threshold, x.dtype())), x, beta == 1 ? soft : soft / beta);
  });
}

// x * tanh(softplus(x)); a large x makes exp overflow to inf, log1p(inf) = inf and tanh = 1, so
// the result is x, as PyTorch's.
Values mish(DecompositionContext& c) {
  return in_compute_dtype(c, [](Builder& b, Var x) { return x * b.tanh(b.log1p(b.exp(x))); });
}

}  // namespace

void install_activations() {
  register_decomposition(Op::Hardsigmoid, hardsigmoid);
  register_decomposition(Op::Hardswish, hardswish);
  register_decomposition(Op::LeakyRelu, leaky_relu);
  register_decomposition(Op::Elu, elu);
  register_decomposition(Op::Selu, selu);
  register_decomposition(Op::Softplus, softplus);
  register_decomposition(Op::Mish, mish);
}

}  // namespace kiln::decompositions
