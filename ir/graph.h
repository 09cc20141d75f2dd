#pragma once
// Graph and Node: an SSA graph of op applications in topological order with use lists.
// A node has one or more results (split has several); a Value names one result. Graph
// inputs (parameters included) are nodes of the pseudo-op `input`.
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attr.h"
#include "ir/op_registry.h"
#include "ir/tensor_meta.h"

namespace kiln {

class Node;
class Graph;

struct Value {
  Node* node = nullptr;
  int index = 0;

  const TensorMeta& meta() const;
  const std::string& name() const;
  explicit operator bool() const { return node != nullptr; }
  bool operator==(const Value&) const = default;
};

}  // namespace kiln

// Values as keys of unordered containers (the autograd passes' value maps and sets).
template <>
struct std::hash<kiln::Value> {
  size_t operator()(const kiln::Value& v) const noexcept {
    return std::hash<const void*>()(v.node) * 31 + static_cast<size_t>(v.index);
  }
};

namespace kiln {

struct Use {
  Node* user;
  int input_index;
  bool operator==(const Use&) const = default;
};

struct Result {
  std::string name;
  TensorMeta meta;
  std::vector<Use> uses;  // node uses only; graph outputs are in Graph::outputs()
};

class Node {
 public:
  Op op() const { return op_; }
  const OpInfo& info() const { return op_info(op_); }
  OpCategory category() const { return info().category; }
  bool is_input() const { return op_ == Op::Input; }

  const std::vector<Value>& inputs() const { return inputs_; }
  const Value& input(int i) const { return inputs_.at(i); }
  const Attrs& attrs() const { return attrs_; }

  int num_results() const { return static_cast<int>(results_.size()); }
  Value result(int i = 0) { return Value{this, i}; }
  const Result& result_info(int i = 0) const { return results_.at(i); }
  const TensorMeta& meta(int i = 0) const { return results_.at(i).meta; }
  const std::string& name() const { return results_.at(0).name; }
  bool has_uses() const;  // by nodes (graph outputs are checked by Graph::is_used)

  Graph* graph() const { return graph_; }
  // Points input i at another value, keeping both values' use lists right.
  void set_input(int i, Value v);
  // The op call a decomposition replaced to make this node ("%loss = cross_entropy"); empty
  // for a node written as it is. Errors from compiled code name it: the user wrote that op.
  const std::string& origin() const { return origin_; }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  friend class Graph;
  Node(Graph* g, Op op) : graph_(g), op_(op) {}
  Graph* graph_;
  Op op_;
  std::vector<Value> inputs_;
  Attrs attrs_;
  std::vector<Result> results_;
  std::string origin_;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Moves re-point every node at its new graph.
  Graph(Graph&& o) noexcept { *this = std::move(o); }
  Graph& operator=(Graph&& o) noexcept;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // An identity no other Graph object of this process has, now or before: a cache keyed by it
  // cannot mistake a new graph for a freed one at the same address. A graph moved into another
  // hands its identity on and gets a new one.
  uint64_t id() const { return id_; }

  // Adds a graph input. Throws kiln::Error if the name is taken.
  Value add_input(const std::string& name, TensorMeta meta);

  // Adds a node computing `op`, inferring its result types from the inputs and attributes
  // (kiln::Error names the op and the input shapes when that fails). Results get `name`
  // (made unique) or a fresh name from the op. The node goes at the end, or before `before`.
  Node* add_node(Op op, std::vector<Value> inputs, const Attrs& attrs = {}, const std::string& name = "",
                 Node* before = nullptr);
  Value add(Op op, std::vector<Value> inputs, const Attrs& attrs = {}, const std::string& name = "") {
    return add_node(op, std::move(inputs), attrs, name)->result(0);
  }

  const std::vector<Value>& outputs() const { return outputs_; }
  void set_outputs(std::vector<Value> outs) { outputs_ = std::move(outs); }
  void set_output(size_t i, Value v) { outputs_.at(i) = v; }

  // Graph inputs in order, then the nodes in topological order.
  const std::vector<Node*>& inputs() const { return inputs_; }
  std::vector<Node*> nodes() const;  // non-input nodes, a snapshot safe to mutate under
  // The (at most) k nodes just before `n` in order: what a Builder inserting before n made.
  std::vector<Node*> nodes_before(const Node* n, size_t k) const;
  size_t num_nodes() const { return nodes_.size(); }

  bool is_used(Value v) const;  // by a node or as a graph output
  // Rewires every use of `from` (nodes and graph outputs) to `to`.
  void replace_all_uses(Value from, Value to);
  // Removes a node none of whose results is used.
  void erase(Node* n);
  // Renames a result; the new name must be free.
  void rename(Value v, const std::string& name);

  Value find(const std::string& name) const;  // by result name; empty Value if none
  std::string fresh_name(const std::string& base);

  // Recomputes every node's result types from its inputs, in order (after a rewrite has
  // rewired inputs, downstream view strides may change). Returns whether any type changed;
  // throws kiln::Error if a node no longer type-checks.
  bool reinfer_types();

  // A deep copy (same names, same order).
  Graph clone() const;

 private:
  void name_results(Node* n, const std::string& name);
  static uint64_t next_id();
  uint64_t id_ = next_id();
  std::string name_;
  std::vector<Node*> inputs_;
  std::list<std::unique_ptr<Node>> input_storage_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<Value> outputs_;
  std::unordered_map<std::string, Value> names_;
  std::unordered_map<std::string, int> name_counters_;
};

// Values of one graph mapped to the values of another, as a copy builds them.
using ValueMap = std::unordered_map<Value, Value>;

// Adds to `dst` a copy of `n` (its op, and its attributes or `attrs` in their place), its inputs
// mapped through `map` (each must be there: copies go in order), and records each of n's results
// in `map`. With no `name` the copy keeps n's result names, each where `dst` does not use it
// yet; with one, its results are named from it as add_node names them. Returns the copy.
Node* copy_node(Graph& dst, const Node& n, ValueMap& map, const std::string& name = "", const Attrs* attrs = nullptr);

}  // namespace kiln
