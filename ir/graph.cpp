#include "ir/graph.h"

#include <algorithm>
#include <atomic>

#include "ir/error.h"

namespace kiln {

const TensorMeta& Value::meta() const { return node->meta(index); }
const std::string& Value::name() const { return node->result_info(index).name; }

uint64_t Graph::next_id() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

Graph& Graph::operator=(Graph&& o) noexcept {
  id_ = o.id_;
  o.id_ = next_id();
  name_ = std::move(o.name_);
  inputs_ = std::move(o.inputs_);
  input_storage_ = std::move(o.input_storage_);
  nodes_ = std::move(o.nodes_);
  outputs_ = std::move(o.outputs_);
  names_ = std::move(o.names_);
  name_counters_ = std::move(o.name_counters_);
  for (auto& n : input_storage_) n->graph_ = this;
  for (auto& n : nodes_) n->graph_ = this;
  return *this;
}

bool Node::has_uses() const {
  for (auto& r : results_)
    if (!r.uses.empty()) return true;
  return false;
}

void Node::set_input(int i, Value v) {
  Value old = inputs_.at(i);
  auto& old_uses = old.node->results_[old.index].uses;
  old_uses.erase(std::find(old_uses.begin(), old_uses.end(), Use{this, i}));
  inputs_[i] = v;
  v.node->results_[v.index].uses.push_back(Use{this, i});
}

std::string Graph::fresh_name(const std::string& base) {
  std::string b = base.empty() ? "v" : base;
  if (!names_.count(b)) return b;
  int& k = name_counters_[b];
  std::string candidate;
  do candidate = b + "_" + std::to_string(++k);
  while (names_.count(candidate));
  return candidate;
}

void Graph::name_results(Node* n, const std::string& name) {
  std::string base = name.empty() ? std::string(op_short_name(n->op_)) : name;
  for (int i = 0; i < n->num_results(); ++i) {
    std::string nm = fresh_name(i == 0 ? base : base + "_" + std::to_string(i));
    n->results_[i].name = nm;
    names_[nm] = Value{n, i};
  }
}

Value Graph::add_input(const std::string& name, TensorMeta meta) {
  if (name.empty()) fail("a graph input needs a name");
  if (names_.count(name)) fail("graph '{}' already has a value named '%{}'", name_, name);
  auto node = std::unique_ptr<Node>(new Node(this, Op::Input));
  Node* n = node.get();
  n->results_.push_back(Result{name, std::move(meta), {}});
  names_[name] = Value{n, 0};
  input_storage_.push_back(std::move(node));
  inputs_.push_back(n);
  return Value{n, 0};
}

Node* Graph::add_node(Op op, std::vector<Value> inputs, const Attrs& attrs, const std::string& name, Node* before) {
  const OpInfo& info = op_info(op);
  if (info.category == OpCategory::Placeholder) fail("'{}' cannot be used as an op", info.name);
  std::vector<TensorMeta> in_metas;
  for (auto& v : inputs) {
    KILN_INTERNAL_ASSERT(v.node && v.node->graph_ == this, "node inputs belong to the same graph");
    in_metas.push_back(v.meta());
  }
  Attrs completed = complete_attrs(info, attrs, inputs.size());
  std::vector<TensorMeta> metas = infer_meta(info, in_metas, completed);
  // Every result's element and byte counts fit int64 (an expand to a 37-dim shape did not, and
  // printing its type then failed without a location; found by libFuzzer).
  for (const TensorMeta& m : metas) m.nbytes();
  auto node = std::unique_ptr<Node>(new Node(this, op));
  Node* n = node.get();
  n->inputs_ = std::move(inputs);
  n->attrs_ = std::move(completed);
  for (auto& m : metas) n->results_.push_back(Result{"", std::move(m), {}});
  name_results(n, name);
  for (int i = 0; i < static_cast<int>(n->inputs_.size()); ++i) {
    Value v = n->inputs_[i];
    v.node->results_[v.index].uses.push_back(Use{n, i});
  }
  auto pos = before ? before->self_ : nodes_.end();
  n->self_ = nodes_.insert(pos, std::move(node));
  return n;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (auto& n : nodes_) out.push_back(n.get());
  return out;
}

bool Graph::is_used(Value v) const {
  if (!v.node->results_[v.index].uses.empty()) return true;
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

void Graph::replace_all_uses(Value from, Value to) {
  if (from == to) return;
  auto uses = from.node->results_[from.index].uses;  // copy: set_input edits the list
  for (auto& u : uses) u.user->set_input(u.input_index, to);
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Graph::erase(Node* n) {
  KILN_INTERNAL_ASSERT(!n->is_input(), "graph inputs are not erased");
  KILN_INTERNAL_ASSERT(!n->has_uses(), "an erased node has no uses");
  for (int i = 0; i < n->num_results(); ++i)
    KILN_INTERNAL_ASSERT(!is_used(n->result(i)), "an erased node is not a graph output");
  for (int i = 0; i < static_cast<int>(n->inputs_.size()); ++i) {
    Value v = n->inputs_[i];
    auto& uses = v.node->results_[v.index].uses;
    uses.erase(std::find(uses.begin(), uses.end(), Use{n, i}));
  }
  for (auto& r : n->results_) names_.erase(r.name);
  nodes_.erase(n->self_);
}

void Graph::rename(Value v, const std::string& name) {
  if (names_.count(name)) fail("a value named '%{}' exists already", name);
  names_.erase(v.name());
  v.node->results_[v.index].name = name;
  names_[name] = v;
}

Value Graph::find(const std::string& name) const {
  auto it = names_.find(name);
  return it == names_.end() ? Value{} : it->second;
}

bool Graph::reinfer_types() {
  bool changed = false;
  for (auto& up : nodes_) {
    Node* n = up.get();
    std::vector<TensorMeta> in_metas;
    for (auto& v : n->inputs_) in_metas.push_back(v.meta());
    std::vector<TensorMeta> metas = infer_meta(n->info(), in_metas, n->attrs_);
    KILN_INTERNAL_ASSERT(static_cast<int>(metas.size()) == n->num_results(), "re-inference keeps the result count");
    for (int i = 0; i < n->num_results(); ++i) {
      if (!(metas[i] == n->results_[i].meta)) {
        n->results_[i].meta = metas[i];
        changed = true;
      }
    }
  }
  return changed;
}

std::vector<Node*> Graph::nodes_before(const Node* n, size_t k) const {
  std::vector<Node*> out;
  for (auto it = n->self_; out.size() < k && it != nodes_.begin();) out.push_back((--it)->get());
  return out;
}

Graph Graph::clone() const {
  Graph g(name_);
  std::unordered_map<const Node*, Node*> map;
  for (Node* in : inputs_) map[in] = g.add_input(in->name(), in->meta()).node;
  for (auto& up : nodes_) {
    const Node* n = up.get();
    auto node = std::unique_ptr<Node>(new Node(&g, n->op_));
    Node* c = node.get();
    c->attrs_ = n->attrs_;
    c->origin_ = n->origin_;
    c->results_ = n->results_;
    for (auto& r : c->results_) r.uses.clear();
    for (int i = 0; i < static_cast<int>(n->inputs_.size()); ++i) {
      Value v{map.at(n->inputs_[i].node), n->inputs_[i].index};
      c->inputs_.push_back(v);
      v.node->results_[v.index].uses.push_back(Use{c, i});
    }
    for (int i = 0; i < c->num_results(); ++i) g.names_[c->results_[i].name] = Value{c, i};
    c->self_ = g.nodes_.insert(g.nodes_.end(), std::move(node));
    map[n] = c;
  }
  for (auto& o : outputs_) g.outputs_.push_back(Value{map.at(o.node), o.index});
  g.name_counters_ = name_counters_;
  return g;
}

Node* copy_node(Graph& dst, const Node& n, ValueMap& map, const std::string& name, const Attrs* attrs) {
  std::vector<Value> inputs;
  for (const Value& v : n.inputs()) {
    auto it = map.find(v);
    KILN_INTERNAL_ASSERT(it != map.end(), "copy_node: the producer of %" + v.name() + " was not copied first");
    inputs.push_back(it->second);
  }
  Node* copy = dst.add_node(n.op(), std::move(inputs), attrs ? *attrs : n.attrs(), name.empty() ? n.name() : name);
  for (int i = 0; i < n.num_results(); ++i) {
    const std::string& own = n.result_info(i).name;
    if (name.empty() && copy->result_info(i).name != own && !dst.find(own)) dst.rename(copy->result(i), own);
    map[Value{const_cast<Node*>(&n), i}] = copy->result(i);
  }
  return copy;
}

}  // namespace kiln
