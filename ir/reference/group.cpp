// The simulated group (ir/reference/group.h): the graph's nodes in order, each run for every
// rank before the next, so that a collective finds all ranks' arguments ready.
#include "ir/reference/group.h"

#include <map>

#include "ir/error.h"
#include "ir/reference/inputs.h"
#include "ir/reference/interpreter.h"

namespace kiln {

std::vector<std::vector<HostTensor>> interpret_group(const Graph& g, const std::vector<std::vector<HostTensor>>& inputs_per_rank) {
  const size_t world = inputs_per_rank.size();
  if (world == 0) fail("interpret_group: a group needs at least one rank");
  if (world == 1) return {interpret(g, inputs_per_rank[0])};
  // Each rank's values, keyed by (node, result); inputs checked as the plain interpreter does,
  // naming the rank.
  using Key = std::pair<const Node*, int>;
  std::vector<std::map<Key, HostTensor>> values(world);
  const auto& params = g.inputs();
  for (size_t r = 0; r < world; ++r) {
    const auto& in = inputs_per_rank[r];
    if (in.size() != params.size()) fail("graph '{}' takes {} inputs, rank {} gave {}", g.name(), params.size(), r, in.size());
    for (size_t i = 0; i < params.size(); ++i)
      values[r][{params[i], 0}] =
          reference::checked_input(*params[i], in[i], fmt::format("rank {}, input %{}", r, params[i]->name()));
  }
  for (Node* n : g.nodes()) {
    std::vector<TensorMeta> metas;
    for (int k = 0; k < n->num_results(); ++k) metas.push_back(n->meta(k));
    try {
      if (n->category() == OpCategory::Collective) {
        std::vector<HostTensor> args;
        for (size_t r = 0; r < world; ++r) args.push_back(values[r].at({n->input(0).node, n->input(0).index}));
        std::vector<HostTensor> out = reference::run_collective(n->op(), args, n->attrs(), metas[0]);
        for (size_t r = 0; r < world; ++r) values[r][{n, 0}] = std::move(out[r]);
        continue;
      }
      const ReferenceFn& kernel = n->info().reference;
      if (!kernel) fail("op '{}' has no reference kernel", n->info().name);
      for (size_t r = 0; r < world; ++r) {
        std::vector<HostTensor> args;
        for (const Value& v : n->inputs()) args.push_back(values[r].at({v.node, v.index}));
        std::vector<HostTensor> out = kernel(args, n->attrs(), metas);
        for (int k = 0; k < n->num_results(); ++k) values[r][{n, k}] = std::move(out[static_cast<size_t>(k)]);
      }
    } catch (const Error& e) {
      throw Error(fmt::format("%{} = {}: {}", n->result_info(0).name, n->info().name, e.what()));
    }
  }
  std::vector<std::vector<HostTensor>> outs(world);
  for (size_t r = 0; r < world; ++r)
    for (const Value& v : g.outputs()) outs[r].push_back(values[r].at({v.node, v.index}));
  return outs;
}

}  // namespace kiln
