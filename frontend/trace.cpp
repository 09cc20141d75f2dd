#include "frontend/trace.h"

#include "frontend/trace_context.h"
#include "ir/error.h"
#include "ir/verifier.h"

namespace kiln {

std::vector<HostTensor> TracedGraph::graph_inputs(const std::vector<HostTensor>& inputs) const {
  size_t expected = graph.inputs().size() - parameters.size();
  if (inputs.size() != expected)
    fail("graph '{}' takes {} input{} besides its parameters, got {}", graph.name(), expected,
         expected == 1 ? "" : "s", inputs.size());
  std::vector<HostTensor> all = inputs;
  all.insert(all.end(), parameters.begin(), parameters.end());
  return all;
}

void TracedGraph::reject_writes(const std::string& who, const std::string& instead) const {
  if (written.empty()) return;
  std::string names;
  for (size_t i : written) {
    const std::string& path = i < parameter_paths.size() && !parameter_paths[i].empty() ? parameter_paths[i] : parameter_names[i];
    names += (names.empty() ? "'" : ", '") + path + "'";
  }
  fail("{}: the function writes {} in place (Tensor::copy_; a BatchNorm in training mode updates its running statistics), "
       "which {} does not write back: {}",
       who, names, who, instead);
}

bool is_tracing() { return TraceContext::current() != nullptr; }

TracedGraph trace(const TraceFn& fn, const std::vector<Tensor>& example_inputs, const std::string& name) {
  return trace_one_graph(fn, example_inputs, name, "");
}

TracedGraph trace_one_graph(const TraceFn& fn, const std::vector<Tensor>& example_inputs, const std::string& name,
                            const std::string& one_graph_because) {
  TraceContext ctx(name);
  ctx.set_one_graph_because(one_graph_because);
  ActiveTrace active(ctx);  // cleared on every exit path, exceptions included
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& t = example_inputs[i];
    if (!t.defined()) fail("example input {} of trace '{}' is undefined", i, name);
    std::string input_name = t.name().empty() ? "x" + std::to_string(i) : sanitize_value_name(t.name());
    inputs.push_back(ctx.add_input(t, input_name));
  }
  std::vector<Tensor> outputs = fn(inputs);
  if (outputs.empty()) fail("the function traced as '{}' returned no tensors", name);
  std::vector<Value> values;
  for (const Tensor& t : outputs) values.push_back(ctx.value_of(t));
  std::vector<size_t> written;
  for (const auto& [index, value] : ctx.writes()) {
    written.push_back(index);
    values.push_back(value);
  }
  ctx.graph().set_outputs(std::move(values));
  // Tracing builds the graph through Graph::add_node, so this only guards the frontend itself.
  verify_or_throw(ctx.graph(), "kiln::trace");
  return TracedGraph{std::move(ctx.graph()), ctx.take_parameters(), ctx.take_parameter_names(),
                     ctx.take_parameter_paths(), ctx.take_parameter_tensors(), std::move(written)};
}

TracedGraph trace(const TraceFn1& fn, const Tensor& example_input, const std::string& name) {
  return trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
               std::vector<Tensor>{example_input}, name);
}

}  // namespace kiln
