// Column partials in chunks of rows (passes/fusion/column_partials.h): a column group (sums
// over the leading dims of S = [rows, cols]) that computes the row group it reads. Two kernels:
//   chunks:  parallel over P chunks of L consecutive rows; each chunk starts its partials of
//            every column sum, then walks its rows in order: the row group's reductions of the
//            row (its statistics), the column group's values over the row (dx, written out),
//            and each column's value added into the chunk's partial of that column;
//   combine: over the columns, the P partials in chunk order, then the group's column outputs
//            (lower_partials_combine, shared with the split reductions).
// The partials are the chunk's own row of a [P, cols] buffer, read and written only at
// `chunk * cols + column`: the CUDA schedule holds it in registers for the whole chunk (a
// block per chunk; codegen/schedule.cpp), and the rows of x and dy each row reads, so each is
// read from memory once. Deterministic: fixed chunks, rows in order, partials in chunk order.
// P divides the rows (no chunk needs a bounds guard).
#include "codegen/lower_internal.h"

namespace kiln::codegen::detail {

bool GraphLowering::lower_rows_with_column_partials(const FusionGroup& rows, const FusionGroup& cols) {
  const std::vector<const Node*> col_reds = reductions_of(cols), row_reds = reductions_of(rows);
  const Shape& S = col_reds[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(col_reds[0]);  // the leading dims: the rows
  Shape row_dims, col_dims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? row_dims : col_dims).push_back(S[d]);
  const int64_t M = product(row_dims), N = product(col_dims);
  if (M == 0 || N == 0) return false;
  // About one chunk an SM: a chunk's block is alone on its SM (its registers), and each chunk
  // is one more row of partials to combine (on the H200, [16384,4096]: 256 chunks 0.287 +
  // 0.019 ms, 128 chunks 0.255 + 0.008 ms; bench/NOTES.md). Fewer chunks than half the SMs,
  // or than the rows, do not pay.
  const int64_t P = divisor_at_most(M, int64_t(target_.num_sms));
  if (P * 2 < std::min<int64_t>(M, target_.num_sms)) return false;
  const int64_t L = M / P;
  std::vector<Value> full_outs, row_outs;
  for (Value v : cols.outputs) {
    bool full = v.meta().shape == S && v.node->category() != OpCategory::Reduction;
    if (!full && v.meta().numel() != N) return false;  // neither over the rows nor per column
    (full ? full_outs : row_outs).push_back(v);
  }
  std::map<const Node*, int> row_level;
  const int row_levels = reduction_levels(rows, row_reds, row_level);

  std::map<const Node*, DType> acc_type;
  std::map<const Node*, int> partial;
  for (const Node* n : col_reds) {
    acc_type[n] = reduction_acc_dtype(n);
    partial[n] = temp_buffer(acc_type[n], {P, N}, fmt::format("%{} partials ({} chunks of {} rows)", n->name(), P, L));
  }
  {
    KernelBuilder kb(*this, &cols,
                     group_comment(cols) + fmt::format(" with the rows of k{} (partials over {} chunks of {} rows)", rows.id, P, L));
    kb.also_compute(&rows);
    std::map<const Node*, std::string> pb;
    for (const Node* n : col_reds) pb[n] = kb.buffer(partial[n], BufferRole::Output);
    std::vector<std::pair<Value, std::string>> full_named;
    for (Value v : full_outs) full_named.emplace_back(v, kb.buffer(new_buffer(v), BufferRole::Output));
    std::vector<StmtPtr> top, qbody, ibody, jbody, cbody;
    kb.push_scope(&top, {});
    ExprPtr q = var("q", 0, P - 1), j = var("j", 0, L - 1), r = var("r", 0, N - 1);
    ExprPtr slot = simplify(add(mul(q, imm(N)), r));
    kb.push_scope(&qbody, {"q"});
    kb.push_scope(&ibody, {"r"});
    for (const Node* n : col_reds) kb.emit(store(pb[n], slot, imm(acc_type[n], 0)));
    kb.pop_scope();
    kb.emit(for_loop("r", N, LoopKind::Parallel, std::move(ibody), "starts the chunk's partials"));
    kb.push_scope(&jbody, {"j"});
    ExprPtr row = simplify(add(mul(q, imm(L)), j));
    emit_row_reductions(kb, row_reds, row_level, row_levels, row);
    kb.push_scope(&cbody, {"r"});
    Index full = merge_index(red, unravel(r, col_dims), unravel(row, row_dims));
    std::string names;
    for (auto& [v, name] : full_named) {
      kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
      names += " %" + v.name();
    }
    for (const Node* n : col_reds) {
      ExprPtr x = cast(n->meta().dtype, kb.value_at(n->input(0), full));
      kb.emit(store(pb[n], slot, call("add", acc_type[n], {load(pb[n], acc_type[n], slot), cast(acc_type[n], x)})));
      names += " %" + n->name() + " (partial)";
    }
    kb.pop_scope();
    kb.emit(for_loop("r", N, LoopKind::Parallel, std::move(cbody), "the row's" + names));
    kb.pop_scope();
    // Each chunk's partials are carried in memory from row to row: its rows run in order.
    kb.emit(for_loop("j", L, LoopKind::Ordered, std::move(jbody), fmt::format("the chunk's {} rows, in order", L)));
    kb.pop_scope();
    kb.emit(for_loop("q", P, LoopKind::Parallel, std::move(qbody), fmt::format("{} chunks of {} rows of {}", P, L, shape_str(S))));
    kb.pop_scope();
    Kernel k = kb.finish(block(std::move(top)));
    add_kernel_step(kb, std::move(k), cols.id);
  }
  lower_partials_combine(cols, col_reds, partial, P, N, row_outs);
  return true;
}

}  // namespace kiln::codegen::detail
