#include "passes/attention_math.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kiln::attention {

namespace {
Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
}  // namespace

DType compute_dtype(DType dt) { return dt == DType::F16 || dt == DType::BF16 ? DType::F32 : dt; }

std::optional<std::string> why_not_flash(const Node& n) {
  const Attrs& a = n.attrs();
  if (n.inputs().size() > 3) return std::string("it has an attn_mask (the flash kernels take is_causal only)");
  if (a.get_float("dropout_p") != 0) return fmt::format("dropout_p is {} (the flash kernels draw no dropout)", a.get_float("dropout_p"));
  const Shape &q = n.input(0).meta().shape, &k = n.input(1).meta().shape, &v = n.input(2).meta().shape;
  if (batch_of(k) != batch_of(q) || batch_of(v) != batch_of(q))
    return fmt::format("query's batch dims {}, key's {} and value's {} differ (broadcast)", shape_str(batch_of(q)),
                       shape_str(batch_of(k)), shape_str(batch_of(v)));
  int64_t widest = std::max(q.back(), v.back());
  if (widest > kMaxFlashHead) return fmt::format("head dim {} is wider than the flash kernels' {}", widest, kMaxFlashHead);
  return std::nullopt;
}

double scale_of(const Node& n) {
  return n.attrs().opt_float("scale").value_or(1.0 / std::sqrt(static_cast<double>(n.input(0).meta().shape.back())));
}

Weights explicit_weights(Builder& b, const Node& n) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Attrs& a = n.attrs();
  DType acc = compute_dtype(n.input(0).meta().dtype);
  Var q = b.to(b.wrap(n.input(0)), acc), k = b.to(b.wrap(n.input(1)), acc);
  int64_t L = q.shape()[q.rank() - 2], S = k.shape()[k.rank() - 2];
  // The scores over the broadcast batch of all three inputs (value's too: dropout draws one
  // mask element per score of the result's batch, as the reference).
  Shape batch = broadcast_shapes(broadcast_shapes(batch_of(q.shape()), batch_of(k.shape())), batch_of(n.input(2).meta().shape));
  Shape scores_shape = batch;
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  Var s = b.expand(b.matmul(q, b.transpose(k, -2, -1)) * scale_of(n), scores_shape);
  Var minus_inf = b.scalar(-kInf, acc);
  if (a.get_bool("is_causal")) s = b.where(b.le(b.arange(S), b.reshape(b.arange(L), {L, 1})), s, minus_inf);
  if (n.inputs().size() > 3) {
    Var mask = b.wrap(n.input(3));
    s = mask.dtype() == DType::Bool ? b.where(mask, s, minus_inf) : s + b.to(mask, acc);
  }
  Weights w;
  if (S == 0 || numel(scores_shape) == 0) {
    w.weights = w.dropped = b.zeros(scores_shape, acc);
    return w;
  }
  // A row whose every score is -inf (nothing attended) gets weights 0, not softmax's 0/0: its
  // scores become 0 before the softmax and its weights 0 after, so no NaN reaches a gradient
  // either. The row max only feeds a comparison: no gradient flows through it.
  Var none = b.eq(b.amax(s, {-1}, /*keepdim=*/true), minus_inf);
  Var zero = b.scalar(0, acc);
  w.weights = b.where(none, zero, b.op(Op::Softmax, {b.where(none, zero, s)}, Attrs{{"dim", int64_t{-1}}}));
  double p = a.get_float("dropout_p");
  w.dropped = p == 0 ? w.weights
                     : b.op(Op::Dropout, {w.weights}, Attrs{{"p", p}, {"train", true}, {"seed", a.get_int("seed")}});
  return w;
}

}  // namespace kiln::attention
