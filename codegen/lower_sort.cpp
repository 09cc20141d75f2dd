// Lowering of sort and topk (codegen/sort.h): one kernel per node over a contiguous input.
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
  Kernel k;
  k.name = kernel_name(&grp);
  k.comment = fmt::format("sort: %{} = {}", n->name(), op_name(n->op()));
  for (size_t i = 0; i < args.size(); ++i) {
    const GraphBuffer& gb = out_.buffers[static_cast<size_t>(args[i])];
    Buffer b;
    b.name = fmt::format("b{}", i);
    b.dtype = gb.meta.dtype;
    b.role = i == 0 ? BufferRole::Input : i < 3 ? BufferRole::Output : BufferRole::Temp;
    b.numel = gb.meta.numel();
    b.what = gb.what;
    k.buffers.push_back(b);
  }
  k.sort = s;
  k.body = block({});
  add_kernel_step(std::move(k), std::move(args), grp.id);
}

}  // namespace kiln::codegen::detail
