// Reduction groups: one row per parallel iteration with a loop per level of dependent
// reductions, or column tiles when the reductions keep the innermost dim.
#include "codegen/lower_internal.h"

namespace kiln::codegen::detail {

namespace {

// The sum of a softmax-style pair for `mx` = amax(x): a reduction s = sum(exp(x - m')) of the
// same group one level deeper, where m' is mx itself or mx re-broadcast through views
// (keepdim reshape, unsqueeze, expand) and x is the very value mx reads. Online softmax
// computes both in one pass; nullptr when there is no such sum.
const Node* online_softmax_sum(const Node* mx, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level) {
  if (mx->op() != Op::Amax || !is_floating(mx->input(0).meta().dtype)) return nullptr;
  for (const Node* s : reductions) {
    if (s->op() != Op::Sum || level[s] != level[mx] + 1) continue;
    const Node* e = s->input(0).node;
    if (e->is_input() || e->op() != Op::Exp) continue;
    const Node* d = e->input(0).node;
    if (d->is_input() || d->op() != Op::Sub || d->input(0) != mx->input(0)) continue;
    const Node* m = d->input(1).node;
    while (!m->is_input() && m != mx && (m->op() == Op::Reshape || m->op() == Op::Unsqueeze || m->op() == Op::Expand))
      m = m->input(0).node;
    if (m == mx) return s;
  }
  return nullptr;
}

}  // namespace

void GraphLowering::lower_reduction(const FusionGroup& grp) {
  std::vector<const Node*> reductions;
  for (const Node* n : grp.nodes)
    if (n->category() == OpCategory::Reduction) reductions.push_back(n);
  KILN_INTERNAL_ASSERT(!reductions.empty(), "a reduction group holds a reduction");
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t nrow = product(kept), nred = product(rdims);

  // Level of each reduction: 1 + the deepest reduction its input depends on in this group.
  std::map<const Node*, int> level;
  std::function<int(const Node*)> depth = [&](const Node* n) -> int {
    int d = 0;
    for (Value in : n->inputs()) {
      const Node* m = in.node;
      if (m->is_input()) continue;
      int gid = plan_.group_of.at(m);
      if (gid != grp.id && plan_.groups[gid].kind != KernelKind::Alias) continue;
      if (m->category() == OpCategory::Reduction && gid == grp.id) {
        if (!level.count(m)) level[m] = 1 + depth(m);
        d = std::max(d, level[m]);
      } else {
        d = std::max(d, depth(m));
      }
    }
    return d;
  };
  int levels = 0;
  for (const Node* r : reductions) {
    if (!level.count(r)) level[r] = 1 + depth(r);
    levels = std::max(levels, level[r]);
    KILN_INTERNAL_ASSERT(r->input(0).meta().shape == S && reduced_dims_of(r) == red,
                         "the reductions of a group share one input shape and reduced dims");
  }

  if (lower_split_reduction(grp, reductions, levels)) return;
  if (lower_column_reduction(grp, reductions, level, levels)) return;

  KernelBuilder kb(*this, &grp, group_comment(grp));
  auto [full_outs, row_outs] = split_reduction_outputs(kb, grp, S);

  std::vector<StmtPtr> top, rowbody;
  kb.push_scope(&top, {});
  ExprPtr row = var("row", 0, std::max<int64_t>(nrow - 1, 0));
  ExprPtr r = var("r", 0, std::max<int64_t>(nred - 1, 0));
  kb.push_scope(&rowbody, {"row"});
  Index kept_idx = unravel(row, kept), red_idx = unravel(r, rdims);
  auto full_index = [&]() { return merge_index(red, kept_idx, red_idx); };
  // Online softmax (Target::online_softmax): amax(x) and the sum of exp(x - max) that
  // follows it come from one accumulator, in one pass over the row.
  std::map<const Node*, const Node*> online;  // amax -> its sum
  std::set<const Node*> done;                 // sums computed with their amax
  if (target_.online_softmax)
    for (const Node* n : reductions)
      if (const Node* s = online_softmax_sum(n, reductions, level); s && !done.count(s)) {
        online[n] = s;
        done.insert(s);
      }
  for (int lvl = 1; lvl <= levels; ++lvl) {
    std::vector<const Node*> here;
    for (const Node* n : reductions)
      if (level[n] == lvl && !done.count(n)) here.push_back(n);
    if (here.empty()) continue;
    std::vector<StmtPtr> body;
    std::map<const Node*, std::string> acc;
    std::map<const Node*, DType> acc_type;
    for (const Node* n : here) {
      std::string a = kb.fresh(n->name() + "_acc");
      acc[n] = a;
      bool arith = n->op() == Op::Sum || n->op() == Op::Prod;
      acc_type[n] = arith ? acc_dtype(n->meta().dtype) : compute_dtype(n->input(0).meta().dtype);
      kb.emit(decl_acc(a, acc_type[n], online.count(n) ? CombineOp::SumExp : combine_of(n)));
      kb.define(a);
      kb.define(a + "_idx");
      kb.define(a + "_max");
    }
    kb.push_scope(&body, {"r"});
    std::string names;
    for (const Node* n : here) {
      ExprPtr x = kb.value_at(n->input(0), full_index());
      if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
      x = cast(acc_type[n], x);
      kb.emit(accumulate(acc[n], online.count(n) ? CombineOp::SumExp : combine_of(n), x, n->op() == Op::Argmax ? r : nullptr));
      names += " %" + n->name() + (online.count(n) ? " %" + online[n]->name() + " (online)" : "");
    }
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Reduction, std::move(body), "reduces" + names));
    for (const Node* n : here) {
      std::string fin = kb.fresh(n->name());
      DType at = acc_type[n];
      ExprPtr v = n->op() == Op::Argmax ? value_var(acc[n] + "_idx", DType::I64)
                  : online.count(n)     ? value_var(acc[n] + "_max", at)
                                        : value_var(acc[n], at);
      kb.emit(let(fin, cast(n->meta().dtype, v)));
      kb.define(fin);
      kb.set_reduced(n, value_var(fin, n->meta().dtype));
      if (const Node* s = online.count(n) ? online[n] : nullptr) {
        // A row of -inf alone: the two-pass form's exp(-inf - -inf) makes the sum NaN.
        std::string sfin = kb.fresh(s->name());
        ExprPtr all_neg_inf = call("eq", DType::Bool, {value_var(acc[n] + "_max", at), imm(at, -INFINITY)});
        kb.emit(let(sfin, cast(s->meta().dtype, select(all_neg_inf, imm(at, NAN), value_var(acc[n], at)))));
        kb.define(sfin);
        kb.set_reduced(s, value_var(sfin, s->meta().dtype));
      }
    }
  }
  for (auto& [v, name] : row_outs) {
    Index idx = unravel(row, v.meta().shape);
    for (auto& e : idx) e = simplify(e);
    kb.emit(store(name, row, cast(v.meta().dtype, kb.value_at(v, idx))));
  }
  if (!full_outs.empty()) {
    std::vector<StmtPtr> body;
    kb.push_scope(&body, {"r"});
    std::vector<Value> vs;
    for (auto& [v, name] : full_outs) {
      Index full = full_index();
      kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
      vs.push_back(v);
    }
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Parallel, std::move(body), outputs_comment(vs)));
  }
  kb.pop_scope();
  kb.emit(for_loop("row", nrow, LoopKind::Parallel, std::move(rowbody), "rows of " + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

// Reductions over leading dims that keep the innermost one (a bias gradient: sum over the
// rows of [N, C]) as S = [outer, reduced, inner]. Iterating one kept point at a time would
// read the input with a stride of C; instead each parallel iteration takes a tile of T
// consecutive kept points, keeps their accumulators in a temp buffer (one per reduction) and
// sweeps the reduced dims outside a contiguous, vectorizable loop over the tile:
//   parallel for t { for c: acc[t*T + c] = identity
//                    for r { for c: acc[t*T + c] = combine(acc[t*T + c], x[o, r, c]) } ... }
// Each accumulator sees the values in the reference's order, so nothing reassociates.
// Returns false (the row lowering applies) for other shapes and for argmax.
bool GraphLowering::lower_column_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions,
                                           std::map<const Node*, int>& level, int levels) {
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  if (S.empty() || red.back()) return false;
  for (const Node* n : reductions)
    if (n->op() == Op::Argmax) return false;
  size_t d0 = 0;
  while (d0 < S.size() && !red[d0]) ++d0;
  size_t d1 = d0;
  while (d1 < S.size() && red[d1]) ++d1;  // reduced dims: [d0, d1)
  for (size_t d = d1; d < S.size(); ++d)
    if (red[d]) return false;
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t C = product(S, d1), nred = product(rdims), nrow = product(kept);
  if (C < 8 || nred < 2 || nrow == 0) return false;
  // The tile: a divisor of C (so tiles never straddle an outer index) up to the target's
  // widest tile, narrow enough for the tiles it wants to exist when C allows (not under 32).
  const Target& target = target_;
  int64_t T = 1;
  for (int64_t d = std::min<int64_t>(C, target.column_tile_max); d >= 1; --d)
    if (C % d == 0 && (T == 1 || (T > 32 && nrow / T < target.column_tiles_wanted && d >= 32))) T = d;
  if (T < 8) return false;

  KernelBuilder kb(*this, &grp, group_comment(grp));
  auto [full_outs, row_outs] = split_reduction_outputs(kb, grp, S);
  std::vector<StmtPtr> top, tbody;
  kb.push_scope(&top, {});
  ExprPtr t = var("tile", 0, nrow / T - 1), c = var("col", 0, T - 1);
  ExprPtr r = var("r", 0, nred - 1);
  ExprPtr row = add(mul(t, imm(T)), c);  // the flat kept index
  kb.push_scope(&tbody, {"tile"});
  Index kept_idx = unravel(row, kept), red_idx = unravel(r, rdims);
  auto full_index = [&]() { return merge_index(red, kept_idx, red_idx); };
  auto tile_loop = [&](const std::function<void()>& body, const std::string& comment) {
    std::vector<StmtPtr> cbody;
    kb.push_scope(&cbody, {"col"});
    body();
    kb.pop_scope();
    return for_loop("col", T, LoopKind::Parallel, std::move(cbody), comment);
  };
  for (int lvl = 1; lvl <= levels; ++lvl) {
    std::vector<const Node*> here;
    for (const Node* n : reductions)
      if (level[n] == lvl) here.push_back(n);
    std::map<const Node*, std::string> acc;
    std::map<const Node*, DType> acc_type;
    std::string names;
    for (const Node* n : here) {
      bool arith = n->op() == Op::Sum || n->op() == Op::Prod;
      acc_type[n] = arith ? acc_dtype(n->meta().dtype) : compute_dtype(n->input(0).meta().dtype);
      acc[n] = kb.buffer(temp_buffer(acc_type[n], {nrow}, "%" + n->name() + " accumulators"), BufferRole::Temp);
      names += " %" + n->name();
    }
    kb.emit(tile_loop(
        [&] {
          for (const Node* n : here) {
            DType at = acc_type[n];
            bool fl = is_floating(at);
            double id = 0;
            switch (combine_of(n)) {
              case CombineOp::Sum: id = 0; break;
              case CombineOp::Prod: id = 1; break;
              case CombineOp::Max: id = fl ? -INFINITY : static_cast<double>(INT64_MIN); break;
              case CombineOp::Min: id = fl ? INFINITY : static_cast<double>(INT64_MAX); break;
              case CombineOp::Argmax:
            case CombineOp::SumExp: break;
            }
            ExprPtr init = imm(at, id);
            if (!fl) {  // exactly INT64_MIN / INT64_MAX (a double cannot hold INT64_MAX)
              auto e = std::make_shared<Expr>(*imm(combine_of(n) == CombineOp::Max ? INT64_MIN
                                                   : combine_of(n) == CombineOp::Min ? INT64_MAX
                                                                                     : static_cast<int64_t>(id)));
              e->dtype = at;
              init = e;
            }
            kb.emit(store(acc[n], simplify(row), init));
          }
        },
        "starts" + names));
    std::vector<StmtPtr> rbody;
    kb.push_scope(&rbody, {"r"});
    kb.emit(tile_loop(
        [&] {
          for (const Node* n : here) {
            DType at = acc_type[n];
            ExprPtr x = kb.value_at(n->input(0), full_index());
            if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
            x = cast(at, x);
            const char* fn = n->op() == Op::Sum ? "add" : n->op() == Op::Prod ? "mul" : n->op() == Op::Amax ? "max_step" : "min_step";
            ExprPtr cur = load(acc[n], at, simplify(row));
            kb.emit(store(acc[n], simplify(row), call(fn, at, {cur, x})));
          }
        },
        ""));
    kb.pop_scope();
    // The accumulators live in memory, one per column: the sweep over r runs in order.
    kb.emit(for_loop("r", nred, LoopKind::Ordered, std::move(rbody), "reduces" + names));
    for (const Node* n : here) kb.set_reduced(n, cast(n->meta().dtype, load(acc[n], acc_type[n], simplify(row))));
  }
  if (!row_outs.empty())
    kb.emit(tile_loop(
        [&] {
          for (auto& [v, name] : row_outs) {
            Index idx = unravel(row, v.meta().shape);
            for (auto& e : idx) e = simplify(e);
            kb.emit(store(name, simplify(row), cast(v.meta().dtype, kb.value_at(v, idx))));
          }
        },
        "computes reduced outputs"));
  if (!full_outs.empty()) {
    std::vector<StmtPtr> rbody;
    kb.push_scope(&rbody, {"r"});
    std::vector<Value> vs;
    for (auto& [v, name] : full_outs) vs.push_back(v);
    kb.emit(tile_loop(
        [&] {
          for (auto& [v, name] : full_outs) {
            Index full = full_index();
            kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
          }
        },
        ""));
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Parallel, std::move(rbody), outputs_comment(vs)));
  }
  kb.pop_scope();
  kb.emit(for_loop("tile", nrow / T, LoopKind::Parallel, std::move(tbody), fmt::format("tiles of {} columns of ", T) + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
  return true;
}

}  // namespace kiln::codegen::detail
