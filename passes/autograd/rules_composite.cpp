// Derivative rules of composite ops: softmax, log_softmax, layer_norm, embedding, the class
// losses, dropout, tril/triu. Each is written in the ops the composite decomposes into (no
// backward-only kernels), so the backward graph fuses and compiles like any other graph.
#include <string>

#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

bool wants(const VjpContext& c, int i) {
  return c.needs_grad[static_cast<size_t>(i)] && is_floating(c.node.input(i).meta().dtype);
}

// softmax(x, dim, dtype): y is computed in `dtype` (the result's), so the gradient is too,
// then cast back to the input's dtype (PyTorch's _softmax_backward_data(..., self.dtype)).
std::vector<Value> softmax_backward(VjpContext& c) {
  if (!wants(c, 0)) return {Value{}};
  Builder& b = c.b;
  int64_t dim = c.attrs().get_int("dim");
  Var y = c.result(), g = c.grad();
  Var gx = y * (g - b.sum(g * y, {dim}, /*keepdim=*/true));
  return {b.to(gx, c.node.input(0).meta().dtype)};
}

std::vector<Value> log_softmax_backward(VjpContext& c) {
  if (!wants(c, 0)) return {Value{}};
  Builder& b = c.b;
  int64_t dim = c.attrs().get_int("dim");
  Var y = c.result(), g = c.grad();
  Var gx = g - b.exp(y) * b.sum(g, {dim}, /*keepdim=*/true);
  return {b.to(gx, c.node.input(0).meta().dtype)};
}

// layer_norm over the trailing dims of normalized_shape. Mean and rstd are recomputed from
// the input (the forward op does not return them). With xhat = (x - mean) * rstd and
// gy = g * weight:  dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)).
std::vector<Value> layer_norm_backward(VjpContext& c) {
  Builder& b = c.b;
  const Node& node = c.node;
  size_t n_in = node.inputs().size();
  std::vector<Value> grads(n_in);
  bool has_weight = n_in > 1, has_bias = n_in > 2;
  bool want_x = wants(c, 0), want_w = has_weight && wants(c, 1), want_b = has_bias && wants(c, 2);
  if (!want_x && !want_w && !want_b) return grads;
  Var g = c.grad();
  if (want_b) grads[2] = b.sum_to(g, node.input(2).meta().shape);
  if (!want_x && !want_w) return grads;

  int64_t k = static_cast<int64_t>(c.attrs().get_ints("normalized_shape").size());
  IntList dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  Var x = c.input(0);
  Var xc = x - b.mean(x, dims, true);
  Var rstd = b.rsqrt(b.mean(xc * xc, dims, true) + c.attrs().get_float("eps"));
  Var xhat = xc * rstd;
  if (want_w) grads[1] = b.sum_to(g * xhat, node.input(1).meta().shape);
  if (want_x) {
    Var gy = has_weight ? g * c.input(1) : g;
    grads[0] = rstd * (gy - b.mean(gy, dims, true) - xhat * b.mean(gy * xhat, dims, true));
  }
  return grads;
}

// embedding(weight [V,D], indices S) -> S+[D]: every output row adds into the weight row it
// read, so the gradient is a scatter_add of the gradient's rows into zeros [V,D]. Rows read at
// padding_idx get none. A negative padding_idx means none (torch.nn.functional.embedding has
// already turned a negative index into V + index by the time the op is built).
std::vector<Value> embedding_backward(VjpContext& c) {
  std::vector<Value> grads(2);
  if (!wants(c, 0)) return grads;
  Builder& b = c.b;
  const TensorMeta& w = c.node.input(0).meta();
  Var idx = c.input(1);
  int64_t rows = idx.meta().numel(), d = w.shape[1];
  if (rows == 0 || d == 0) {
    grads[0] = b.zeros(w.shape, w.dtype);
    return grads;
  }
  Var flat_idx = b.reshape(idx, {rows});
  Var flat_g = b.reshape(c.grad(), {rows, d});
  int64_t padding = c.attrs().get_int("padding_idx");
  if (padding >= 0) {
    Var keep = b.unsqueeze(b.ne(flat_idx, b.scalar(static_cast<double>(padding), idx.dtype())), 1);
    flat_g = b.where(keep, flat_g, b.scalar(0.0, flat_g.dtype()));
  }
  Var index = b.expand(b.unsqueeze(flat_idx, 1), {rows, d});
  grads[0] = b.scatter_add(b.zeros(w.shape, w.dtype), index, flat_g, 0);
  return grads;
}

// The scale each row's gradient gets from the loss's reduction: g itself per row ("none"), or
// the 0-d g, divided for "mean" by the number of rows not ignored. Ignored rows get exactly 0
// through a where, not a product with the mask: PyTorch's nll_loss_backward never writes
// them, so they stay 0 when the scale is not finite (all rows ignored under "mean" is g / 0,
// and 0 * inf would be NaN), and when g itself is inf or NaN.
Var row_scale(Builder& b, const Attrs& a, Var g, Var valid) {
  const std::string& reduction = a.get_string("reduction");
  int64_t n = valid.shape()[0];
  Var zero = b.scalar(0, g.dtype());
  if (reduction == "none") return b.where(valid, b.reshape(g, {n}), zero);
  if (reduction == "sum") return b.where(valid, g, zero);
  return b.where(valid, g / b.sum(b.to(valid, g.dtype())), zero);
}

// cross_entropy / nll_loss on scores [C] (target 0-d) or [N,C] (target [N]), viewed as [N,C].
//   cross_entropy: d/dx = softmax(x) - ((1 - eps) * onehot + eps / C), per row scaled;
//   nll_loss:      d/dx = -scale at the target, 0 elsewhere (selected, not multiplied by the
//                  one-hot: PyTorch writes only the target's entry).
// A row of cross_entropy keeps softmax's NaN even when its scale is 0 (an ignored row of
// +inf or NaN logits), as PyTorch's log_softmax_backward gives g - exp(NaN) * 0 = NaN there.
std::vector<Value> class_loss_backward(VjpContext& c, bool with_softmax) {
  std::vector<Value> grads(2);
  if (!wants(c, 0)) return grads;
  Builder& b = c.b;
  const TensorMeta& xm = c.node.input(0).meta();
  DType dt = xm.dtype;
  int64_t classes = xm.shape.back(), n = xm.rank() == 2 ? xm.shape[0] : 1;
  Var target = b.reshape(c.input(1), {n});
  Var is_target = b.eq(b.unsqueeze(target, 1), b.arange(classes, target.dtype()));  // [N,C]
  Var ignore = b.scalar(static_cast<double>(c.attrs().get_int("ignore_index")), target.dtype());
  Var valid = b.ne(target, ignore);  // [N]
  Var scale = b.unsqueeze(row_scale(b, c.attrs(), c.grad(), valid), 1);  // [N,1]
  Var dx;
  if (with_softmax) {
    double eps = c.attrs().get_float("label_smoothing");
    Var x = b.reshape(c.input(0), {n, classes});
    Var p = b.op(Op::Softmax, {x}, Attrs{{"dim", int64_t{-1}}});
    Var onehot = b.to(is_target, dt);
    Var smoothed = eps > 0 ? onehot * (1 - eps) + eps / static_cast<double>(classes) : onehot;
    dx = (p - smoothed) * scale;
  } else {
    dx = b.where(is_target, -scale, b.scalar(0, dt));
  }
  grads[0] = b.reshape(dx, xm.shape);
  return grads;
}

// dropout is linear in its input with a mask fixed by the seed: its gradient is the same
// dropout (same p, seed, element order) applied to g; in eval mode it is the identity.
std::vector<Value> dropout_backward(VjpContext& c) {
  if (!wants(c, 0)) return {Value{}};
  if (!c.attrs().get_bool("train")) return {c.grad()};
  return {c.b.op(Op::Dropout, {c.grad()}, c.attrs())};
}

// tril/triu keep a fixed triangle: the gradient is the same triangle of g. Built from size=
// the op has no input and so nothing to differentiate.
std::vector<Value> triangle_backward(VjpContext& c) {
  if (c.node.inputs().empty()) return {};
  if (!wants(c, 0)) return {Value{}};
  Attrs a;
  a.set("diagonal", c.attrs().get_int("diagonal"));
  return {c.b.op(c.node.op(), {c.grad()}, a)};
}

}  // namespace

void install_composite_vjps() {
  register_vjp(Op::Softmax, softmax_backward);
  register_vjp(Op::LogSoftmax, log_softmax_backward);
  register_vjp(Op::LayerNorm, layer_norm_backward);
  register_vjp(Op::Embedding, embedding_backward);
  register_vjp(Op::CrossEntropy, [](VjpContext& c) { return class_loss_backward(c, true); });
  register_vjp(Op::NllLoss, [](VjpContext& c) { return class_loss_backward(c, false); });
  register_vjp(Op::Dropout, dropout_backward);
  register_vjp(Op::Tril, triangle_backward);
  register_vjp(Op::Triu, triangle_backward);
}

}  // namespace kiln::autograd
