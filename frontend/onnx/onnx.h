#pragma once
// ONNX import: an ONNX model (ONNX 1.12's protobuf, opsets 1 to 17 of the default domain) read
// into a kiln Graph through one table from ONNX operators to builder calls (op_table.cpp).
// Shape computations that exporters write out (Shape, Gather, Concat, ConstantOfShape, Expand
// of a computed shape...) fold away at import for the model's input sizes: every node whose
// inputs are all known then is run by the reference interpreter and its result kept as a
// constant. Nothing below the frontend knows where a graph came from.
//
// Weights (the model's initializers) are tensors the graph reads:
//   - by default the graph's constants: small ones (at most kInlineConstantMax elements) become
//     `constant` nodes; larger ones graph inputs whose values come with the model (`weights`),
//     so that a .kir stays readable;
//   - with ImportOptions::params_as_inputs every floating-point initializer is a graph input,
//     to be given (or trained): nothing computed from it folds.
// Errors: an unsupported operator, opset, dtype or attribute is a kiln::Error naming it and its
// node; every unsupported operator of the model is listed at once, not only the first.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::onnx {

inline constexpr int64_t kInlineConstantMax = 16;
inline constexpr int64_t kMaxOpset = 17;

// An operator, opset, attribute or dtype kiln does not import (a kiln::Error): what a model
// needs that kiln lacks, as opposed to a malformed model. `causes` says it in a few words each
// ("operator TopK", "Cast: a cast to string", "element type string"), for tables of what is
// missing (`kiln onnx-test`); the message says it in full, with the nodes. `run_time_values`
// names what decides the values kiln needed known at import (a Reshape's shape, a Slice's
// starts) and found computed at run time: the model inputs they are computed from, or the
// values themselves when no model input decides them. Importing again with those inputs'
// values given (ImportOptions::known_inputs) specializes the graph on them.
class Unsupported : public Error {
 public:
  Unsupported(const std::string& message, std::vector<std::string> causes, std::vector<std::string> run_time_values = {})
      : Error(message), causes_(std::move(causes)), run_time_values_(std::move(run_time_values)) {}
  const std::vector<std::string>& causes() const { return causes_; }
  const std::vector<std::string>& run_time_values() const { return run_time_values_; }

 private:
  std::vector<std::string> causes_;
  std::vector<std::string> run_time_values_;
};

struct ImportOptions {
  // Sizes of the symbolic dims of the model's inputs (ONNX's dim_param, "batch_size"); an
  // input with a symbolic dim not given here is an error that names it.
  std::map<std::string, int64_t> sizes;
  // Shapes that replace the declared shapes of inputs, by the model's input name.
  std::map<std::string, Shape> input_shapes;
  bool params_as_inputs = false;
  // Values of model inputs to specialize the graph on, by the model's input name: such an input
  // is not a graph input; its value is known at import as an initializer's is. For inputs that
  // decide a shape, an axis or a count (kiln's graphs have static shapes); the graph then holds
  // for these values only.
  std::map<std::string, HostTensor> known_inputs;
  // The kiln graph's name; empty: the ONNX graph's name (made an identifier).
  std::string graph_name;
};

struct ImportedModel {
  Graph graph;
  // Values of graph inputs that come with the model (by kiln input name): the initializers
  // that became inputs. The other inputs are the model's own, in `input_names` order.
  std::map<std::string, HostTensor> weights;
  std::vector<std::string> input_names;   // the model's inputs as ONNX names them, in graph order
  std::vector<std::string> specialized_inputs;  // the model's inputs given in known_inputs
  std::vector<std::string> output_names;  // its outputs as ONNX names them
  int64_t opset = 0;
  std::string producer;  // "pytorch 2.1.0"
};

// Reads and imports `path` (a .onnx file). kiln::Error names the file, the node and what is
// wrong.
ImportedModel load(const std::string& path, const ImportOptions& options = {});
// The same from a serialized ModelProto; `name` is used in messages.
ImportedModel load_from_bytes(const std::string& bytes, const std::string& name, const ImportOptions& options = {});

// The model's own inputs (not its initializers), as ONNX names them, in the model's order.
std::vector<std::string> model_input_names(const std::string& path);

// A serialized ONNX TensorProto (as ONNX's test data stores inputs and outputs) as a tensor.
HostTensor read_tensor_proto(const std::string& path);

// The ONNX operators (default domain) kiln imports, sorted.
std::vector<std::string> supported_operators();

// Whether this build can import ONNX (libonnx was found); `why` says what is missing if not.
bool available(std::string* why = nullptr);

}  // namespace kiln::onnx
