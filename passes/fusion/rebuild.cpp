#include "passes/fusion/rebuild.h"

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln::fusion {

std::unordered_map<const Node*, Node*> rebuild_in_order(Graph& g, const std::vector<Node*>& order) {
  KILN_INTERNAL_ASSERT(order.size() == g.num_nodes(), "a new order lists every node once");
  Graph out(g.name());
  std::unordered_map<const Node*, Node*> map;
  for (Node* in : g.inputs()) map[in] = out.add_input(in->name(), in->meta()).node;
  // Temporary names first: a multi-result node's fresh names could take a name a later
  // node still needs. A prefix no existing name starts with keeps them apart.
  std::string prefix = "fuse_tmp_";
  auto taken = [&](const std::string& p) {
    for (Node* n : order)
      for (int i = 0; i < n->num_results(); ++i)
        if (n->result_info(i).name.rfind(p, 0) == 0) return true;
    return false;
  };
  while (taken(prefix)) prefix += "_";
  for (size_t k = 0; k < order.size(); ++k) {
    Node* n = order[k];
    std::vector<Value> ins;
    for (Value v : n->inputs()) {
      auto it = map.find(v.node);
      KILN_INTERNAL_ASSERT(it != map.end(), "the new order puts producers before consumers");
      ins.push_back(Value{it->second, v.index});
    }
    Node* m = out.add_node(n->op(), std::move(ins), n->attrs(), prefix + std::to_string(k));
    m->set_origin(n->origin());
    for (int i = 0; i < n->num_results(); ++i)
      KILN_INTERNAL_ASSERT(m->meta(i) == n->meta(i), "a rebuilt node infers the same type");
    map[n] = m;
  }
  for (Node* n : order)
    for (int i = 0; i < n->num_results(); ++i) out.rename(map.at(n)->result(i), n->result_info(i).name);
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(Value{map.at(v.node), v.index});
  out.set_outputs(std::move(outs));
  g = std::move(out);
  return map;
}

}  // namespace kiln::fusion
