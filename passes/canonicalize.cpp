#include "passes/canonicalize.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/log.h"
#include "ir/meta/meta.h"
#include "ir/tensor_meta.h"
#include "passes/pattern.h"

namespace kiln {

namespace {

using namespace rewrite;

IntList normalized_dims(const IntList& dims, int64_t rank) {
  IntList out;
  for (int64_t d : dims) out.push_back(normalize_dim(d, rank));
  return out;
}

// transpose(transpose(x, a, b), c, d) is x when {a, b} == {c, d}.
RewriteFn undo_transpose(Var x, Var inner, Var outer) {
  return [=](const Match& m, Why& why) -> Rewrite {
    int64_t rank = m[x].meta().rank();
    auto pair = [rank](const Node* t) {
      IntList p = normalized_dims({t->attrs().get_int("dim0"), t->attrs().get_int("dim1")}, rank);
      std::sort(p.begin(), p.end());
      return p;
    };
    if (pair(m.node(inner)) != pair(m.node(outer))) return why.no("the transposes swap different dims");
    return m[x];
  };
}

// permute(permute(x, p), q) is permute(x, p[q[j]]), or x itself when that is the identity.
RewriteFn compose_permutes(Var x, Var inner, Var outer) {
  return [=](const Match& m, Why&) -> Rewrite {
    int64_t rank = m[x].meta().rank();
    IntList p = normalized_dims(m.node(inner)->attrs().get_ints("dims"), rank);
    IntList q = normalized_dims(m.node(outer)->attrs().get_ints("dims"), rank);
    IntList composed;
    bool identity = true;
    for (size_t j = 0; j < q.size(); ++j) {
      composed.push_back(p[q[j]]);
      identity &= composed[j] == static_cast<int64_t>(j);
    }
    if (identity) return m[x];
    return NewNode{Op::Permute, {m[x]}, Attrs{{"dims", composed}}};
  };
}

// reshape(reshape(x, s1), s2) is reshape(x, s2): only the last shape matters. Not where the
// inner reshape is a copy (x's layout does not view as s1) that something else reads too: the
// outer one is a view of that copy, where reading x again would copy it a second time (CSE
// shares such copies on purpose).
RewriteFn merge_reshapes(Var x, Var inner, Var outer) {
  return [=](const Match& m, Why& why) -> Rewrite {
    const TensorMeta& in = m[x].meta();
    const Node* first = m.node(inner);
    const std::vector<Value>& outs = first->graph()->outputs();
    const size_t readers = first->result_info().uses.size() +
                           static_cast<size_t>(std::count(outs.begin(), outs.end(), Value{const_cast<Node*>(first), 0}));
    if (!meta::view_strides(in.shape, in.strides, first->meta().shape) && readers > 1)
      return why.no("the inner reshape copies %{} (its layout {} does not view as {}) and has other users", m[x].name(),
                    in.str(), first->meta().str());
    return NewNode{Op::Reshape, {m[x]}, m.node(outer)->attrs()};
  };
}

RewriteFn if_contiguous(Var x) {
  return [=](const Match& m, Why& why) -> Rewrite {
    if (!m[x].meta().is_contiguous()) return why.no("%{} is not contiguous ({})", m[x].name(), m[x].meta().str());
    return m[x];
  };
}

std::vector<Rule> make_rules() {
  Var x("x"), inner("inner"), outer("outer");
  return {
      // apply_rules checks that the result keeps its type, so x*1 with a 1 that broadcasts x
      // to a larger shape or promotes it to another dtype does not fire.
      rule("x*1 -> x", op(Op::Mul, x, splat(1)), x),
      rule("1*x -> x", op(Op::Mul, splat(1), x), x),
      // x + 0 is not exact for x = -0.0 (IEEE gives -0.0 + 0.0 = +0.0). Like PyTorch's
      // Inductor we fold it anyway: the sign of a zero sum is not something models rely on,
      // and keeping an add of zeros (from decompositions, padding) costs a kernel input.
      // x - 0 and x + (-0.0) are exact.
      rule("x+0 -> x", op(Op::Add, x, splat(0)), x),
      rule("0+x -> x", op(Op::Add, splat(0), x), x),
      rule("x-0 -> x", op(Op::Sub, x, splat(0)), x),
      rule("neg(neg(x)) -> x", op(Op::Neg, op(Op::Neg, x)), x),
      rule("transpose(transpose(x)) -> x", op(Op::Transpose, op(Op::Transpose, x).bind(inner)).bind(outer),
           undo_transpose(x, inner, outer)),
      rule("permute(permute(x)) -> permute(x)", op(Op::Permute, op(Op::Permute, x).bind(inner)).bind(outer),
           compose_permutes(x, inner, outer)),
      rule("reshape(reshape(x)) -> reshape(x)", op(Op::Reshape, op(Op::Reshape, x).bind(inner)).bind(outer),
           merge_reshapes(x, inner, outer)),
      // The type check makes these "to x's own shape / dtype" rules.
      rule("reshape(x) -> x", op(Op::Reshape, x), x),
      rule("expand(x) -> x", op(Op::Expand, x), x),
      rule("to(x) -> x", op(Op::To, x), x),
      rule("contiguous(x) -> x", op(Op::Contiguous, x), if_contiguous(x)),
  };
}

// A broadcasting op reads `expand(y)` exactly as it reads y (broadcasting does the
// expansion), and a one-element y the same whatever its shape: so such an operand view can
// go, leaving fusion and lowering plain operands (autograd scales gradients by
// expand(reshape(tangent))). Only when the node's result type stays the same: a 0-d operand
// promotes differently from a dimensioned one, and reshape of more than one element would
// line the values up differently.
std::optional<Value> view_the_op_broadcasts_anyway(Node* n, int i) {
  const Value& in = n->input(i);
  Op view = in.node->op();
  if (view != Op::Expand && view != Op::Reshape && view != Op::Unsqueeze) return std::nullopt;
  Value base = in.node->input(0);
  if (view != Op::Expand && base.meta().numel() != 1) return std::nullopt;
  std::vector<TensorMeta> metas;
  for (int j = 0; j < static_cast<int>(n->inputs().size()); ++j) metas.push_back(j == i ? base.meta() : n->input(j).meta());
  std::vector<TensorMeta> out;
  try {
    out = infer_meta(n->info(), metas, n->attrs());
  } catch (const Error&) {
    return std::nullopt;
  }
  if (out[0].dtype != n->meta().dtype || out[0].shape != n->meta().shape) return std::nullopt;
  return base;
}

bool drop_broadcast_views(Graph& g) {
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->category() != OpCategory::Pointwise || n->inputs().size() < 2) continue;
    for (int i = 0; i < static_cast<int>(n->inputs().size()); ++i) {
      // Repeat: expand(reshape(s)) peels one view per step.
      while (std::optional<Value> base = view_the_op_broadcasts_anyway(n, i)) {
        if (log_enabled("canonicalize"))
          log_line("canonicalize", fmt::format("%{}: operand %{} -> %{} (broadcasting does the view)", n->name(),
                                               n->input(i).name(), base->name()));
        n->set_input(i, *base);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

bool run_canonicalize(Graph& g) {
  static const std::vector<Rule> rules = make_rules();
  bool changed = apply_rules(g, rules, "canonicalize");
  if (drop_broadcast_views(g)) {
    changed = true;
    g.reinfer_types();  // strides of downstream views may follow the new operands
  }
  return changed;
}

}  // namespace kiln
