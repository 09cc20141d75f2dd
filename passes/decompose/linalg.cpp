// Decompositions of linear, addmm and embedding into matmul, pointwise ops and gather.
#include <variant>

#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

using Values = std::vector<Value>;

// input @ weight^T (+ bias). weight is [out, in]; a 1-d weight is already the column.
Values linear(DecompositionContext& c) {
  Builder& b = c.b;
  Var w = c.input(1);
  Var y = b.matmul(c.input(0), w.rank() == 2 ? b.transpose(w, 0, 1) : w);
  if (c.num_inputs() > 2) y = y + c.input(2);
  return {y};
}

// A Scalar attribute (beta, alpha) as the reference applies it: for integer tensors a float
// is truncated (beta=1.5 acts as 1), as PyTorch converts it to the tensor's type.
double scale_attr(const Attrs& a, const char* name, DType dt) {
  if (is_floating(dt)) return a.get_float(name);
  const AttrValue& v = *a.find(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return static_cast<double>(static_cast<int64_t>(a.get_float(name)));
}

// alpha * (mat1 @ mat2) + beta * self; scales of 1 add no multiply.
Values addmm(DecompositionContext& c) {
  DType dt = c.out_meta().dtype;
  double beta = scale_attr(c.attrs(), "beta", dt), alpha = scale_attr(c.attrs(), "alpha", dt);
  Var y = c.b.matmul(c.input(1), c.input(2));
  if (alpha != 1) y = y * alpha;
  // beta == 0 drops self altogether, so nan and inf in it do not reach the result (PyTorch).
  if (beta == 0) return {y};
  Var self = c.input(0);
  return {y + (beta == 1 ? self : self * beta)};
}

// Row idx[i] of weight [V, D] for every index: a gather along dim 0 with each index repeated
// across the D columns, on the flattened indices, then shaped back to idx.shape + [D].
// padding_idx only changes the gradient.
Values embedding(DecompositionContext& c) {
  Builder& b = c.b;
  Var weight = c.input(0), idx = c.input(1);
  int64_t n = idx.meta().numel(), d = weight.shape()[1];
  Var rows = b.expand(b.reshape(idx, {n, 1}), {n, d});
  Shape out = idx.shape();
  out.push_back(d);
  return {b.reshape(b.gather(weight, rows, 0), out)};
}

}  // namespace

void install_linalg() {
  register_decomposition(Op::Linear, linear);
  register_decomposition(Op::Addmm, addmm);
  register_decomposition(Op::Embedding, embedding);
}

}  // namespace kiln::decompositions
