#include "passes/autograd/joint.h"
#include "passes/decompose.h"
#include "passes/fuse_attention.h"
#include "passes/merge_linears.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {


// The wrt inputs by name, checked: known, floating, named once.
std::vector<Node*> wrt_inputs(const Graph& g, const std::vector<std::string>& names) {
  std::vector<Node*> out;
  if (names.empty()) {
    for (Node* in : g.inputs())
      if (is_floating(in->meta().dtype)) out.push_back(in);
    return out;
  }
  for (const std::string& name : names) {
    auto it = std::find_if(g.inputs().begin(), g.inputs().end(), [&](Node* in) { return in->name() == name; });
    if (it == g.inputs().end()) fail("build_joint: graph '{}' has no input named '%{}' to differentiate", g.name(), name);
    if (!is_floating((*it)->meta().dtype))
      fail("build_joint: input '%{}' is {} and has no gradient (only floating-point inputs do)", name,
           (*it)->meta().str());
    if (std::find(out.begin(), out.end(), *it) != out.end()) fail("build_joint: input '%{}' is named twice in wrt", name);
    out.push_back(*it);
  }
  return out;
}

// Which values carry a gradient back to a wrt input: floating results of differentiable
// nodes with such an input (PyTorch's requires_grad, computed forward).
std::unordered_set<Value> requires_grad(const Graph& g, const std::vector<Node*>& wrt) {
  std::unordered_set<Value> rg;
  for (Node* in : wrt) rg.insert(in->result(0));
  for (Node* n : g.nodes()) {
    if (!is_differentiable(n->op())) continue;
    bool any = std::any_of(n->inputs().begin(), n->inputs().end(), [&](const Value& v) { return rg.count(v) > 0; });
    if (!any) continue;
    for (int i = 0; i < n->num_results(); ++i)
      if (is_floating(n->meta(i).dtype)) rg.insert(n->result(i));
  }
  return rg;
}

// Sums the gradient contributions reaching each value.
class GradMap {
 public:
  explicit GradMap(Builder& b) : b_(b) {}
  void accumulate(Value v, Value grad) {
    auto [it, fresh] = grads_.emplace(v, grad);
    if (!fresh) it->second = b_.add(it->second, grad);
  }
  Value get(Value v) const {
    auto it = grads_.find(v);
    return it == grads_.end() ? Value{} : it->second;
  }

 private:
  Builder& b_;
  std::unordered_map<Value, Value> grads_;
};

// Checks a rule's answer for input i: the gradient has the input's shape and dtype.
void check_gradient(const Node& n, int i, Value grad) {
  const TensorMeta& in = n.input(i).meta();
  if (grad.meta().shape != in.shape || grad.meta().dtype != in.dtype)
    fail("build_joint: the derivative rule of '{}' (node %{}) gave input {} a gradient of type {}, expected {}",
         op_name(n.op()), n.name(), i, grad.meta().str(), in.contiguous().str());
}

// Removes backward nodes nothing reads (a rule may build more than the caller needs).
void erase_unused(Graph& g, const std::unordered_set<const Node*>& forward_nodes) {
  std::vector<Node*> nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (forward_nodes.count(n) || n->has_uses()) continue;
    bool output = false;
    for (int i = 0; i < n->num_results(); ++i) output |= g.is_used(n->result(i));
    if (!output) g.erase(n);
  }
}

// Gives `v` the name `name`, or, when `v` must keep its own name (a tangent, a forward value,
// another input's gradient), a cheap copy of it with that name.
Value named_output(Graph& g, Builder& b, Value v, const std::string& name, bool keep_name,
                   const std::unordered_set<const Node*>& fixed_names) {
  if (keep_name) {
    Attrs a;
    a.set("dtype", v.meta().dtype);
    v = b.op(Op::To, {v}, a).v;  // a same-dtype `to` copies; canonicalize removes it later
  }
  if (v.name() == name) return v;
  // A backward intermediate that happens to hold the name moves aside; a forward value keeps it.
  if (Value taken = g.find(name); taken && !fixed_names.count(taken.node))
    g.rename(taken, g.fresh_name(name));
  g.rename(v, g.find(name) ? g.fresh_name(name) : name);
  return v;
}

}  // namespace

JointGraph build_joint(const Graph& forward, const JointOptions& options) {
  JointGraph joint;
  joint.graph = forward.clone();
  Graph& g = joint.graph;
  if (options.fuse_attention) run_fuse_attention(g);
  if (options.merge_linears) run_merge_linears(g);
  decompose_ops(g, decomposed_before_differentiation());
  std::vector<Node*> wrt = wrt_inputs(g, options.wrt);
  for (Node* in : wrt) joint.wrt.push_back(in->name());
  joint.num_primals = static_cast<int>(g.inputs().size());
  joint.num_forward_outputs = static_cast<int>(g.outputs().size());

  std::vector<Node*> forward_order = g.nodes();
  std::unordered_set<const Node*> forward_nodes(forward_order.begin(), forward_order.end());
  std::unordered_set<const Node*> keep_names = forward_nodes;  // values whose names are not ours to change
  for (Node* in : g.inputs()) keep_names.insert(in);
  auto rg = requires_grad(g, wrt);

  Builder b(g);
  b.set_name_prefix("grad_");
  GradMap grads(b);

  // One tangent per floating output position, seeding the gradient of that output.
  const std::vector<Value> forward_outputs = g.outputs();
  for (size_t i = 0; i < forward_outputs.size(); ++i) {
    const Value& out = forward_outputs[i];
    if (!is_floating(out.meta().dtype) || (options.seeded_outputs >= 0 && i >= static_cast<size_t>(options.seeded_outputs))) {
      joint.tangent_for_output.push_back(-1);
      continue;
    }
    Value t = g.add_input(g.fresh_name("tangent_" + out.name()), out.meta().contiguous());
    keep_names.insert(t.node);
    joint.tangent_for_output.push_back(static_cast<int>(g.inputs().size()) - 1);
    ++joint.num_tangents;
    if (rg.count(out)) grads.accumulate(out, t);
  }

  // Reverse topological order: every user of a value is done before the value's producer.
  // The Builder appends, so the nodes made for one forward node are the next `count` in order.
  std::vector<std::pair<const Node*, size_t>> made_by;  // forward node, how many nodes it made
  for (auto it = forward_order.rbegin(); it != forward_order.rend(); ++it) {
    Node* n = *it;
    const size_t count_before = g.num_nodes();
    std::vector<bool> needs(n->inputs().size());
    bool any_needed = false;
    for (size_t i = 0; i < needs.size(); ++i) any_needed |= needs[i] = rg.count(n->input(static_cast<int>(i))) > 0;
    if (!any_needed || !is_differentiable(n->op())) continue;
    std::vector<Value> gouts;
    bool any_grad = false;
    for (int r = 0; r < n->num_results(); ++r) {
      gouts.push_back(grads.get(n->result(r)));
      any_grad |= static_cast<bool>(gouts.back());
    }
    if (!any_grad) continue;
    const VjpRule* rule = find_vjp(n->op());
    if (!rule)
      fail("build_joint: op '{}' (node %{}) has no derivative rule, but a gradient flows through it", op_name(n->op()),
           n->name());
    std::unique_ptr<bool[]> needs_flags(new bool[needs.size()]);
    for (size_t i = 0; i < needs.size(); ++i) needs_flags[i] = needs[i];
    VjpContext ctx{b, *n, gouts, std::span<const bool>(needs_flags.get(), needs.size())};
    std::vector<Value> in_grads = (*rule)(ctx);
    if (in_grads.size() != needs.size())
      fail("build_joint: the derivative rule of '{}' (node %{}) returned {} gradients for {} inputs", op_name(n->op()),
           n->name(), in_grads.size(), needs.size());
    for (size_t i = 0; i < needs.size(); ++i) {
      if (!needs[i] || !in_grads[i]) continue;
      check_gradient(*n, static_cast<int>(i), in_grads[i]);
      grads.accumulate(n->input(static_cast<int>(i)), in_grads[i]);
    }
    made_by.emplace_back(n, g.num_nodes() - count_before);
  }
  // Recorded by node, not name: the names of gradients are settled only below.
  std::unordered_map<const Node*, const Node*> made_for;
  {
    std::vector<Node*> all = g.nodes();
    size_t next = forward_order.size();
    for (const auto& [forward_node, count] : made_by)
      for (size_t k = 0; k < count; ++k) made_for[all.at(next++)] = forward_node;
  }

  std::vector<Value> outputs = g.outputs();
  std::unordered_set<Value> claimed;
  for (Node* in : wrt) {
    Value grad = grads.get(in->result(0));
    if (!grad) grad = b.zeros(in->meta().shape, in->meta().dtype);
    // Two inputs may share one gradient value (y = a + b): the second gets its own copy.
    bool keep_name = keep_names.count(grad.node) > 0 || claimed.count(grad) > 0;
    grad = named_output(g, b, grad, "grad_" + in->name(), keep_name, keep_names);
    claimed.insert(grad);
    outputs.push_back(grad);
  }
  g.set_outputs(outputs);
  erase_unused(g, forward_nodes);
  // Only live nodes are looked up (erased ones stay in made_for as keys, never read), and no
  // node was made after the erasing, so no address was reused.
  for (Node* n : g.nodes())
    if (auto it = made_for.find(n); it != made_for.end()) joint.derivative_of[n->name()] = it->second->name();
  verify_or_throw(g, "build_joint");
  return joint;
}

}  // namespace kiln::autograd
