#pragma once
// The state of one active trace (internal to the frontend): the graph being recorded, the
// concrete tensors lifted into graph inputs, and the tracing kernel that records nodes.
// At most one trace is active per thread; kiln::trace (frontend/trace.h) owns it through an
// RAII guard, so an exception inside the traced function leaves no state behind.
#include <functional>
#include <memory>
#include <source_location>
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

  // An in-place write (Tensor::copy_) while tracing. A tensor of this trace takes `v` as its
  // value. A concrete tensor (a module's buffer: BatchNorm's running statistics) is lifted if it
  // was not yet, later reads in this trace get `v`, and the last value written is recorded for
  // the caller to return and write back (writes()).
  void write(const Tensor& t, Value v);
  // The concrete tensors written, as (index among the lifted tensors, last value written), in
  // order of first write.
  const std::vector<std::pair<size_t, Value>>& writes() const { return writes_; }

  // The concrete tensors lifted so far, in order of first use, and their input names.
  std::vector<HostTensor> take_parameters() { return std::move(params_); }
  std::vector<std::string> take_parameter_names() { return std::move(param_names_); }
  std::vector<std::string> take_parameter_paths() { return std::move(param_paths_); }
  std::vector<Tensor> take_parameter_tensors() { return std::move(param_tensors_); }
  const std::vector<Tensor>& parameter_tensors() const { return param_tensors_; }

  // The traced tensors of this trace that something outside it still holds (the function's
  // locals): at a graph break, the values the rest of the function may go on to use.
  std::vector<std::shared_ptr<TensorImpl>> live_traced_tensors() const;

  // Graph breaks (kiln::compile): what item() / bool() on a tensor of this trace calls. The
  // handler runs the graph so far and leaves the tensor concrete; `where` is null when the
  // caller's source location is unknown (bool(t)). Without a handler, reading a traced value is
  // a kiln::Error (kiln::trace records one graph).
  using BreakHandler = std::function<void(const Tensor&, const std::source_location* where, std::string_view what)>;
  void set_break_handler(BreakHandler handler) { break_handler_ = std::move(handler); }
  const BreakHandler& break_handler() const { return break_handler_; }
  // Why this trace cannot break and what to do instead, for the error of a value read without a
  // break handler ("" : kiln::trace's own words).
  void set_one_graph_because(std::string why) { one_graph_because_ = std::move(why); }
  const std::string& one_graph_because() const { return one_graph_because_; }
  // Continues the active trace in `next` (a graph break starts a new graph): the thread's
  // current trace must be active already (an ActiveTrace holds it and clears it at its end).
  static void switch_current(TraceContext& next);

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
  std::vector<std::pair<size_t, Value>> writes_;
  std::vector<std::weak_ptr<TensorImpl>> traced_;  // every traced tensor made, for live_traced_tensors
  BreakHandler break_handler_;
  std::string one_graph_because_;
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
