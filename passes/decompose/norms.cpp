// Decompositions of rms_norm and group_norm into reductions and pointwise ops (computed in f32
// for 16-bit inputs, rounded once), which fuse as layer_norm's do.
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

std::vector<Value> rms_norm(DecompositionContext& c) {
  Builder& b = c.b;
  DType dt = c.out_meta().dtype, acc = compute_dtype(dt);
  auto k = static_cast<int64_t>(c.attrs().get_ints("normalized_shape").size());
  IntList dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  const double eps = c.attrs().opt_float("eps").value_or(machine_epsilon(dt));
  Var x = b.to(c.input(0), acc);
  Var y = x * b.rsqrt(b.mean(b.square(x), dims, /*keepdim=*/true) + eps);
  if (c.num_inputs() > 1) y = y * b.to(c.input(1), acc);
  return {b.to(y, dt)};
}

std::vector<Value> group_norm(DecompositionContext& c) {
  Builder& b = c.b;
  const TensorMeta& out = c.out_meta();
  DType dt = out.dtype, acc = compute_dtype(dt);
  const int64_t n = out.shape[0], ch = out.shape[1], g = c.attrs().get_int("num_groups");
  const int64_t per_group = n * g != 0 ? numel(out.shape) / (n * g) : 0;
  Var x = b.reshape(b.to(c.input(0), acc), {n, g, per_group});
  Var centered = x - b.mean(x, {2}, /*keepdim=*/true);
  Var variance = b.mean(b.square(centered), {2}, /*keepdim=*/true);
  Var y = b.reshape(centered * b.rsqrt(variance + c.attrs().get_float("eps")), out.shape);
  Shape per_channel{ch};
  for (size_t d = 2; d < out.shape.size(); ++d) per_channel.push_back(1);
  if (c.num_inputs() > 1) y = y * b.reshape(b.to(c.input(1), acc), per_channel);
  if (c.num_inputs() > 2) y = y + b.reshape(b.to(c.input(2), acc), per_channel);
  return {b.to(y, dt)};
}

}  // namespace

void install_norms() {
  register_decomposition(Op::RmsNorm, rms_norm);
  register_decomposition(Op::GroupNorm, group_norm);
}

}  // namespace kiln::decompositions
