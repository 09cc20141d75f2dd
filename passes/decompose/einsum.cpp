// einsum as the ops it is made of, as PyTorch's sum-of-products path does it (left to right,
// no contraction-order search): per operand its diagonals (a repeated subscript) and the sums
// over subscripts no one else needs; then each next operand contracted with the result so far
// as one matrix product (batch subscripts, kept ones, summed ones: [batch, m, k] x [batch, k, n]),
// or a broadcast product when nothing is summed; last, the result's subscripts in its order.
// Broadcast (size-1) dims are expanded where the other side is larger.
#include <algorithm>
#include <numeric>

#include "ir/einsum.h"
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

// An intermediate: a value and, per dim, its label (distinct after the diagonals).
struct Term {
  Var v;
  std::vector<int> labels;
};

bool has(const std::vector<int>& ls, int l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); }

// The diagonal of every repeated label: its two dims moved last, merged, every (n+1)-th element.
Term take_diagonals(Builder& b, Term t) {
  for (;;) {
    size_t d1 = 0, d2 = 0;
    bool found = false;
    for (size_t i = 0; i < t.labels.size() && !found; ++i)
      for (size_t j = i + 1; j < t.labels.size() && !found; ++j)
        if (t.labels[i] == t.labels[j]) d1 = i, d2 = j, found = true;
    if (!found) return t;
    IntList perm;
    std::vector<int> labels;
    for (size_t i = 0; i < t.labels.size(); ++i)
      if (i != d1 && i != d2) perm.push_back(static_cast<int64_t>(i)), labels.push_back(t.labels[i]);
    perm.push_back(static_cast<int64_t>(d1));
    perm.push_back(static_cast<int64_t>(d2));
    Var x = b.permute(t.v, perm);
    Shape s = x.shape();
    const int64_t n = s.back();
    s.pop_back();
    s.back() = n * n;
    x = b.reshape(x, s);
    t.v = b.slice(x, static_cast<int64_t>(s.size()) - 1, 0, n * n, n + 1);
    labels.push_back(t.labels[d1]);
    t.labels = labels;
  }
}

// Sums `t` over its labels not in `keep`.
Term sum_out(Builder& b, Term t, const std::vector<int>& keep) {
  IntList dims;
  std::vector<int> labels;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (has(keep, t.labels[i])) labels.push_back(t.labels[i]);
    else dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return t;
  return {b.sum(t.v, dims, /*keepdim=*/false, t.v.meta().dtype), labels};  // (integers stay in their dtype)
}

// `t` permuted to `order` (its labels, each once) and each dim expanded to its label's size.
Var arranged(Builder& b, const Term& t, const std::vector<int>& order, const std::vector<int64_t>& sizes) {
  IntList perm;
  Shape full;
  for (int l : order) {
    perm.push_back(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin());
    full.push_back(sizes[static_cast<size_t>(l)]);
  }
  Var x = b.permute(t.v, perm);
  return b.expand(x, full);
}

int64_t size_of(const std::vector<int>& labels, const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int l : labels) n *= sizes[static_cast<size_t>(l)];
  return n;
}

// a and b contracted over the labels they share that `keep` does not hold.
Term contract(Builder& b, const Term& x, const Term& y, const std::vector<int>& keep, const std::vector<int64_t>& sizes) {
  std::vector<int> batch, summed, x_only, y_only;
  for (int l : x.labels) {
    if (!has(y.labels, l)) x_only.push_back(l);
    else if (has(keep, l)) batch.push_back(l);
    else summed.push_back(l);
  }
  for (int l : y.labels)
    if (!has(x.labels, l)) y_only.push_back(l);
  auto cat = [](std::vector<int> a, const std::vector<int>& c) {
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  const int64_t B = size_of(batch, sizes), M = size_of(x_only, sizes), K = size_of(summed, sizes), N = size_of(y_only, sizes);
  Var xm = b.reshape(arranged(b, x, cat(cat(batch, x_only), summed), sizes), {B, M, K});
  Var ym = b.reshape(arranged(b, y, cat(cat(batch, summed), y_only), sizes), {B, K, N});
  // Nothing summed: a broadcast product, which fuses with its neighbours.
  Var r = summed.empty() ? b.reshape(xm, {B, M, 1}) * b.reshape(ym, {B, 1, N}) : b.matmul(xm, ym);
  std::vector<int> labels = cat(cat(batch, x_only), y_only);
  Shape shape;
  for (int l : labels) shape.push_back(sizes[static_cast<size_t>(l)]);
  return {b.reshape(r, shape), labels};
}

std::vector<Value> einsum(DecompositionContext& c) {
  Builder& b = c.b;
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (int i = 0; i < c.num_inputs(); ++i) {
    ranks.push_back(c.input(i).rank());
    shapes.push_back(c.input(i).shape());
  }
  const EinsumSpec spec = parse_einsum(c.attrs().get_string("equation"), ranks);
  const std::vector<int64_t> sizes = einsum_label_sizes(spec, shapes);
  // The labels operands after `i` or the result still need.
  auto needed_after = [&](size_t i) {
    std::vector<int> need = spec.output;
    for (size_t j = i + 1; j < spec.inputs.size(); ++j) need.insert(need.end(), spec.inputs[j].begin(), spec.inputs[j].end());
    return need;
  };
  Term acc;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    Term t = take_diagonals(b, Term{c.input(static_cast<int>(i)), spec.inputs[i]});
    std::vector<int> keep = needed_after(i);
    if (i > 0) keep.insert(keep.end(), acc.labels.begin(), acc.labels.end());
    t = sum_out(b, t, keep);
    if (i == 0) {
      acc = t;
      continue;
    }
    std::vector<int> keep_acc = needed_after(i);
    keep_acc.insert(keep_acc.end(), t.labels.begin(), t.labels.end());
    acc = contract(b, sum_out(b, acc, keep_acc), t, needed_after(i), sizes);
  }
  acc = sum_out(b, acc, spec.output);
  Var out = arranged(b, acc, spec.output, sizes);
  return {b.reshape(b.to(out, c.out_meta().dtype), c.out_meta().shape)};
}

}  // namespace

void install_einsum() { register_decomposition(Op::Einsum, einsum); }

}  // namespace kiln::decompositions
