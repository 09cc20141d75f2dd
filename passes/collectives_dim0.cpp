#include "passes/collectives_dim0.h"

#include "ir/builder.h"

namespace kiln {

namespace {

// The dim a collective joins or splits, and whether a dim before it is more than 1.
int64_t collective_dim(const Node& n) {
  const int64_t rank = n.input(0).meta().rank();
  const int64_t d = n.attrs().get_int("dim");
  return d < 0 ? d + rank : d;
}

}  // namespace

bool collective_needs_dim0_rewrite(const Node& n) {
  if (n.op() != Op::AllGather && n.op() != Op::ReduceScatter) return false;
  const Shape& s = n.input(0).meta().shape;
  const int64_t d = collective_dim(n);
  for (int64_t i = 0; i < d; ++i)
    if (s[static_cast<size_t>(i)] != 1) return true;
  return false;
}

namespace {

// all_gather(x [A..., n, B...], dim=d) = the ranks' x joined along d:
// gather x with d moved to the front, then move the rank dim back in front of d.
Value gather_along_front(Builder& b, const Node& n) {
  const Shape& s = n.input(0).meta().shape;
  const int64_t d = collective_dim(n), r = static_cast<int64_t>(s.size()), world = n.attrs().get_int("world_size");
  IntList to_front{d};
  for (int64_t i = 0; i < r; ++i)
    if (i != d) to_front.push_back(i);
  Var front = b.contiguous(b.permute(n.input(0), to_front).v);
  Var joined = b.op(Op::AllGather, {front.v}, Attrs{{"world_size", world}, {"dim", int64_t(0)}});
  // [world, n, A..., B...] -> [A..., world, n, B...] -> [A..., world*n, B...]
  Shape split{world};
  for (int64_t i : to_front) split.push_back(s[static_cast<size_t>(i)]);
  IntList back;
  for (int64_t i = 0; i < d; ++i) back.push_back(i + 2);
  back.push_back(0);
  back.push_back(1);
  for (int64_t i = d + 1; i < r; ++i) back.push_back(i + 1);
  Var moved = b.permute(b.reshape(joined.v, split).v, back);
  return b.reshape(moved.v, n.meta().shape).v;
}

// reduce_scatter(x [A..., world*m, B...], dim=d): rank k's part is [.., k*m:(k+1)*m, ..]; with
// the parts laid out first, [world, A..., m, B...], it is the k-th block of dim 0.
Value scatter_along_front(Builder& b, const Node& n) {
  const Shape& s = n.input(0).meta().shape;
  const int64_t d = collective_dim(n), r = static_cast<int64_t>(s.size()), world = n.attrs().get_int("world_size");
  const int64_t m = s[static_cast<size_t>(d)] / world;
  Shape parts;  // [A..., world, m, B...]
  for (int64_t i = 0; i < r; ++i) {
    if (i == d) {
      parts.push_back(world);
      parts.push_back(m);
    } else {
      parts.push_back(s[static_cast<size_t>(i)]);
    }
  }
  IntList front{d};  // [world, A..., m, B...]
  for (int64_t i = 0; i < r + 1; ++i)
    if (i != d) front.push_back(i);
  Var laid = b.contiguous(b.permute(b.reshape(n.input(0), parts).v, front).v);
  int64_t before = 1;
  for (int64_t i = 0; i < d; ++i) before *= s[static_cast<size_t>(i)];
  Shape flat{world * before};
  for (int64_t i = d; i < r; ++i) flat.push_back(i == d ? m : s[static_cast<size_t>(i)]);
  Attrs a = n.attrs();
  a.set("dim", int64_t(0));
  Var mine = b.op(Op::ReduceScatter, {b.reshape(laid.v, flat).v}, a);  // [A*..., m, B...]
  return b.reshape(mine.v, n.meta().shape).v;
}

}  // namespace

bool run_collectives_dim0(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (!collective_needs_dim0_rewrite(*n)) continue;
    Builder b(g, n);
    Value v = n->op() == Op::AllGather ? gather_along_front(b, *n) : scatter_along_front(b, *n);
    g.replace_all_uses(n->result(0), v);
    g.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
