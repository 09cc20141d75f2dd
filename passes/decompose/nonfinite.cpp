// Decompositions of isnan, isinf and nan_to_num into comparisons and wheres (pointwise: they
// fuse into their neighbours).
#include <limits>

#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// x != x: true for NaN only (and never for an integer).
Values isnan(DecompositionContext& c) { return {c.b.ne(c.input(0), c.input(0))}; }

Values isinf(DecompositionContext& c) {
  Builder& b = c.b;
  Var x = c.input(0);
  if (!is_floating(x.dtype())) return {b.ne(x, x)};  // all false
  return {b.eq(b.abs(x), b.scalar(kInf, x.dtype()))};
}

Values nan_to_num(DecompositionContext& c) {
  Builder& b = c.b;
  Var x = c.input(0);
  const DType dt = x.dtype();
  if (!is_floating(dt)) return {x};
  const Attrs& a = c.attrs();
  const double big = max_finite(dt);
  Var y = b.where(b.ne(x, x), b.scalar(a.opt_float("nan").value_or(0.0), dt), x);
  y = b.where(b.eq(x, b.scalar(kInf, dt)), b.scalar(a.opt_float("posinf").value_or(big), dt), y);
  return {b.where(b.eq(x, b.scalar(-kInf, dt)), b.scalar(a.opt_float("neginf").value_or(-big), dt), y)};
}

}  // namespace

void install_nonfinite() {
  register_decomposition(Op::Isnan, isnan);
  register_decomposition(Op::Isinf, isinf);
  register_decomposition(Op::NanToNum, nan_to_num);
}

}  // namespace kiln::decompositions
