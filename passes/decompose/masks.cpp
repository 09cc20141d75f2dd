// Decompositions of tril, triu and dropout: a mask (from aranges, or from rand) and a where
// or a multiply, all pointwise so they fuse into their consumers.
#include <cmath>

#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

// [rows, cols] bool: true where column c of row r is kept, c <= r + diagonal (lower) or
// c >= r + diagonal (upper).
Var triangle_mask(Builder& b, int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  Var r = b.reshape(b.arange(rows), {rows, 1});
  if (diagonal != 0) r = r + static_cast<double>(diagonal);
  Var c = b.arange(cols);
  return lower ? b.le(c, r) : b.ge(c, r);
}

// where(mask, x, 0) over the last two dims; the size= form is the mask itself as ones and
// zeros of its dtype.
Values triangle(DecompositionContext& c, bool lower) {
  Builder& b = c.b;
  const TensorMeta& out = c.out_meta();
  int64_t rank = out.rank();
  Var mask = triangle_mask(b, out.shape[rank - 2], out.shape[rank - 1], c.attrs().get_int("diagonal"), lower);
  Var zero = b.scalar(0, out.dtype);
  if (c.num_inputs() > 0) return {b.where(mask, c.input(0), zero)};
  if (rank == 2) return {b.to(mask, out.dtype)};
  return {b.where(mask, b.full(out.shape, 1, out.dtype), zero)};  // batch dims: a full result
}

Values tril(DecompositionContext& c) { return triangle(c, true); }
Values triu(DecompositionContext& c) { return triangle(c, false); }

// x * where(rand >= p, 1/(1-p), 0), from the very stream the reference draws (rand's element
// i is dropout's element i), so the masks agree bit for bit.
Values dropout(DecompositionContext& c) {
  Builder& b = c.b;
  Var x = c.input(0);
  double p = c.attrs().get_float("p");
  // Eval mode, and p = 0 (every element kept, times 1), are the identity.
  if (!c.attrs().get_bool("train") || p == 0) return {x};
  // p = 1 drops every element: x * 0, so nan stays nan, as the reference.
  if (p == 1) return {x * 0.0};
  Var r = b.op(Op::Rand, {},
               Attrs{{"size", IntList(x.shape())}, {"seed", c.attrs().get_int("seed")}, {"dtype", DType::F32}});
  // rand holds multiples of 2^-24, so r >= p exactly when r >= ceil(p * 2^24) / 2^24, a number
  // f32 holds exactly: comparing in f32 keeps the reference's mask (p itself would round).
  constexpr double kSteps = 16777216.0;
  Var keep = b.ge(r, b.scalar(std::ceil(p * kSteps) / kSteps, DType::F32));
  return {x * b.where(keep, b.scalar(1.0 / (1.0 - p), x.dtype()), b.scalar(0, x.dtype()))};
}

}  // namespace

void install_masks() {
  register_decomposition(Op::Tril, tril);
  register_decomposition(Op::Triu, triu);
  register_decomposition(Op::Dropout, dropout);
}

}  // namespace kiln::decompositions
