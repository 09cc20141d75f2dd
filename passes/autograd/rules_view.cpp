// Derivative rules of views and shape ops. Each gradient undoes the view on the output
// gradient: reshape back, the inverse permutation, a sum over expanded dims, and for slice,
// cat and split the gradient placed back into (or cut out of) the input's extent.
#include <algorithm>

#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

// Whether input i gets a gradient: the caller wants it and it is floating-point.
bool wants(const VjpContext& c, int i) {
  return c.needs_grad[static_cast<size_t>(i)] && is_floating(c.node.input(i).meta().dtype);
}

// The gradient of a one-input op, or nothing when input 0 gets none.
std::vector<Value> unary(VjpContext& c, Var (*make)(VjpContext&)) {
  if (!wants(c, 0)) return {Value{}};
  return {make(c)};
}

// `x` with `before` zeros in front of it and `after` zeros behind it along `dim`.
Var pad_dim(Builder& b, Var x, int64_t dim, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return x;
  std::vector<Value> parts;
  auto zeros = [&](int64_t n) {
    Shape s = x.shape();
    s[static_cast<size_t>(dim)] = n;
    return b.zeros(s, x.dtype());
  };
  if (before > 0) parts.push_back(zeros(before));
  parts.push_back(x);
  if (after > 0) parts.push_back(zeros(after));
  return b.cat(parts, dim);
}

// Python slice bounds on a dim of size n, as meta_slice computes them.
struct SliceBounds {
  int64_t start, len, step;
};
SliceBounds slice_bounds(const Attrs& a, int64_t n) {
  auto clampi = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  int64_t step = a.get_int("step");
  int64_t start = clampi(a.opt_int("start").value_or(0));
  int64_t end = clampi(a.opt_int("end").value_or(n));
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  return {start, len, step};
}

// The gradient of x[start : end : step] along dim: g scattered back into zeros of the input's
// shape. For step > 1 each element of g is followed by step-1 zeros (unsqueeze, cat with
// zeros, reshape), which lays g out at stride `step`; then the block is padded to the input.
Var slice_backward(VjpContext& c) {
  Builder& b = c.b;
  const TensorMeta& in = c.node.input(0).meta();
  int64_t dim = normalize_dim(c.attrs().get_int("dim"), in.rank());
  int64_t n = in.shape[static_cast<size_t>(dim)];
  SliceBounds s = slice_bounds(c.attrs(), n);
  Var g = c.grad();
  if (s.len == 0) return b.zeros(in.shape, in.dtype);
  if (s.step > 1 && s.len > 1) {
    Var col = b.unsqueeze(g, dim + 1);  // [.., len, 1, ..]
    Shape zs = col.shape();
    zs[static_cast<size_t>(dim + 1)] = s.step - 1;
    Var spread = b.cat({col, b.zeros(zs, g.dtype())}, dim + 1);  // [.., len, step, ..]
    Shape flat = g.shape();
    flat[static_cast<size_t>(dim)] = s.len * s.step;
    int64_t span = (s.len - 1) * s.step + 1;  // the trailing zeros past the last element go
    g = b.slice(b.reshape(spread, flat), dim, 0, span, 1);
  }
  int64_t covered = g.shape()[static_cast<size_t>(dim)];
  return pad_dim(b, g, dim, s.start, n - s.start - covered);
}

std::vector<Value> cat_backward(VjpContext& c) {
  Builder& b = c.b;
  const Node& node = c.node;
  const TensorMeta& out = node.meta();
  int64_t dim = normalize_dim(c.attrs().get_int("dim"), out.rank());
  std::vector<Value> grads;
  int64_t at = 0;
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const TensorMeta& in = node.input(i).meta();
    // cat skips 1-d empty inputs of a higher-rank result; they take no part of the gradient.
    bool skipped = in.rank() != out.rank();
    int64_t size = skipped ? 0 : in.shape[static_cast<size_t>(dim)];
    if (!wants(c, i)) {
      grads.emplace_back();
    } else if (skipped || in.numel() == 0) {
      grads.push_back(b.zeros(in.shape, in.dtype));
    } else {
      grads.push_back(b.to(b.slice(c.grad(), dim, at, at + size, 1), in.dtype));
    }
    at += size;
  }
  return grads;
}

// Results without a gradient contribute zeros of their shape; the pieces are concatenated.
std::vector<Value> split_backward(VjpContext& c) {
  if (!wants(c, 0)) return {Value{}};
  Builder& b = c.b;
  const Node& node = c.node;
  const TensorMeta& in = node.input(0).meta();
  int64_t dim = normalize_dim(c.attrs().get_int("dim"), in.rank());
  std::vector<Value> pieces;
  bool any = false;
  for (int r = 0; r < node.num_results(); ++r) {
    const TensorMeta& m = node.meta(r);
    if (m.numel() == 0) continue;
    if (c.grad_outputs[static_cast<size_t>(r)]) {
      pieces.push_back(c.grad(r));
      any = true;
    } else {
      pieces.push_back(b.zeros(m.shape, m.dtype));
    }
  }
  if (!any) return {b.zeros(in.shape, in.dtype)};
  if (pieces.size() == 1) return {b.reshape(pieces[0], in.shape)};
  return {b.cat(pieces, dim)};
}

}  // namespace

void install_view_vjps() {
  register_vjp(Op::Reshape, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) { return c.b.reshape(c.grad(), c.node.input(0).meta().shape); });
  });
  register_vjp(Op::Squeeze, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) { return c.b.reshape(c.grad(), c.node.input(0).meta().shape); });
  });
  register_vjp(Op::Unsqueeze, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) { return c.b.reshape(c.grad(), c.node.input(0).meta().shape); });
  });
  register_vjp(Op::Permute, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) {
      IntList dims = c.attrs().get_ints("dims");
      int64_t rank = static_cast<int64_t>(dims.size());
      IntList inverse(dims.size());
      for (int64_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(normalize_dim(dims[static_cast<size_t>(i)], rank))] = i;
      return c.b.permute(c.grad(), inverse);
    });
  });
  register_vjp(Op::Transpose, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) {
      return c.b.transpose(c.grad(), c.attrs().get_int("dim0"), c.attrs().get_int("dim1"));
    });
  });
  register_vjp(Op::Expand, [](VjpContext& c) {
    return unary(c, [](VjpContext& c) { return c.b.sum_to(c.grad(), c.node.input(0).meta().shape); });
  });
  register_vjp(Op::Slice, [](VjpContext& c) { return unary(c, slice_backward); });
  register_vjp(Op::Cat, cat_backward);
  register_vjp(Op::Split, split_backward);
  register_vjp(Op::Contiguous, [](VjpContext& c) { return unary(c, [](VjpContext& c) { return c.grad(); }); });
}

}  // namespace kiln::autograd
