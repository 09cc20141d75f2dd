#pragma once
// The state of one active trace (internal to the frontend): the graph being recorded, the
// concrete tensors lifted into graph inputs, and the tracing kernel that records nodes.
// At most one trace is active per thread; kiln::trace (frontend/trace.h) owns it through an
// RAII guard, so an exception inside the traced function leaves no state behind.
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

class TraceContext {
 public:
  explicit TraceContext(std::string graph_name);
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  // The trace active on this thread, or nullptr.
  static TraceContext* current();

  uint64_t id() const { return id_; }
  Graph& graph() { return graph_; }

  // A traced tensor standing for a new graph input named `name` with `example`'s type.
  // The example's own impl maps to it too, so a function that captures the example tensor
  // itself gets the input rather than a lifted copy.
  Tensor add_input(const Tensor& example, const std::string& name);
  // The graph value of a tensor: its node result if traced by this trace; a concrete tensor
  // is lifted into a graph input (once; later uses get the same input).
  Value value_of(const Tensor& t);

  // The concrete tensors lifted so far, in order of first use, and their input names.
  std::vector<HostTensor> take_parameters() { return std::move(params_); }
  std::vector<std::string> take_parameter_names() { return std::move(param_names_); }
  std::vector<std::string> take_parameter_paths() { return std::move(param_paths_); }
  std::vector<Tensor> take_parameter_tensors() { return std::move(param_tensors_); }

  // The Tracing key's kernel: records one node (shape errors name the op, the node and the
  // input shapes) and returns traced tensors for its results.
  static std::vector<Tensor> tracing_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

 private:
  friend class ActiveTrace;
  uint64_t id_;
  Graph graph_;
  // Keyed by impl; the shared_ptrs keep lifted impls alive so their addresses stay unique.
  std::unordered_map<const TensorImpl*, Value> lifted_;
  std::vector<std::shared_ptr<TensorImpl>> keep_alive_;
  std::vector<HostTensor> params_;
  std::vector<std::string> param_names_;
  std::vector<std::string> param_paths_;
  std::vector<Tensor> param_tensors_;
};

// Makes a TraceContext the current one for its lifetime (kiln::Error if one is active).
class ActiveTrace {
 public:
  explicit ActiveTrace(TraceContext& ctx);
  ~ActiveTrace();
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;
};

// A valid value name from a tensor name: "blocks.0.attn.qkv.weight" -> "blocks_0_attn_qkv_weight".
std::string sanitize_value_name(const std::string& name);

}  // namespace kiln
