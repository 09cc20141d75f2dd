// Derivative rules of matrix products and indexing: matmul (every torch.matmul case), bmm,
// linear, addmm, gather, scatter_add, scatter, and sort and topk (which move values). Operands
// that broadcast over batch dims get their gradient summed back with sum_to.
#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

bool wants(const VjpContext& c, int i) {
  return c.needs_grad[static_cast<size_t>(i)] && is_floating(c.node.input(i).meta().dtype);
}

Var mT(Builder& b, Value x) { return b.transpose(x, -2, -1); }

// torch.matmul: 1-d operands are promoted to matrices ([k] -> [1,k] on the left, [k,1] on
// the right) and the result's matching dim is dropped, so the gradient gets that dim back,
// takes the batched product, and is summed over the batch dims its operand was broadcast in.
std::vector<Value> matmul_backward(VjpContext& c) {
  Builder& b = c.b;
  Var a = c.input(0), m = c.input(1), g = c.grad();
  bool want_a = wants(c, 0), want_b = wants(c, 1);
  std::vector<Value> grads(2);
  if (a.rank() == 1 && m.rank() == 1) {  // dot product: g is 0-d
    if (want_a) grads[0] = g * m;
    if (want_b) grads[1] = g * a;
    return grads;
  }
  Var A = a.rank() == 1 ? b.unsqueeze(a, 0) : a;
  Var B = m.rank() == 1 ? b.unsqueeze(m, -1) : m;
  Var G = g;
  if (m.rank() == 1) G = b.unsqueeze(G, G.rank());
  if (a.rank() == 1) G = b.unsqueeze(G, G.rank() - 1);
  if (want_a) grads[0] = b.reshape(b.sum_to(b.matmul(G, mT(b, B)), A.shape()), a.shape());
  if (want_b) grads[1] = b.reshape(b.sum_to(b.matmul(mT(b, A), G), B.shape()), m.shape());
  return grads;
}

std::vector<Value> bmm_backward(VjpContext& c) {
  Builder& b = c.b;
  std::vector<Value> grads(2);
  if (wants(c, 0)) grads[0] = b.bmm(c.grad(), mT(b, c.input(1)));
  if (wants(c, 1)) grads[1] = b.bmm(mT(b, c.input(0)), c.grad());
  return grads;
}

// linear(x, W, b) = x @ W^T + b, with W [out, in] (or [in]: the out dim is dropped).
std::vector<Value> linear_backward(VjpContext& c) {
  Builder& b = c.b;
  Var x = c.input(0), w = c.input(1), g = c.grad();
  std::vector<Value> grads(c.node.inputs().size());
  int64_t in_features = w.shape().back();
  bool vector_weight = w.rank() == 1;
  if (wants(c, 0)) {
    grads[0] = vector_weight ? b.unsqueeze(g, g.rank()) * w : b.matmul(g, w);
  }
  if (wants(c, 1)) {
    // Every batch row adds its outer product g_row^T x_row: one [out, rows] @ [rows, in].
    int64_t out_features = vector_weight ? 1 : w.shape()[0];
    Var g2 = b.reshape(g, {-1, out_features});
    Var x2 = b.reshape(x, {-1, in_features});
    grads[1] = b.reshape(b.matmul(b.transpose(g2, 0, 1), x2), w.shape());
  }
  if (grads.size() > 2 && wants(c, 2)) grads[2] = b.sum_to(g, c.node.input(2).meta().shape);
  return grads;
}

// addmm(self, m1, m2, beta, alpha) = beta * self + alpha * (m1 @ m2), self broadcast.
std::vector<Value> addmm_backward(VjpContext& c) {
  Builder& b = c.b;
  double beta = c.attrs().get_float("beta"), alpha = c.attrs().get_float("alpha");
  Var g = c.grad();
  std::vector<Value> grads(3);
  if (wants(c, 0)) grads[0] = b.sum_to(beta == 1 ? g : g * beta, c.node.input(0).meta().shape);
  if (wants(c, 1) || wants(c, 2)) {
    Var ga = alpha == 1 ? g : g * alpha;
    if (wants(c, 1)) grads[1] = b.matmul(ga, mT(b, c.input(2)));
    if (wants(c, 2)) grads[2] = b.matmul(mT(b, c.input(1)), ga);
  }
  return grads;
}

// `x` padded with zeros at the end of each dim up to `shape` (never smaller than x's).
Var pad_to(Builder& b, Var x, const Shape& shape) {
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t missing = shape[static_cast<size_t>(d)] - x.shape()[static_cast<size_t>(d)];
    if (missing <= 0) continue;
    Shape zs = x.shape();
    zs[static_cast<size_t>(d)] = missing;
    x = b.cat({x, b.zeros(zs, x.dtype())}, d);
  }
  return x;
}

std::vector<Value> gather_backward(VjpContext& c) {
  std::vector<Value> grads(2);
  if (!wants(c, 0)) return grads;
  Builder& b = c.b;
  const TensorMeta& self = c.node.input(0).meta();
  int64_t dim = c.attrs().get_int("dim");
  grads[0] = b.scatter_add(b.zeros(self.shape, self.dtype), c.input(1), c.grad(), dim);
  return grads;
}

// scatter_add reads src only where index has elements; src's elements past the index's
// extent get zero gradient.
std::vector<Value> scatter_add_backward(VjpContext& c) {
  std::vector<Value> grads(3);
  Builder& b = c.b;
  if (wants(c, 0)) grads[0] = c.grad();
  if (wants(c, 2)) {
    Var taken = b.gather(c.grad(), c.input(1), c.attrs().get_int("dim"));
    grads[2] = pad_to(b, taken, c.node.input(2).meta().shape);
  }
  return grads;
}

// scatter: self's gradient where nothing was written over it (its elements written get zero),
// src's the gradient at the places it was written to (PyTorch's: gather, for every element,
// also one whose write a later one overwrote).
// sort and topk move values: each one's gradient goes back where it came from (a row's indices
// differ, so the scatter_add into zeros adds nothing twice; topk's values not kept get zero).
std::vector<Value> sort_backward(VjpContext& c) {
  std::vector<Value> grads(1);
  if (!wants(c, 0) || !c.grad_outputs[0]) return grads;
  Builder& b = c.b;
  const TensorMeta& self = c.node.input(0).meta();
  if (self.rank() == 0) {
    grads[0] = c.grad();
    return grads;
  }
  grads[0] = b.scatter_add(b.zeros(self.shape, self.dtype), c.result(1), c.grad(), c.attrs().get_int("dim"));
  return grads;
}

// `x` cut at the end of each dim down to `shape` (never larger than x's): the part of a scatter's
// src that its index reads.
Var crop_to(Builder& b, Var x, const Shape& shape) {
  for (int64_t d = 0; d < x.rank(); ++d)
    if (shape[static_cast<size_t>(d)] < x.shape()[static_cast<size_t>(d)]) x = b.slice(x, d, 0, shape[static_cast<size_t>(d)]);
  return x;
}

// scatter_fold (PyTorch's scatter_reduce derivatives). amax/amin: the gradient of each result
// element shared evenly by the elements equal to it (self's and src's). prod: an element's
// gradient is the product of the others: result / x where no factor is 0; where exactly one is,
// the product of the nonzero ones for that one and 0 for the rest; where two or more are, 0.
std::vector<Value> scatter_fold_backward(VjpContext& c) {
  std::vector<Value> grads(3);
  Builder& b = c.b;
  const int64_t dim = c.attrs().get_int("dim");
  const std::string& reduce = c.attrs().get_string("reduce");
  Var self = c.input(0), index = c.input(1), g = c.grad(), r = c.result(0);
  const Shape& src_shape = c.node.input(2).meta().shape;
  Var src = crop_to(b, c.input(2), index.shape());
  const DType dt = self.dtype();
  Var zero = b.scalar(0, dt);
  auto at_src = [&](Var x) { return b.gather(x, index, dim); };  // x at each src element's destination
  if (reduce == "amax" || reduce == "amin") {
    Var self_is = b.eq(self, r), src_is = b.eq(src, at_src(r));
    Var ties = b.scatter_add(b.to(self_is, dt), index, b.to(src_is, dt), dim);
    Var share = g / ties;  // read only where an element equals its result: ties >= 1 there
    if (wants(c, 0)) grads[0] = b.where(self_is, share, zero);
    if (wants(c, 2)) grads[2] = pad_to(b, b.where(src_is, at_src(share), zero), src_shape);
    return grads;
  }
  Var one = b.scalar(1, dt);
  Var self_zero = b.eq(self, zero), src_zero = b.eq(src, zero);
  Var nonzero_product = b.op(Op::ScatterFold, {b.where(self_zero, one, self), index, b.where(src_zero, one, src)},
                             Attrs{{"dim", dim}, {"reduce", std::string("prod")}});
  Var zeros_count = b.scatter_add(b.to(self_zero, dt), index, b.to(src_zero, dt), dim);
  // d(result)/dx for x at its destination's product p (of the nonzero factors) and count z of zeros.
  auto others = [&](Var x, Var x_zero, Var p, Var z) {
    return b.where(b.eq(z, zero), p / x, b.where(b.logical_and(x_zero, b.eq(z, one)), p, zero));
  };
  if (wants(c, 0)) grads[0] = g * others(self, self_zero, nonzero_product, zeros_count);
  if (wants(c, 2))
    grads[2] = pad_to(b, at_src(g) * others(src, src_zero, at_src(nonzero_product), at_src(zeros_count)), src_shape);
  return grads;
}

std::vector<Value> scatter_backward(VjpContext& c) {
  std::vector<Value> grads(3);
  Builder& b = c.b;
  const int64_t dim = c.attrs().get_int("dim");
  const TensorMeta& index = c.node.input(1).meta();
  if (wants(c, 0)) grads[0] = b.scatter(c.grad(), c.input(1), b.zeros(index.shape, c.grad().dtype()), dim);
  if (wants(c, 2)) grads[2] = pad_to(b, b.gather(c.grad(), c.input(1), dim), c.node.input(2).meta().shape);
  return grads;
}

}  // namespace

void install_linalg_vjps() {
  register_vjp(Op::Matmul, matmul_backward);
  register_vjp(Op::Bmm, bmm_backward);
  register_vjp(Op::Linear, linear_backward);
  register_vjp(Op::Addmm, addmm_backward);
  register_vjp(Op::Gather, gather_backward);
  register_vjp(Op::ScatterAdd, scatter_add_backward);
  register_vjp(Op::Scatter, scatter_backward);
  register_vjp(Op::ScatterFold, scatter_fold_backward);
  register_vjp(Op::Sort, sort_backward);
  register_vjp(Op::Topk, sort_backward);
}

}  // namespace kiln::autograd
