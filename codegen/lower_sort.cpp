// Lowering of sort and topk (codegen/sort.h): one kernel per node over a contiguous input; and
// of scatter_add by sorted index on a GPU (codegen/sorted_scatter.h), which sorts its index.
#include <fmt/format.h>

#include "codegen/lower_internal.h"
#include "codegen/sort.h"

namespace kiln::codegen::detail {

void GraphLowering::lower_sort(const FusionGroup& grp) {
  KILN_INTERNAL_ASSERT(grp.nodes.size() == 1, "a sort group holds one node");
  const Node* n = grp.nodes[0];
  const TensorMeta& in = n->input(0).meta();
  const int64_t rank = in.rank();
  const size_t dim = static_cast<size_t>(normalize_dim(n->attrs().get_int("dim"), std::max<int64_t>(rank, 1)));
  SortKernel s;
  s.dtype = in.dtype;
  s.n = rank == 0 ? 1 : in.shape[dim];
  for (size_t d = dim + 1; d < in.shape.size(); ++d) s.inner *= in.shape[d];
  s.outer = s.n == 0 || s.inner == 0 ? 0 : in.numel() / (s.n * s.inner);
  s.k = n->op() == Op::Topk ? n->attrs().get_int("k") : s.n;
  s.descending = n->op() == Op::Topk ? n->attrs().get_bool("largest") : n->attrs().get_bool("descending");
  sort_dtype_code(s.dtype);  // a dtype with no routine fails here, naming it
  // A GPU topk keeps k of a row's n pairs: a row too long for shared memory is sorted whole in
  // scratch (the memory plan's, so this is decided here, by the row's size on the target).
  s.scratch = s.k < s.n && target_.is_gpu() && !sort_row_fits_on_chip(s.dtype, s.n, target_);

  std::vector<int> args{contiguous_buffer(n->input(0), fmt::format("input of %{} ({})", n->name(), op_name(n->op())))};
  for (int r = 0; r < n->num_results(); ++r) args.push_back(new_buffer(Value{const_cast<Node*>(n), r}));
  if (s.scratch) {
    args.push_back(temp_buffer(s.dtype, {s.rows() * s.n}, fmt::format("%{} rows being sorted", n->name())));
    args.push_back(temp_buffer(DType::I64, {s.rows() * s.n}, fmt::format("%{} indices being sorted", n->name())));
  }
  std::vector<BufferRole> roles;
  for (size_t i = 0; i < args.size(); ++i) roles.push_back(i == 0 ? BufferRole::Input : i < 3 ? BufferRole::Output : BufferRole::Temp);
  Kernel k = routine_kernel(grp, args, roles, fmt::format("sort: %{} = {}", n->name(), op_name(n->op())));
  k.sort = s;
  add_kernel_step(std::move(k), std::move(args), grp.id);
}

Kernel GraphLowering::routine_kernel(const FusionGroup& grp, const std::vector<int>& args, const std::vector<BufferRole>& roles,
                                     std::string comment) {
  Kernel k;
  k.name = kernel_name(&grp);
  k.comment = std::move(comment);
  for (size_t i = 0; i < args.size(); ++i) {
    const GraphBuffer& gb = out_.buffers[static_cast<size_t>(args[i])];
    Buffer b;
    b.name = fmt::format("b{}", i);
    b.dtype = gb.meta.dtype;
    b.role = roles[i];
    b.numel = gb.meta.numel();
    b.what = gb.what;
    k.buffers.push_back(b);
  }
  k.body = block({});
  return k;
}

bool GraphLowering::lower_sorted_scatter(const FusionGroup& grp, const Node* n, int acc_gb) {
  Value self = n->input(0), index = n->input(1), src = n->input(2);
  const Shape &ss = self.meta().shape, &is = index.meta().shape;
  const DType dt = n->meta().dtype;
  if (!target_.is_gpu() || ss.empty() || is != src.meta().shape || src.meta().dtype != dt || numel(is) == 0) return false;
  if (dt != DType::F32 && dt != DType::F64 && dt != DType::F16 && dt != DType::BF16) return false;
  const size_t dim = static_cast<size_t>(normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(ss.size())));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < is.size(); ++d) {
    if (d == dim) continue;
    // The index the same across dim d (stride 0: an expanded column), the source and the
    // destination as long there.
    if (is[d] != ss[d] || (is[d] > 1 && index.meta().strides[d] != 0)) return false;
    (d < dim ? outer : inner) *= is[d];
  }
  const int64_t N = is[dim];
  // A handful of rows, or enough columns to fill the GPU, run as well in order.
  if (N < 32 || outer * inner >= target_.num_sms * 1024) return false;

  // (1) The index's column, checked and wrapped as the ordered kernel would (an index out of
  // range is reported, as there).
  const int keys = temp_buffer(DType::I64, {N}, fmt::format("%{} destination rows", n->name()));
  {
    KernelBuilder kb(*this, &grp, group_comment(grp) + " (its index's column)");
    std::string ob = kb.buffer(keys, BufferRole::Output);
    std::vector<StmtPtr> top, body;
    kb.push_scope(&top, {});
    ExprPtr j = var("j", 0, N - 1);
    kb.push_scope(&body, {"j"});
    Index at(is.size(), imm(0));
    at[dim] = j;
    kb.emit(store(ob, j, call("check_index", DType::I64, {cast(DType::I64, kb.value_at(index, at)), imm(ss[dim]), imm(index_check_site(n))})));
    kb.pop_scope();
    kb.emit(for_loop("j", N, LoopKind::Parallel, std::move(body), "the index's column along its dim"));
    kb.pop_scope();
    Kernel k = kb.finish(block(std::move(top)));
    add_kernel_step(kb, std::move(k), grp.id);
  }
  // (2) Sorted, with their positions (equal rows keep their order).
  const int sorted = temp_buffer(DType::I64, {N}, fmt::format("%{} destination rows, sorted", n->name()));
  const int positions = temp_buffer(DType::I64, {N}, fmt::format("%{} source rows, by destination", n->name()));
  {
    SortKernel s;
    s.dtype = DType::I64;
    s.outer = 1;
    s.n = s.k = N;
    s.inner = 1;
    std::vector<int> args{keys, sorted, positions};
    Kernel k = routine_kernel(grp, args, {BufferRole::Input, BufferRole::Output, BufferRole::Output},
                              fmt::format("sort: the destination rows of %{} (scatter_add by sorted index)", n->name()));
    k.sort = s;
    add_kernel_step(std::move(k), std::move(args), grp.id);
  }
  // (3) Each run's rows added to its destination row.
  {
    SortedScatterKernel s;
    s.src = dt;
    s.acc = out_.buffers[static_cast<size_t>(acc_gb)].meta.dtype;
    s.outer = outer;
    s.n = N;
    s.rows = ss[dim];
    s.inner = inner;
    std::vector<int> args{acc_gb, sorted, positions, contiguous_buffer(src, fmt::format("source of %{} (scatter_add)", n->name()))};
    Kernel k = routine_kernel(grp, args, {BufferRole::Output, BufferRole::Input, BufferRole::Input, BufferRole::Input},
                              fmt::format("{}: by sorted index, a thread per run of equal rows and column", group_comment(grp)));
    k.sorted_scatter = s;
    add_kernel_step(std::move(k), std::move(args), grp.id);
  }
  return true;
}

}  // namespace kiln::codegen::detail
