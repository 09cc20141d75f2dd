// Derivative rules of the reductions, after PyTorch's derivatives.yaml (sum_backward,
// mean_backward, amax/amin's scale_grad_by_count, var_backward, prod_backward).
// The gradient of a reduction is broadcast back over the reduced dims: Builder::unreduce, or
// restore_reduced_dims where it broadcasts against the input in a later op anyway.
// argmax has no rule: it is not differentiable (vjp.cpp's is_differentiable).
#include <limits>

#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

// The reduced dims as the node was given them (empty = every dim).
IntList reduced_dims(const VjpContext& c) {
  if (c.node.op() == Op::Prod) {
    auto d = c.attrs().opt_int("dim");
    return d ? IntList{*d} : IntList{};
  }
  return c.attrs().opt_ints("dim").value_or(IntList{});
}

// How many input elements each result element reduces.
int64_t reduced_count(const Shape& shape, const IntList& dims) {
  if (dims.empty()) return numel(shape);
  int64_t n = 1;
  for (int64_t d : dims)
    if (!shape.empty()) n *= shape[static_cast<size_t>(normalize_dim(d, static_cast<int64_t>(shape.size())))];
  return n;
}

// Registers `fn` as the rule of a one-input reduction: it runs only when that input is
// floating and needs a gradient, and its answer is cast to the input's dtype.
void rule(Op op, Var (*fn)(VjpContext& c, Var g)) {
  register_vjp(op, [fn](VjpContext& c) {
    Var x = c.input(0);
    if (!c.needs_grad[0] || !is_floating(x.dtype()) || !c.grad_outputs[0]) return std::vector<Value>(1);
    return std::vector<Value>{c.b.to(fn(c, c.grad()), x.dtype())};
  });
}

Var restore(VjpContext& c, Value v) {
  return c.b.restore_reduced_dims(v, c.input(0).shape(), reduced_dims(c), c.attrs().get_bool("keepdim"));
}

Var sum_grad(VjpContext& c, Var g) {
  Var x = c.input(0);
  // sum(dtype=...) casts; its gradient is cast back before it is broadcast.
  return c.b.unreduce(c.b.to(g, x.dtype()), x.shape(), reduced_dims(c), c.attrs().get_bool("keepdim"));
}

Var mean_grad(VjpContext& c, Var g) {
  Var x = c.input(0);
  double n = static_cast<double>(reduced_count(x.shape(), reduced_dims(c)));
  return c.b.unreduce(c.b.to(g / n, x.dtype()), x.shape(), reduced_dims(c), c.attrs().get_bool("keepdim"));
}

// The gradient is split evenly among the elements equal to the extremum.
Var minmax_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var mask = b.eq(c.input(0), restore(c, c.result()));
  Var count = b.sum(mask, reduced_dims(c), /*keepdim=*/true);
  return (restore(c, g) / count) * mask;
}

Var var_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var x = c.input(0);
  IntList dims = reduced_dims(c);
  double dof = static_cast<double>(reduced_count(x.shape(), dims)) - c.attrs().get_float("correction");
  Var mean = b.mean(x, dims, /*keepdim=*/true);
  if ((dims.empty() || x.rank() == 0) && dof <= 0) {
    // PyTorch's var_backward special-cases the full reduction with no degrees of freedom:
    // g * (x == mean ? nan : +inf), so +inf whatever the side of the mean (2/0 * (x - mean)
    // would give -inf below it) and for dof < 0 too (2/dof would be finite and negative).
    Var factor = b.where(b.eq(x, mean), b.scalar(std::numeric_limits<double>::quiet_NaN(), mean.dtype()),
                         b.scalar(std::numeric_limits<double>::infinity(), mean.dtype()));
    return restore(c, g) * factor;
  }
  // Over given dims PyTorch divides by (n - correction) as it is: 0 gives inf (nan where x
  // equals its mean), a negative dof a finite negative factor.
  return (restore(c, g) * (2.0 / dof)) * (x - mean);
}

// prod's gradient is the product of the other elements of the slice. Without division by
// zero: no zero in the slice -> result / x; exactly one zero -> the product of the non-zero
// elements at the zero, 0 elsewhere; two or more zeros -> 0.
Var prod_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var x = c.input(0);
  if (x.rank() == 0) return g;
  DType dt = c.result().dtype();
  auto dim = c.attrs().opt_int("dim");
  Var xr = b.to(x, dt);
  Var zero = b.scalar(0, dt);
  Var is_zero = b.eq(xr, zero);
  Var zeros = b.sum(is_zero, reduced_dims(c), /*keepdim=*/true);
  Var x_safe = b.where(is_zero, b.scalar(1, dt), xr);
  Var without_zeros = b.prod(x_safe, dim, /*keepdim=*/true);
  Var no_zero = restore(c, c.result()) / x_safe;
  Var one_zero = b.where(is_zero, without_zeros, zero);
  Var no_zeros = b.eq(zeros, b.scalar(0, zeros.dtype()));
  Var one_zero_only = b.eq(zeros, b.scalar(1, zeros.dtype()));
  Var factor = b.where(no_zeros, no_zero, b.where(one_zero_only, one_zero, zero));
  return restore(c, g) * factor;
}

// logsumexp_backward: g * exp(x - result), both broadcast back over the reduced dims.
Var logsumexp_grad(VjpContext& c, Var g) {
  Var x = c.input(0);
  return restore(c, g) * c.b.exp(x - restore(c, c.result()));
}

}  // namespace

void install_reduction_vjps() {
  rule(Op::Logsumexp, logsumexp_grad);
  rule(Op::Sum, sum_grad);
  rule(Op::Mean, mean_grad);
  rule(Op::Amax, minmax_grad);
  rule(Op::Amin, minmax_grad);
  rule(Op::Var, var_grad);
  rule(Op::Prod, prod_grad);
}

}  // namespace kiln::autograd
