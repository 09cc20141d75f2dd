// The partitioners (AOTAutograd's default_partition and a simplified
// min_cut_rematerialization_partition).
//
// Both choose a set of saved values; everything else follows from that choice:
//   forward  = what the forward outputs and the saved values need, from the primals;
//   backward = what the grads need, from the saved values and the tangents.
// A forward node the backward needs again without it being saved is copied into the backward
// (recomputed).
#include "passes/autograd/partition.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/log.h"
#include "ir/verifier.h"
#include "passes/autograd/min_cut.h"
#include "passes/dce.h"

namespace kiln::autograd {
namespace {

using ValueSet = std::unordered_set<Value>;
using NodeSet = std::unordered_set<const Node*>;

// What each joint node is: the facts both partitioners start from.
struct Classified {
  const JointGraph& joint;
  std::vector<const Node*> order;  // inputs, then nodes, in the joint's order
  NodeSet primals, tangents;
  NodeSet tangent_dependent;       // reachable from a tangent (tangents included)
  NodeSet forward_required;        // needed by the forward outputs (primals included)
  NodeSet live;                    // needed by any output

  bool is_grad_output(Value v) const {
    const auto& outs = joint.graph.outputs();
    return std::find(outs.begin() + joint.num_forward_outputs, outs.end(), v) != outs.end();
  }
  // Computed in the forward by the default partition (primals count: they are the forward's inputs).
  bool forward_side(const Node* n) const { return primals.count(n) || forward_required.count(n); }
};

// Every node `roots` need, walking inputs back and stopping at nodes `stop` says.
NodeSet ancestors(const std::vector<const Node*>& roots, const std::function<bool(const Node*)>& stop) {
  NodeSet seen;
  std::vector<const Node*> stack;
  for (const Node* r : roots)
    if (seen.insert(r).second) stack.push_back(r);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (stop(n)) continue;
    for (const Value& v : n->inputs())
      if (seen.insert(v.node).second) stack.push_back(v.node);
  }
  return seen;
}

Classified classify(const JointGraph& joint) {
  const Graph& g = joint.graph;
  int num_inputs = static_cast<int>(g.inputs().size());
  int num_outputs = static_cast<int>(g.outputs().size());
  if (joint.num_primals < 0 || joint.num_tangents < 0 || joint.num_primals + joint.num_tangents != num_inputs)
    fail("partition: joint graph '{}' has {} inputs, not {} primals + {} tangents", g.name(), num_inputs,
         joint.num_primals, joint.num_tangents);
  if (joint.num_forward_outputs < 0 || joint.num_forward_outputs > num_outputs)
    fail("partition: joint graph '{}' has {} outputs, fewer than its {} forward outputs", g.name(), num_outputs,
         joint.num_forward_outputs);

  Classified c{joint, {}, {}, {}, {}, {}, {}};
  for (int i = 0; i < num_inputs; ++i) {
    const Node* in = g.inputs()[static_cast<size_t>(i)];
    c.order.push_back(in);
    (i < joint.num_primals ? c.primals : c.tangents).insert(in);
  }
  for (const Node* n : g.nodes()) c.order.push_back(n);

  c.tangent_dependent = c.tangents;
  for (const Node* n : g.nodes())
    for (const Value& v : n->inputs())
      if (c.tangent_dependent.count(v.node)) {
        c.tangent_dependent.insert(n);
        break;
      }

  std::vector<const Node*> fwd_roots, all_roots;
  for (int i = 0; i < num_outputs; ++i) {
    const Node* n = g.outputs()[static_cast<size_t>(i)].node;
    all_roots.push_back(n);
    if (i < joint.num_forward_outputs) fwd_roots.push_back(n);
  }
  auto is_input = [](const Node* n) { return n->is_input(); };
  c.forward_required = ancestors(fwd_roots, is_input);
  for (const Node* n : c.forward_required)
    if (c.tangent_dependent.count(n))
      fail("partition: forward output of joint graph '{}' depends on a tangent (through %{})", g.name(), n->name());
  c.live = ancestors(all_roots, is_input);
  return c;
}

// Saved values in a stable order: the joint's order of their nodes, then result index.
std::vector<Value> in_joint_order(const Classified& c, const ValueSet& values) {
  std::vector<Value> out;
  for (const Node* n : c.order)
    for (int i = 0; i < n->num_results(); ++i) {
      Value v{const_cast<Node*>(n), i};
      if (values.count(v)) out.push_back(v);
    }
  return out;
}

// default_partition: every forward-side value a backward node reads (or a grad is) is saved.
ValueSet default_saved(const Classified& c) {
  ValueSet saved;
  for (const Node* n : c.order) {
    if (n->is_input() || !c.live.count(n) || c.forward_side(n)) continue;
    for (const Value& v : n->inputs())
      if (c.forward_side(v.node)) saved.insert(v);
  }
  for (int i = c.joint.num_forward_outputs; i < static_cast<int>(c.joint.graph.outputs().size()); ++i) {
    Value v = c.joint.graph.outputs()[static_cast<size_t>(i)];
    if (c.forward_side(v.node)) saved.insert(v);
  }
  return saved;
}

// Cheap enough to compute again in the backward instead of saving: elementwise work, views
// and constants. Matmuls, reductions, indexing and random ops (and composites made of them)
// are always saved when the backward needs them.
bool recomputable(const Node& n) {
  switch (n.category()) {
    case OpCategory::Pointwise:
    case OpCategory::View:
    case OpCategory::Creation:
      return true;
    case OpCategory::Composite:
      return n.op() == Op::Tril || n.op() == Op::Triu;
    default:
      return false;
  }
}

// The min-cut choice. Each value v of a node n that is not tangent-dependent is an edge
// in(n) -> out(v) whose capacity is v's bytes; cutting it means saving v. Primals and the
// forward's non-recomputable nodes hang off the source (they exist only in the forward);
// values read by tangent-dependent nodes or returned as grads feed the sink (the backward
// needs them). Every source-sink path must cross a saved value. The default's choice is
// one such cut, so the minimum never saves more bytes.
ValueSet min_cut_saved(const Classified& c) {
  FlowNetwork net(2);
  const int source = 0, sink = 1;
  std::unordered_map<const Node*, int> in_vertex;
  std::unordered_map<Value, int> out_vertex;
  std::vector<const Node*> members;
  for (const Node* n : c.order) {
    if (!c.live.count(n) && !c.primals.count(n)) continue;
    if (c.tangent_dependent.count(n)) continue;
    members.push_back(n);
    in_vertex[n] = net.add_vertex();
    for (int i = 0; i < n->num_results(); ++i) out_vertex[Value{const_cast<Node*>(n), i}] = net.add_vertex();
  }
  for (const Node* n : members) {
    int in = in_vertex.at(n);
    bool pinned = c.primals.count(n) || (c.forward_required.count(n) && !recomputable(*n));
    if (pinned) net.add_edge(source, in, FlowNetwork::kInfinite);
    for (int i = 0; i < n->num_results(); ++i) {
      Value v{const_cast<Node*>(n), i};
      int out = out_vertex.at(v);
      net.add_edge(in, out, v.meta().nbytes());
      for (const Use& u : n->result_info(i).uses) {
        if (!c.live.count(u.user)) continue;
        if (c.tangent_dependent.count(u.user)) net.add_edge(out, sink, FlowNetwork::kInfinite);
        else net.add_edge(out, in_vertex.at(u.user), FlowNetwork::kInfinite);
      }
      if (c.is_grad_output(v)) net.add_edge(out, sink, FlowNetwork::kInfinite);
    }
  }
  FlowNetwork::Cut cut = net.min_cut(source, sink);
  KILN_INTERNAL_ASSERT(!cut.infinite(), "the default partition is a finite cut of the min-cut network");
  ValueSet saved;
  for (const auto& [v, out] : out_vertex)
    if (cut.source_side[static_cast<size_t>(in_vertex.at(v.node))] && !cut.source_side[static_cast<size_t>(out)])
      saved.insert(v);
  return saved;
}

// Copies joint node `n` into `dst` with inputs mapped through `map`, keeping its result names.
// Unlike ir/graph.h's copy_node, results `map` already holds (saved values the backward receives
// as inputs) keep their mapping; the copy's own result of that kind gets a fresh name, unused.
void copy_joint_node(Graph& dst, const Node& n, ValueMap& map) {
  std::vector<Value> inputs;
  for (const Value& v : n.inputs()) {
    auto it = map.find(v);
    KILN_INTERNAL_ASSERT(it != map.end(), "a copied node's inputs are copied before it");
    inputs.push_back(it->second);
  }
  auto mapped = [&](int i) { return map.count(Value{const_cast<Node*>(&n), i}) > 0; };
  Node* copy = dst.add_node(n.op(), std::move(inputs), n.attrs(), mapped(0) ? "" : n.name());
  // Later results got names derived from the first: move them aside, then to their own.
  for (int i = 0; i < n.num_results(); ++i)
    if (!mapped(i) && copy->result_info(i).name != n.result_info(i).name)
      dst.rename(copy->result(i), dst.fresh_name("__partition_tmp"));
  for (int i = 0; i < n.num_results(); ++i) {
    if (mapped(i)) continue;
    if (copy->result_info(i).name != n.result_info(i).name) dst.rename(copy->result(i), n.result_info(i).name);
    map[Value{const_cast<Node*>(&n), i}] = copy->result(i);
  }
}

Partition build(const Classified& c, const std::vector<Value>& saved, PartitionKind kind) {
  const JointGraph& joint = c.joint;
  const Graph& g = joint.graph;
  const auto& outs = g.outputs();
  ValueSet saved_set(saved.begin(), saved.end());
  Partition p;

  // Forward: from the primals to the user's outputs and the saved values.
  std::vector<const Node*> fwd_roots;
  for (int i = 0; i < joint.num_forward_outputs; ++i) fwd_roots.push_back(outs[static_cast<size_t>(i)].node);
  for (const Value& v : saved) fwd_roots.push_back(v.node);
  NodeSet fwd_nodes = ancestors(fwd_roots, [](const Node* n) { return n->is_input(); });
  p.forward = Graph(g.name() + "_forward");
  ValueMap fmap;
  for (const Node* n : c.order) {
    if (c.tangents.count(n)) {
      KILN_INTERNAL_ASSERT(!fwd_nodes.count(n), "the forward does not read tangents");
      continue;
    }
    if (n->is_input()) fmap[Value{const_cast<Node*>(n), 0}] = p.forward.add_input(n->name(), n->meta());
    else if (fwd_nodes.count(n)) copy_joint_node(p.forward, *n, fmap);
  }
  std::vector<Value> fwd_outs;
  for (int i = 0; i < joint.num_forward_outputs; ++i) fwd_outs.push_back(fmap.at(outs[static_cast<size_t>(i)]));
  for (const Value& v : saved) fwd_outs.push_back(fmap.at(v));
  p.forward.set_outputs(std::move(fwd_outs));
  p.num_forward_outputs = joint.num_forward_outputs;

  // Backward: from the saved values and the tangents to the grads.
  // Walks values, not nodes: a node with one result saved may still be needed for another.
  NodeSet bwd_nodes;
  std::vector<const Node*> stack;
  auto need = [&](Value v) {
    if (v.node->is_input() || saved_set.count(v)) return;
    if (bwd_nodes.insert(v.node).second) stack.push_back(v.node);
  };
  for (size_t i = static_cast<size_t>(joint.num_forward_outputs); i < outs.size(); ++i) need(outs[i]);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Value& v : n->inputs()) need(v);
  }
  p.backward = Graph(g.name() + "_backward");
  ValueMap bmap;
  for (const Value& v : saved) {
    bmap[v] = p.backward.add_input(v.name(), v.meta());
    p.saved.push_back(SavedTensor{v.name(), v.meta(), v.meta().nbytes()});
    p.saved_bytes += v.meta().nbytes();
  }
  for (const Node* n : c.order)
    if (c.tangents.count(n)) bmap[Value{const_cast<Node*>(n), 0}] = p.backward.add_input(n->name(), n->meta());
  for (const Node* n : c.order) {
    if (!bwd_nodes.count(n)) continue;
    copy_joint_node(p.backward, *n, bmap);
    if (fwd_nodes.count(n)) ++p.recomputed_nodes;
  }
  std::vector<Value> grads;
  for (size_t i = static_cast<size_t>(joint.num_forward_outputs); i < outs.size(); ++i) {
    auto it = bmap.find(outs[i]);
    KILN_INTERNAL_ASSERT(it != bmap.end(), "every grad is computable from the saved values and the tangents");
    grads.push_back(it->second);
  }
  p.backward.set_outputs(std::move(grads));

  run_dce(p.forward);
  run_dce(p.backward);
  verify_or_throw(p.forward, fmt::format("partition ({}) forward", partition_kind_name(kind)));
  verify_or_throw(p.backward, fmt::format("partition ({}) backward", partition_kind_name(kind)));
  return p;
}

int64_t bytes_of(const std::vector<Value>& values) {
  int64_t total = 0;
  for (const Value& v : values) total += v.meta().nbytes();
  return total;
}

}  // namespace

Partition partition(const JointGraph& joint, PartitionKind kind) {
  Classified c = classify(joint);
  std::vector<Value> saved = in_joint_order(c, default_saved(c));
  int64_t default_bytes = bytes_of(saved);
  if (kind == PartitionKind::MinCut) {
    std::vector<Value> cut = in_joint_order(c, min_cut_saved(c));
    int64_t cut_bytes = bytes_of(cut);
    KILN_INTERNAL_ASSERT(cut_bytes <= default_bytes, "the min cut saves no more than the default");
    if (log_enabled("aot"))
      log_line("aot", fmt::format("min-cut of '{}': {} bytes in {} values (default: {} bytes in {} values){}",
                                  joint.graph.name(), cut_bytes, cut.size(), default_bytes, saved.size(),
                                  cut_bytes < default_bytes ? "" : "; keeping the default"));
    if (cut_bytes < default_bytes) saved = std::move(cut);
  }
  Partition p = build(c, saved, kind);
  if (log_enabled("aot"))
    log_line("aot", fmt::format("partition ({}) of '{}': {} saved values, {} bytes, {} recomputed nodes",
                                partition_kind_name(kind), joint.graph.name(), p.saved.size(), p.saved_bytes,
                                p.recomputed_nodes));
  return p;
}

std::string_view partition_kind_name(PartitionKind kind) {
  switch (kind) {
    case PartitionKind::Default:
      return "default";
    case PartitionKind::MinCut:
      return "mincut";
  }
  return "?";
}

PartitionKind parse_partition_kind(std::string_view name) {
  if (name == "default") return PartitionKind::Default;
  if (name == "mincut" || name == "min_cut" || name == "min-cut") return PartitionKind::MinCut;
  fail("unknown partitioner '{}' (expected 'default' or 'mincut')", name);
}

}  // namespace kiln::autograd
