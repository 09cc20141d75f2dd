// FSDP (ZeRO-3) as graph ops: every rank holds 1/world_size of each parameter (flattened,
// zero-padded to a multiple of world_size) and of its optimizer state. The loss graph reads the
// whole parameter through all_gather(shard) -> slice -> reshape; the derivative of all_gather
// is reduce_scatter, so the gradient arrives already sharded, and the optimizer updates the
// shard alone. The backward gathers each parameter again instead of keeping the forward's copy
// alive (what FSDP's reshard_after_forward does), so a whole parameter lives only while it is
// used. CSE keeps the two gathers apart (passes/cse.cpp: collectives are transfers).
#include "frontend/fsdp.h"

#include <fmt/format.h>

#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"

namespace kiln::fsdp {

int64_t shard_numel(int64_t numel, int64_t world) { return (numel + world - 1) / world; }

TracedGraph shard_loss(const TracedGraph& loss, const std::vector<bool>& trained, int64_t world) {
  const Graph& g = loss.graph;
  const size_t num_lifted = loss.parameters.size(), num_batch = g.inputs().size() - num_lifted;
  TracedGraph out{Graph(g.name()), loss.parameters, loss.parameter_names, loss.parameter_paths, loss.parameter_tensors, loss.written};
  Graph& s = out.graph;
  ValueMap map;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    Node* in = g.inputs()[i];
    const bool shard = i >= num_batch && trained[i - num_batch];
    if (!shard) {
      map[in->result(0)] = s.add_input(in->name(), in->meta());
      continue;
    }
    const TensorMeta& m = in->meta();
    map[in->result(0)] = s.add_input(in->name(), TensorMeta(m.dtype, {shard_numel(m.numel(), world)}));
  }
  // The gathers go after the inputs, in parameter order, named after what they rebuild.
  Builder b(s);
  for (size_t i = 0; i < num_lifted; ++i) {
    if (!trained[i]) continue;
    Node* in = g.inputs()[num_batch + i];
    const TensorMeta& m = in->meta();
    Value part = map.at(in->result(0));
    Var whole = b.op(Op::AllGather, {part}, Attrs{{"world_size", world}, {"dim", int64_t(0)}}, "fsdp_gather_" + in->name());
    if (whole.meta().numel() != m.numel()) whole = b.slice(whole.v, 0, 0, m.numel());
    map[in->result(0)] = b.reshape(whole.v, m.shape).v;
  }
  for (const Node* n : g.nodes()) copy_node(s, *n, map);
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(map.at(v));
  s.set_outputs(std::move(outs));
  // The example values of sharded parameters become rank 0's shards: tracing the step only needs
  // their shapes; a rank's own come from TrainStep::shard.
  for (size_t i = 0; i < num_lifted; ++i)
    if (trained[i]) out.parameters[i] = shard_of(loss.parameters[i], world, 0);
  return out;
}

void gather_again_for_backward(Graph& g, Value loss) {
  // The forward: what the loss depends on.
  std::unordered_set<const Node*> forward;
  std::vector<const Node*> stack{loss.node};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!forward.insert(n).second) continue;
    for (const Value& v : n->inputs()) stack.push_back(v.node);
  }
  std::vector<Node*> order = g.nodes();
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (Node* gather : order) {
    if (gather->op() != Op::AllGather || gather->name().rfind("fsdp_gather_", 0) != 0) continue;
    // gather -> (slice) -> reshape: the whole parameter, read by forward and backward nodes.
    std::vector<Node*> chain{gather};
    while (chain.back()->result_info(0).uses.size() == 1) {
      Node* next = chain.back()->result_info(0).uses[0].user;
      if (next->op() != Op::Slice && next->op() != Op::Reshape) break;
      chain.push_back(next);
    }
    Node* whole = chain.back();
    std::vector<Use> backward_uses;
    for (const Use& u : whole->result_info(0).uses)
      if (!forward.count(u.user)) backward_uses.push_back(u);
    if (backward_uses.empty()) continue;
    Node* first = backward_uses[0].user;
    for (const Use& u : backward_uses)
      if (position.at(u.user) < position.at(first)) first = u.user;
    // The copy goes just before the backward's first reader, so that the forward's copy can be
    // freed once the forward is done with it.
    Builder b(g, first);
    Value v = gather->input(0);
    for (Node* n : chain) v = b.op(n->op(), {v}, n->attrs(), n->name() + "_again").v;
    for (const Use& u : backward_uses) u.user->set_input(u.input_index, v);
  }
}

HostTensor shard_of(const HostTensor& whole, int64_t world, int64_t rank) {
  const int64_t n = whole.numel(), part = shard_numel(n, world);
  std::vector<double> v(static_cast<size_t>(part), 0.0);
  for (int64_t i = 0; i < part; ++i)
    if (rank * part + i < n) v[static_cast<size_t>(i)] = whole.get(rank * part + i);
  return HostTensor::from_doubles(whole.dtype(), {part}, v);
}

}  // namespace kiln::fsdp
