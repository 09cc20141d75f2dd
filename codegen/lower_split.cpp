// Split reductions (GPU targets): when a reduction group has too few independent rows to
// fill the machine — a bias gradient sums 65536 rows into 600 columns; a loss sums one row of
// a million elements — the reduced dims are cut into P chunks and the group becomes two
// kernels:
//   partials: parallel over (chunk, kept point): one accumulator over the chunk's L = R/P
//             elements, stored to a temp buffer of P x kept points;
//   combine:  parallel over kept points: the P partials combined in chunk order, then the
//             group's outputs computed from the combined values.
// Results are deterministic: every partial covers fixed elements in a fixed order, and the
// combine reads the partials in order (no atomics). Column reductions (the innermost dim
// kept) walk their chunk serially on one thread per column (consecutive threads read
// consecutive columns: coalesced); row reductions spread each chunk over the threads of a
// block or warp, which the schedule combines.
//
// Applies to one level of reductions without argmax. Outputs over the full space that do
// not depend on the reductions (a ReLU gradient beside the bias gradient that sums it) are
// written by the partials kernel as it walks its chunk. Outputs over the full space that do (a
// row divided by its sum; a loss's gradient scaled by the count it sums) need the combined values: a row
// group with them splits only where its rows are so few that even a cluster of blocks a row
// would leave most SMs idle (a mean loss's one row of 65536 targets ran 0.15 ms on one block),
// and a third kernel over the full space computes them from the combined values, reading the
// row again. Column groups with such outputs stay one kernel. P is a divisor of the reduced
// size, so no chunk needs a bounds guard.
#include "codegen/lower_internal.h"

namespace kiln::codegen::detail {

namespace {
// The most blocks a thread-block cluster holds portably (codegen/schedule.cpp): a row group
// with at least num_sms / 8 rows fills the machine with a cluster a row.
constexpr int64_t kClusterBlocks = 8;
}  // namespace

bool GraphLowering::lower_split_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions, int levels) {
  const Target& t = target_;
  if (!t.is_gpu() || levels != 1) return false;
  for (const Node* n : reductions)
    if (n->op() == Op::Argmax) return false;
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t nrow = product(kept), nred = product(rdims);
  if (nrow == 0 || nred == 0) return false;
  // Whether a value of the group is computed from one of its reductions.
  std::function<bool(const Node*)> after_reduction = [&](const Node* n) {
    if (n->is_input()) return false;
    int gid = plan_.group_of.at(n);
    if (gid != grp.id && plan_.groups[gid].kind != KernelKind::Alias) return false;  // read from memory
    if (gid == grp.id && n->category() == OpCategory::Reduction) return true;
    for (Value in : n->inputs())
      if (after_reduction(in.node)) return true;
    return false;
  };
  std::vector<Value> full_outs, row_outs, late_outs;  // late: over the full space, from the reductions
  for (Value v : grp.outputs) {
    bool full = v.meta().shape == S && v.node->category() != OpCategory::Reduction;
    if (full && after_reduction(v.node)) late_outs.push_back(v);
    else (full ? full_outs : row_outs).push_back(v);
  }

  // Column reductions: the reduced dims all come before the kept ones that end the shape.
  bool column = !S.empty() && !red.back();
  if (column) {
    size_t d = 0;
    while (d < S.size() && !red[d]) ++d;
    while (d < S.size() && red[d]) ++d;
    for (; d < S.size(); ++d) column = column && !red[d];
  }
  int64_t threads_wanted = int64_t(t.num_sms) * 2048;  // a full machine of resident threads
  int64_t P = 1;
  if (column) {
    if (!late_outs.empty() || nrow * 2 >= threads_wanted || nred < 64) return false;
    P = divisor_at_most(nred, std::min<int64_t>(threads_wanted / nrow, nred / 16));
  } else {
    int64_t blocks_wanted = 2 * int64_t(t.num_sms);
    if (nrow >= blocks_wanted || nred < 8192) return false;
    if (!late_outs.empty() && nrow * kClusterBlocks >= t.num_sms) return false;
    P = divisor_at_most(nred, std::min<int64_t>(blocks_wanted / nrow, nred / 2048));
  }
  if (P < 2) return false;
  int64_t L = nred / P;

  std::map<const Node*, DType> acc_type;
  std::map<const Node*, int> partial;  // graph buffer of each reduction's partials
  for (const Node* n : reductions) {
    acc_type[n] = reduction_acc_dtype(n);
    partial[n] = temp_buffer(acc_type[n], {P, nrow}, fmt::format("%{} partials ({} chunks of {})", n->name(), P, L));
  }

  // ---- kernel 1: partials
  {
    KernelBuilder kb(*this, &grp, group_comment(grp) + fmt::format(" (partials over {} chunks)", P));
    std::map<const Node*, std::string> pb;
    for (const Node* n : reductions) pb[n] = kb.buffer(partial[n], BufferRole::Output);
    std::vector<std::pair<Value, std::string>> full_named;
    for (Value v : full_outs) full_named.emplace_back(v, kb.buffer(new_buffer(v), BufferRole::Output));
    std::vector<StmtPtr> top, qbody, rbody;
    kb.push_scope(&top, {});
    ExprPtr q = var("q", 0, P * nrow - 1), r = var("r", 0, L - 1);
    // q = chunk * nrow + kept point (column) or kept point * P + chunk (row): consecutive
    // threads take consecutive columns, or consecutive chunks of one row.
    ExprPtr chunk = simplify(column ? floordiv(q, imm(nrow)) : mod(q, imm(P)));
    ExprPtr point = simplify(column ? mod(q, imm(nrow)) : floordiv(q, imm(P)));
    ExprPtr slot = simplify(column ? q : add(mul(chunk, imm(nrow)), point));
    kb.push_scope(&qbody, {"q"});
    std::map<const Node*, std::string> acc;
    for (const Node* n : reductions) {
      acc[n] = kb.fresh(n->name() + "_acc");
      kb.emit(decl_acc(acc[n], acc_type[n], combine_of(n)));
      kb.define(acc[n]);
    }
    kb.push_scope(&rbody, {"r"});
    Index kept_idx = unravel(point, kept), red_idx = unravel(add(mul(chunk, imm(L)), r), rdims);
    for (auto& e : kept_idx) e = simplify(e);
    for (auto& e : red_idx) e = simplify(e);
    Index full = merge_index(red, kept_idx, red_idx);
    std::string names;
    for (const Node* n : reductions) {
      ExprPtr x = kb.value_at(n->input(0), full);
      if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
      kb.emit(accumulate(acc[n], combine_of(n), cast(acc_type[n], x)));
      names += " %" + n->name();
    }
    for (auto& [v, name] : full_named) {
      kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
      names += " (and writes %" + v.name() + ")";
    }
    kb.pop_scope();
    // A column chunk runs in order on its thread (coalesced across threads); a row chunk is
    // spread over the threads of a block.
    kb.emit(for_loop("r", L, column ? LoopKind::Ordered : LoopKind::Reduction, std::move(rbody), "reduces a chunk of" + names));
    for (const Node* n : reductions) kb.emit(store(pb[n], slot, value_var(acc[n], acc_type[n])));
    kb.pop_scope();
    kb.emit(for_loop("q", P * nrow, LoopKind::Parallel, std::move(qbody), fmt::format("{} chunks of {} x {} kept points", P, L, nrow)));
    kb.pop_scope();
    Kernel k = kb.finish(block(std::move(top)));
    add_kernel_step(kb, std::move(k), grp.id);
  }

  std::map<const Node*, int> combined;  // each reduction's value per kept point, for the late outputs
  if (!late_outs.empty())
    for (const Node* n : reductions)
      combined[n] = temp_buffer(n->meta().dtype, {nrow}, fmt::format("%{} combined", n->name()));
  lower_partials_combine(grp, reductions, partial, P, nrow, row_outs, combined);
  if (late_outs.empty()) return true;

  // ---- kernel 3: the outputs over the full space, from the combined values
  KernelBuilder kb(*this, &grp, group_comment(grp) + " (the outputs over the full space, from the combined reductions)");
  std::vector<std::pair<Value, std::string>> late_named;
  for (Value v : late_outs) late_named.emplace_back(v, kb.buffer(new_buffer(v), BufferRole::Output));
  std::map<const Node*, std::string> cb;
  for (const Node* n : reductions) cb[n] = kb.buffer(combined.at(n), BufferRole::Input);
  std::vector<StmtPtr> top;
  kb.push_scope(&top, {});
  kb.loop_over(
      S,
      [&](const Index& idx) {
        Index kept_idx;
        for (size_t d = 0; d < S.size(); ++d)
          if (!red[d]) kept_idx.push_back(idx[d]);
        ExprPtr point = simplify(ravel(kept_idx, kept));
        for (const Node* n : reductions) kb.set_reduced(n, load(cb[n], n->meta().dtype, point));
        for (auto& [v, name] : late_named)
          kb.emit(store(name, simplify(ravel(idx, S)), cast(v.meta().dtype, kb.value_at(v, idx))));
      },
      outputs_comment(late_outs));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
  return true;
}

// Kernel 2 of a split (and of column partials): over the kept points, the P partials of each
// reduction (buffer `partial`, [P, nrow]) combined in chunk order, then the group's outputs
// of the reduced space computed from them; each reduction's value also stored to its buffer in
// `combined` where it has one (for a third kernel's outputs over the full space).
void GraphLowering::lower_partials_combine(const FusionGroup& grp, const std::vector<const Node*>& reductions,
                                           const std::map<const Node*, int>& partial, int64_t P, int64_t nrow,
                                           const std::vector<Value>& row_outs, const std::map<const Node*, int>& combined) {
  std::map<const Node*, DType> acc_type;
  for (const Node* n : reductions) acc_type[n] = reduction_acc_dtype(n);
  KernelBuilder kb(*this, &grp, group_comment(grp) + fmt::format(" (combines {} partials)", P));
  std::vector<std::pair<Value, std::string>> row_named;
  for (Value v : row_outs) row_named.emplace_back(v, kb.buffer(new_buffer(v), BufferRole::Output));
  std::map<const Node*, std::string> pb, cb;
  for (const Node* n : reductions) pb[n] = kb.buffer(partial.at(n), BufferRole::Input);
  for (auto& [n, b] : combined) cb[n] = kb.buffer(b, BufferRole::Output);
  std::vector<StmtPtr> top, rowbody, cbody;
  kb.push_scope(&top, {});
  ExprPtr row = var("row", 0, nrow - 1), c = var("j", 0, P - 1);
  kb.push_scope(&rowbody, {"row"});
  std::map<const Node*, std::string> acc;
  for (const Node* n : reductions) {
    acc[n] = kb.fresh(n->name() + "_acc");
    kb.emit(decl_acc(acc[n], acc_type[n], combine_of(n)));
    kb.define(acc[n]);
  }
  kb.push_scope(&cbody, {"j"});
  for (const Node* n : reductions)
    kb.emit(accumulate(acc[n], combine_of(n), load(pb[n], acc_type[n], simplify(add(mul(c, imm(nrow)), row)))));
  kb.pop_scope();
  kb.emit(for_loop("j", P, LoopKind::Ordered, std::move(cbody), "combines the partials in chunk order"));
  for (const Node* n : reductions) {
    std::string fin = kb.fresh(n->name());
    kb.emit(let(fin, cast(n->meta().dtype, value_var(acc[n], acc_type[n]))));
    kb.define(fin);
    kb.set_reduced(n, value_var(fin, n->meta().dtype));
    if (cb.count(n)) kb.emit(store(cb[n], row, value_var(fin, n->meta().dtype)));
  }
  for (auto& [v, name] : row_named) {
    Index idx = unravel(row, v.meta().shape);
    for (auto& e : idx) e = simplify(e);
    kb.emit(store(name, row, cast(v.meta().dtype, kb.value_at(v, idx))));
  }
  kb.pop_scope();
  kb.emit(for_loop("row", nrow, LoopKind::Parallel, std::move(rowbody), "rows of " + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

}  // namespace kiln::codegen::detail
