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

const Node* strip_views(const Node* m) {
  while (!m->is_input() && (m->op() == Op::Reshape || m->op() == Op::Unsqueeze || m->op() == Op::Expand)) m = m->input(0).node;
  return m;
}

// The variance pair of `s1` = sum(x) (Welford): a reduction s2 = sum((x - mean)^2) of the group
// one level deeper, with mean = s1 / N (N the reduced count, a full node) re-broadcast through
// views and x the very value s1 reads — a layer norm's statistics. Welford's accumulator gives
// the mean and s2 in one pass. Returns {s2, the mean's div node}, or nulls.
std::pair<const Node*, const Node*> welford_partner(const Node* s1, const std::vector<const Node*>& reductions,
                                                    std::map<const Node*, int>& level, int64_t count) {
  if (s1->op() != Op::Sum || !is_floating(s1->meta().dtype) || s1->meta().dtype != s1->input(0).meta().dtype) return {};
  for (const Node* s2 : reductions) {
    if (s2->op() != Op::Sum || level[s2] != level[s1] + 1 || s2->meta().dtype != s1->meta().dtype) continue;
    const Node* q = s2->input(0).node;
    if (q->is_input()) continue;
    bool squares = q->op() == Op::Square || (q->op() == Op::Mul && q->input(0) == q->input(1));
    if (!squares) continue;
    const Node* d = q->input(0).node;
    if (d->is_input() || d->op() != Op::Sub || d->input(0) != s1->input(0)) continue;
    const Node* mean = strip_views(d->input(1).node);
    if (mean->is_input() || mean->op() != Op::Div || strip_views(mean->input(0).node) != s1) continue;
    const Node* n = mean->input(1).node;
    if (n->is_input() || n->op() != Op::Full) continue;
    const AttrValue* fv = n->attrs().find("fill_value");
    double v = !fv ? -1 : std::holds_alternative<int64_t>(*fv) ? static_cast<double>(std::get<int64_t>(*fv)) : std::get<double>(*fv);
    if (v != static_cast<double>(count) || count == 0) continue;
    return {s2, mean};
  }
  return {};
}

}  // namespace

// The row reductions of a group at row `row` (any expression: a loop variable, or a chunk's
// row), one reduction loop `r` per level; each reduction's result is then a let (set_reduced).
void GraphLowering::emit_row_reductions(KernelBuilder& kb, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level,
                                        int levels, const ExprPtr& row, LoopKind order) {
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t nred = product(rdims);
  ExprPtr r = var("r", 0, std::max<int64_t>(nred - 1, 0));
  Index kept_idx = unravel(row, kept), red_idx = unravel(r, rdims);
  auto full_index = [&]() { return merge_index(red, kept_idx, red_idx); };
  // Online softmax (Target::online_softmax): amax(x) and the sum of exp(x - max) that
  // follows it come from one accumulator, in one pass over the row.
  // Welford (Target::welford): a sum, and the sum of squared deviations from its mean, one pass.
  std::map<const Node*, const Node*> online;  // amax -> its sum
  std::map<const Node*, std::pair<const Node*, const Node*>> welford;  // sum -> {sum of squares, mean}
  std::set<const Node*> done;                 // sums computed with their partner
  bool one_pass = nred >= target_.one_pass_min_row;
  if (target_.online_softmax && one_pass)
    for (const Node* n : reductions)
      if (const Node* s = online_softmax_sum(n, reductions, level); s && !done.count(s) && !done.count(n)) {
        online[n] = s;
        done.insert(s);
      }
  if (target_.welford && one_pass)
    for (const Node* n : reductions)
      if (auto w = welford_partner(n, reductions, level, nred); w.first && !done.count(w.first) && !done.count(n) && !online.count(n)) {
        welford[n] = w;
        done.insert(w.first);
      }
  auto combine_for = [&](const Node* n) {
    return online.count(n) ? CombineOp::SumExp : welford.count(n) ? CombineOp::Welford : combine_of(n);
  };
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
      acc_type[n] = reduction_acc_dtype(n);
      kb.emit(decl_acc(a, acc_type[n], combine_for(n)));
      for (const char* part : {"", "_idx", "_max", "_mean", "_n"}) kb.define(a + part);
    }
    kb.push_scope(&body, {"r"});
    std::string names;
    for (const Node* n : here) {
      ExprPtr x = kb.value_at(n->input(0), full_index());
      if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
      x = cast(acc_type[n], x);
      kb.emit(accumulate(acc[n], combine_for(n), x, n->op() == Op::Argmax ? r : nullptr));
      names += " %" + n->name() + (online.count(n)    ? " %" + online[n]->name() + " (online)"
                                   : welford.count(n) ? " %" + welford[n].first->name() + " (welford)"
                                                      : "");
    }
    kb.pop_scope();
    kb.emit(for_loop("r", nred, order, std::move(body), "reduces" + names + (order == LoopKind::Ordered ? " in order" : "")));
    for (const Node* n : here) {
      std::string fin = kb.fresh(n->name());
      DType at = acc_type[n];
      ExprPtr v = n->op() == Op::Argmax ? value_var(acc[n] + "_idx", DType::I64)
                  : online.count(n)     ? value_var(acc[n] + "_max", at)
                  : welford.count(n)    ? call("mul", at, {value_var(acc[n] + "_mean", at), imm(at, static_cast<double>(nred))})
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
      if (welford.count(n)) {
        // The mean is Welford's own (not the sum it was scaled back to, divided again); the sum
        // of squared deviations is its M2.
        auto [s2, mean] = welford[n];
        std::string mfin = kb.fresh(mean->name()), qfin = kb.fresh(s2->name());
        kb.emit(let(mfin, cast(mean->meta().dtype, value_var(acc[n] + "_mean", at))));
        kb.emit(let(qfin, cast(s2->meta().dtype, value_var(acc[n], at))));
        kb.define(mfin);
        kb.define(qfin);
        kb.set_reduced(mean, value_var(mfin, mean->meta().dtype));
        kb.set_reduced(s2, value_var(qfin, s2->meta().dtype));
      }
    }
  }
}

std::vector<const Node*> reductions_of(const FusionGroup& grp) {
  std::vector<const Node*> reductions;
  for (const Node* n : grp.nodes)
    if (n->category() == OpCategory::Reduction) reductions.push_back(n);
  KILN_INTERNAL_ASSERT(!reductions.empty(), "a reduction group holds a reduction");
  return reductions;
}

int GraphLowering::reduction_levels(const FusionGroup& grp, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level) {
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
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

  return levels;
}

void GraphLowering::lower_reduction(const FusionGroup& grp) {
  // A column group that computes a row group in its chunks (passes/fusion/column_partials.h);
  // where no chunking pays, the row group runs first, as its own kernel, then this one alone.
  if (grp.rows_of >= 0) {
    const FusionGroup& rows = plan_.groups[static_cast<size_t>(grp.rows_of)];
    if (lower_rows_with_column_partials(rows, grp)) return;
    lower_reduction(rows);
  }
  std::vector<const Node*> reductions = reductions_of(grp);
  std::map<const Node*, int> level;
  int levels = reduction_levels(grp, reductions, level);

  if (lower_split_reduction(grp, reductions, levels)) return;
  if (lower_column_reduction(grp, reductions, level, levels)) return;

  lower_reduction_rows(grp, reductions, level, levels, LoopKind::Reduction);
}

// One kernel over the kept points: `order` Reduction, a row each, its reduction loops the
// schedule's to spread over threads; Ordered, a thread each, walking the reduced dims in order
// (column sums by thread: lower_column_reduction).
void GraphLowering::lower_reduction_rows(const FusionGroup& grp, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level,
                                         int levels, LoopKind order) {
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  int64_t nrow = 1;
  for (size_t d = 0; d < S.size(); ++d)
    if (!red[d]) nrow *= S[d];
  KernelBuilder kb(*this, &grp, group_comment(grp));
  auto [full_outs, row_outs] = split_reduction_outputs(kb, grp, S);
  std::vector<StmtPtr> top, rowbody;
  kb.push_scope(&top, {});
  ExprPtr row = var("row", 0, std::max<int64_t>(nrow - 1, 0));
  kb.push_scope(&rowbody, {"row"});
  emit_row_reductions(kb, reductions, level, levels, row, order);
  emit_reduction_outputs(kb, full_outs, row_outs, S, red, row, order == LoopKind::Ordered ? LoopKind::Ordered : LoopKind::Parallel);
  kb.pop_scope();
  const std::string what = order == LoopKind::Ordered ? "kept points, a thread each, of " : "rows of ";
  kb.emit(for_loop("row", nrow, LoopKind::Parallel, std::move(rowbody), what + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

void GraphLowering::emit_reduction_outputs(KernelBuilder& kb, const NamedOutputs& full_outs, const NamedOutputs& row_outs, const Shape& S,
                                           const std::vector<bool>& red, const ExprPtr& row, LoopKind full_kind) {
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  const int64_t nred = product(rdims);
  for (auto& [v, name] : row_outs) {
    Index idx = unravel(row, v.meta().shape);
    for (auto& e : idx) e = simplify(e);
    kb.emit(store(name, row, cast(v.meta().dtype, kb.value_at(v, idx))));
  }
  if (full_outs.empty()) return;
  ExprPtr r = var("r", 0, std::max<int64_t>(nred - 1, 0));
  Index full = merge_index(red, unravel(row, kept), unravel(r, rdims));
  std::vector<StmtPtr> body;
  kb.push_scope(&body, {"r"});
  std::vector<Value> vs;
  for (auto& [v, name] : full_outs) {
    kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
    vs.push_back(v);
  }
  kb.pop_scope();
  kb.emit(for_loop("r", nred, full_kind, std::move(body), outputs_comment(vs)));
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
  // Kept points enough for a thread each (Target::column_thread_min_points; a GPU's default):
  // each thread holds its kept point's accumulators in registers and walks the reduced dims in
  // order (the tile form's order, so the same sums), its loads coalesced across a warp's
  // consecutive kept points. The tile form below keeps its accumulators in memory, read and
  // written at each reduced step: GQA's dK/dV sums over the 8 query heads a key head serves ran
  // at 1300 GB/s there (1.6 ms of the Llama step, bench/NOTES.md stop 42).
  if (target_.column_thread_min_points > 0 && nrow >= target_.column_thread_min_points) {
    lower_reduction_rows(grp, reductions, level, levels, LoopKind::Ordered);
    return true;
  }
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
      acc_type[n] = reduction_acc_dtype(n);
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
            case CombineOp::SumExp:
            case CombineOp::Welford: break;
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
