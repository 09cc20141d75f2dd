// Decompositions of mean and var into sum, and of softmax, log_softmax and layer_norm into
// reductions and pointwise ops.
#include <algorithm>
#include <limits>

#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

// sum / count. dtype= converts the input first (the reference rounds each element to it);
// f16 and bf16 sum with dtype=f32 and round once.
Values mean(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype, acc = compute_dtype(dt);
  IntList dims = dims_attr(c.attrs());
  Var x = b.to(c.input(0), dt);
  Var total = b.sum(x, dims, c.attrs().get_bool("keepdim"), acc == dt ? std::nullopt : std::optional<DType>(acc));
  // No elements: 0 / 0 = nan, as the reference.
  return {b.to(total / static_cast<double>(reduced_count(x.meta(), dims)), dt)};
}

// sum((x - mean)^2) / max(0, N - correction): a zero divisor gives inf, or nan when every
// deviation is 0, as the reference.
Values var(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype;
  IntList dims = dims_attr(c.attrs());
  Var x = b.to(c.input(0), compute_dtype(dt));
  Var centered = x - b.mean(x, dims, /*keepdim=*/true);
  Var squares = b.sum(b.square(centered), dims, c.attrs().get_bool("keepdim"));
  double n = static_cast<double>(reduced_count(x.meta(), dims));
  return {b.to(squares / std::max(0.0, n - c.attrs().get_float("correction")), dt)};
}

// The input of softmax in the dtype it computes in: dtype= casts first, so values are rounded
// to it before the arithmetic.
Var softmax_input(DecompositionContext& c) {
  DType dt = c.out_meta().dtype;
  return c.b.to(c.b.to(c.input(0), dt), compute_dtype(dt));
}

// x - max(x) along dim, so exp() cannot overflow. A row of -inf gives -inf - -inf = nan, and
// so an all-nan row, as in the reference and PyTorch.
Var shifted(Builder& b, Var x, int64_t dim) { return x - b.amax(x, {dim}, /*keepdim=*/true); }

Values softmax(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype;
  int64_t dim = c.attrs().get_int("dim");
  Var x = softmax_input(c);
  if (x.meta().numel() == 0) return {b.to(x, dt)};  // amax has nothing to reduce
  Var e = b.exp(shifted(b, x, dim));
  return {b.to(e / b.sum(e, {dim}, /*keepdim=*/true), dt)};
}

Values log_softmax(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype;
  int64_t dim = c.attrs().get_int("dim");
  Var x = softmax_input(c);
  if (x.meta().numel() == 0) return {b.to(x, dt)};
  Var s = shifted(b, x, dim);
  return {b.to(s - b.log(b.sum(b.exp(s), {dim}, /*keepdim=*/true)), dt)};
}

// (x - mean) * rsqrt(var + eps) over the last len(normalized_shape) dims, with the biased
// variance (PyTorch normalizes with it), then * weight + bias when given.
Values layer_norm(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype, acc = compute_dtype(dt);
  auto k = static_cast<int64_t>(c.attrs().get_ints("normalized_shape").size());
  IntList dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  Var x = b.to(c.input(0), acc);
  Var centered = x - b.mean(x, dims, /*keepdim=*/true);
  Var variance = b.mean(b.square(centered), dims, /*keepdim=*/true);
  Var y = centered * b.rsqrt(variance + c.attrs().get_float("eps"));
  if (c.num_inputs() > 1) y = y * b.to(c.input(1), acc);
  if (c.num_inputs() > 2) y = y + b.to(c.input(2), acc);
  return {b.to(y, dt)};
}

// m + log(sum(exp(x - m))), m the max with +-inf replaced by 0 (a row of -inf is -inf, one
// holding +inf is +inf, as PyTorch's); an empty reduction is log(0) = -inf.
Values logsumexp(DecompositionContext& c) {
  Builder& b = c.b;
  const TensorMeta& out = c.out_meta();
  IntList dims = dims_attr(c.attrs());
  Var x = b.to(c.input(0), compute_dtype(out.dtype));
  if (reduced_count(x.meta(), dims) == 0) return {b.full(out.shape, -std::numeric_limits<double>::infinity(), out.dtype)};
  Var m = b.amax(x, dims, /*keepdim=*/true);
  Var inf = b.scalar(std::numeric_limits<double>::infinity(), x.dtype());
  m = b.where(b.eq(b.abs(m), inf), b.scalar(0, x.dtype()), m);
  Var r = b.log(b.sum(b.exp(x - m), dims, /*keepdim=*/true)) + m;
  return {b.to(b.reshape(r, out.shape), out.dtype)};
}

}  // namespace

void install_reductions() {
  register_decomposition(Op::Logsumexp, logsumexp);
  register_decomposition(Op::Mean, mean);
  register_decomposition(Op::Var, var);
  register_decomposition(Op::Softmax, softmax);
  register_decomposition(Op::LogSoftmax, log_softmax);
  register_decomposition(Op::LayerNorm, layer_norm);
}

}  // namespace kiln::decompositions
