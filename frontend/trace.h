#pragma once
// kiln::trace: captures a C++ function over Tensors as a Graph (what Dynamo does for Python).
// The function runs once on traced stand-ins for its example inputs; every op it calls is
// recorded through the dispatcher. Concrete tensors it uses that are not inputs (module
// parameters, captured constants) become extra graph inputs after the example inputs, in
// order of first use, named after the tensor (dots -> underscores; unnamed: "const"), and
// their values are returned so the graph can be run:
//
//   nn::MiniGPT model(cfg, /*seed=*/0);
//   TracedGraph tg = trace([&](const Tensor& tokens) { return model.forward(tokens); },
//                          tokens, "forward");
//   auto outs = interpret(tg.graph, tg.graph_inputs({tokens.data()}));
#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

struct TracedGraph {
  Graph graph;
  std::vector<HostTensor> parameters;        // values of the lifted inputs, in graph order
  std::vector<std::string> parameter_names;  // their graph input names ("blocks_0_attn_qkv_weight")
  std::vector<std::string> parameter_paths;  // the tensors' own names ("blocks.0.attn.qkv.weight"; "" if none)
  // The lifted Tensors themselves (aliases of the module's parameters), where they live: a
  // Trainer of parameters on a GPU runs on their device memory. (`parameters` holds host values;
  // for a tensor on a GPU, a copy made once, at trace time.)
  std::vector<Tensor> parameter_tensors;
  // The lifted tensors the function wrote in place (Tensor::copy_ of a module's buffer, as
  // BatchNorm's running statistics in training), as indices into `parameters`: the graph
  // returns each one's new value after the function's own outputs, in this order, and whoever
  // runs the graph writes them back (a compiled training step does).
  std::vector<size_t> written;

  // The function's own outputs (the graph's, less the written values).
  size_t num_function_outputs() const { return graph.outputs().size() - written.size(); }
  // kiln::Error naming the written tensors, for a caller that cannot write them back.
  void reject_writes(const std::string& who, const std::string& instead) const;

  // Every graph input in order: the given values for the example inputs, then the parameters.
  std::vector<HostTensor> graph_inputs(const std::vector<HostTensor>& inputs) const;
};

using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using TraceFn1 = std::function<Tensor(const Tensor&)>;

// Example inputs become graph inputs named after the tensor (sanitized) or x0, x1, ...
// Throws kiln::Error if a trace is already active on this thread (nested traces).
TracedGraph trace(const TraceFn& fn, const std::vector<Tensor>& example_inputs, const std::string& name = "forward");

// A trace that must be one graph, for a caller that knows why: `one_graph_because` is what the
// error says when the function reads a traced value (item(), bool()), in place of kiln::trace's
// own words (which point at kiln::compile's graph breaks). A compiled training step says that
// a step is one graph, and what to do instead.
TracedGraph trace_one_graph(const TraceFn& fn, const std::vector<Tensor>& example_inputs, const std::string& name,
                            const std::string& one_graph_because);
// One input, one output.
TracedGraph trace(const TraceFn1& fn, const Tensor& example_input, const std::string& name = "forward");

bool is_tracing();  // whether a trace is active on this thread

}  // namespace kiln
