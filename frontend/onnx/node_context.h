#pragma once
// What a converter (op_table.cpp) sees of one ONNX node: its inputs as kiln values or as tensors
// known at import, its attributes, the builder that makes its kiln nodes, and the opset.
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "frontend/onnx/onnx.h"

namespace kiln::onnx {

// A value of the model as the importer holds it: a value of the kiln graph, a tensor known at
// import (an initializer, a Constant, a folded shape computation), or both.
struct Slot {
  Value value;
  std::optional<HostTensor> known;
  TensorMeta meta() const { return known ? known->meta() : value.meta(); }
};

class NodeContext {
 public:
  // `materialize` makes a known slot a value of the builder's graph.
  NodeContext(const ::onnx::NodeProto& node, Builder& b, int64_t opset, std::vector<Slot*> inputs,
              std::function<Value(Slot&)> materialize)
      : b(b), opset(opset), node_(node), inputs_(std::move(inputs)), materialize_(std::move(materialize)) {}

  Builder& b;
  const int64_t opset;

  const std::string& op_type() const { return node_.op_type(); }
  // "node 'Add_3' (Add)" for messages.
  std::string where() const;

  // ---- inputs (an optional input left out is absent: has() is false)
  size_t num_inputs() const { return inputs_.size(); }
  int num_outputs() const { return node_.output_size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  TensorMeta meta(size_t i) const;
  Var in(size_t i);  // as a value of the graph (a known tensor becomes a constant or a weight)
  const HostTensor* known(size_t i) const;
  // An input that must be known at import (a Reshape's shape, a Slice's starts): its values.
  // kiln::Error saying so, naming `what`, when it is computed at run time.
  IntList known_ints(size_t i, const char* what) const;
  std::vector<double> known_doubles(size_t i, const char* what) const;
  // The inputs that are present, as values.
  std::vector<Value> present_inputs();

  // ---- attributes: each read marks it understood; an attribute no converter read is an
  // Unsupported error naming it (check_attributes_read).
  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, std::optional<int64_t> dflt = std::nullopt);
  double attr_float(const std::string& name, std::optional<double> dflt = std::nullopt);
  std::string attr_string(const std::string& name, std::optional<std::string> dflt = std::nullopt);
  IntList attr_ints(const std::string& name, std::optional<IntList> dflt = std::nullopt);
  std::vector<double> attr_floats(const std::string& name, std::optional<std::vector<double>> dflt = std::nullopt);
  const ::onnx::AttributeProto* attr(const std::string& name);
  // An attribute whose every value this converter accepts and ignores (Dropout's seed).
  void ignore_attr(const std::string& name) { read_.insert(name); }
  // An attribute this converter supports only at `expected`: an Unsupported error otherwise.
  void require_attr_int(const std::string& name, int64_t expected, const char* why);
  void check_attributes_read() const;

  [[noreturn]] void unsupported(const std::string& what) const;
  // Input i, which must be known at import (`what`: "shape", "axes"), is computed at run time:
  // an Unsupported error that names it among its run_time_values.
  [[noreturn]] void run_time_input(size_t i, const char* what) const;
  [[noreturn]] void error(const std::string& what) const;

 private:
  const ::onnx::AttributeProto* find_attr(const std::string& name) const;
  const ::onnx::NodeProto& node_;
  std::vector<Slot*> inputs_;
  std::function<Value(Slot&)> materialize_;
  std::set<std::string> read_;
};

// A converter's result for one output: a value, or a tensor it computed at import (Shape).
struct Out {
  Var var;
  std::optional<HostTensor> known;
  Out(Var v) : var(v) {}  // NOLINT: converters return values
  Out(Value v) = delete;
  static Out of_known(HostTensor t) {
    Out o{Var()};
    o.known = std::move(t);
    return o;
  }
};

using Converter = std::function<std::vector<Out>(NodeContext&)>;

// A converter's one result.
inline std::vector<Out> one(Var v) { return {Out(v)}; }

// A 1-d `constant` node of `values` (index lists and weights a converter computes at import).
Var constant_1d(Builder& b, const std::vector<double>& values, DType dtype);

// An axis attribute or input (negative counts from the end) made non-negative for a rank;
// kiln::Error naming the node when it is out of range.
int64_t normalize_axis(const NodeContext& c, int64_t axis, int64_t rank);

}  // namespace kiln::onnx
