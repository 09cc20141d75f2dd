// The reference interpreter: runs each node's reference kernel in graph order, dropping every
// intermediate value after its last use so peak memory follows the graph's live set.
#include "ir/reference/interpreter.h"

#include <map>

#include "ir/error.h"
#include "ir/reference/inputs.h"

namespace kiln {

namespace {

std::string node_label(const Node& n) {
  std::string lhs;
  for (int i = 0; i < n.num_results(); ++i) lhs += fmt::format("{}%{}", i ? ", " : "", n.result_info(i).name);
  return fmt::format("{} = {}", lhs, n.info().name);
}

}  // namespace

std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs) {
  return interpret(g, inputs, AfterNodeHook{});
}

std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs, const AfterNodeHook& after_node) {
  const auto& params = g.inputs();
  if (inputs.size() != params.size())
    fail("graph '{}' takes {} inputs, got {}", g.name(), params.size(), inputs.size());

  std::map<std::pair<const Node*, int>, HostTensor> values;
  // Uses left per value; graph outputs hold one extra use so they are never released.
  std::map<std::pair<const Node*, int>, int> uses_left;
  auto key = [](Value v) { return std::make_pair(static_cast<const Node*>(v.node), v.index); };
  for (Node* n : g.nodes())
    for (const Value& v : n->inputs()) ++uses_left[key(v)];
  for (const Value& v : g.outputs()) ++uses_left[key(v)];

  for (size_t i = 0; i < params.size(); ++i)
    values[{params[i], 0}] = reference::checked_input(*params[i], inputs[i], "input %" + params[i]->name());

  for (Node* n : g.nodes()) {
    std::vector<HostTensor> args;
    for (const Value& v : n->inputs()) args.push_back(values.at(key(v)));
    std::vector<TensorMeta> metas;
    for (int r = 0; r < n->num_results(); ++r) metas.push_back(n->meta(r));
    const ReferenceFn& kernel = n->info().reference;
    if (!kernel) fail("{}: op '{}' has no reference kernel", node_label(*n), n->info().name);
    std::vector<HostTensor> results;
    try {
      results = kernel(args, n->attrs(), metas);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", node_label(*n), e.what()));
    }
    KILN_INTERNAL_ASSERT(results.size() == metas.size(), "a reference kernel returns one tensor per result");
    if (after_node) after_node(*n, args, results);
    for (int r = 0; r < n->num_results(); ++r) {
      KILN_INTERNAL_ASSERT(results[r].dtype() == metas[r].dtype && results[r].shape() == metas[r].shape,
                           node_label(*n) + ": reference kernel results match the inferred metas");
      if (uses_left[{n, r}] > 0) values[{n, r}] = std::move(results[r]);  // dead results go at once
    }
    for (const Value& v : n->inputs())
      if (--uses_left[key(v)] == 0) values.erase(key(v));
  }

  std::vector<HostTensor> outs;
  for (const Value& v : g.outputs()) outs.push_back(values.at(key(v)));
  return outs;
}

}  // namespace kiln
