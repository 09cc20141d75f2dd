// Lowering of attention groups (flash_attention, flash_attention_backward): kernels of their own
// kind (codegen/attention.h) over contiguous buffers, the batch dims flattened. The forward is
// one kernel writing the output and the log-sum-exp; the backward two: dK and dV per key tile,
// then dQ per query tile, each recomputing the weights from the saved log-sum-exp.
#include <fmt/format.h>

#include "codegen/attention.h"
#include "codegen/lower_internal.h"

namespace kiln::codegen::detail {

void GraphLowering::lower_attention(const FusionGroup& grp) {
  KILN_INTERNAL_ASSERT(grp.nodes.size() == 1, "an attention group holds one node");
  const Node* n = grp.nodes[0];
  const bool forward = n->op() == Op::FlashAttention;
  const int first_qkv = forward ? 0 : 1;  // the backward's inputs start with grad_out
  const Shape& qs = n->input(first_qkv).meta().shape;
  const Shape& ks = n->input(first_qkv + 1).meta().shape;
  const Shape& vs = n->input(first_qkv + 2).meta().shape;
  AttentionKernel a;
  a.dtype = n->input(first_qkv).meta().dtype;
  a.batch = numel(Shape(qs.begin(), qs.end() - 2));
  a.L = qs[qs.size() - 2];
  a.E = qs.back();
  a.S = ks[ks.size() - 2];
  a.Ev = vs.back();
  a.causal = n->attrs().get_bool("is_causal");
  a.scale = n->attrs().get_float("scale");
  attention_dtype_code(a.dtype);  // a dtype with no routine fails here, naming it

  std::vector<int> inputs;
  for (Value v : n->inputs()) inputs.push_back(contiguous_buffer(v, fmt::format("input of %{} ({})", n->name(), op_name(n->op()))));
  std::vector<int> results;
  for (int r = 0; r < n->num_results(); ++r) results.push_back(new_buffer(Value{const_cast<Node*>(n), r}));

  // One kernel of pass `pass` over graph buffers `args` (inputs first, then outputs).
  auto add = [&](AttentionKernel::Pass pass, std::vector<int> args, size_t num_inputs, const std::string& what) {
    Kernel k;
    k.name = kernel_name(&grp);
    k.comment = fmt::format("attention: %{} = {} ({})", n->name(), op_name(n->op()), what);
    for (size_t i = 0; i < args.size(); ++i) {
      const GraphBuffer& gb = out_.buffers[static_cast<size_t>(args[i])];
      Buffer b;
      b.name = fmt::format("b{}", i);
      b.dtype = gb.meta.dtype;
      b.role = i < num_inputs ? BufferRole::Input : BufferRole::Output;
      b.numel = gb.meta.numel();
      b.what = gb.what;
      k.buffers.push_back(b);
    }
    k.attention = a;
    k.attention->pass = pass;
    k.body = block({});
    add_kernel_step(std::move(k), std::move(args), grp.id);
  };
  if (forward) {
    add(AttentionKernel::Pass::Forward, {inputs[0], inputs[1], inputs[2], results[0], results[1]}, 3, "forward");
    return;
  }
  // inputs: dout, q, k, v, lse, delta; results: dq, dk, dv.
  std::vector<int> kv = inputs, q = inputs;
  kv.push_back(results[1]);
  kv.push_back(results[2]);
  q.push_back(results[0]);
  add(AttentionKernel::Pass::BackwardKV, kv, 6, "dK and dV per key tile");
  add(AttentionKernel::Pass::BackwardQ, q, 6, "dQ per query tile");
}

}  // namespace kiln::codegen::detail
