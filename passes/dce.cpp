#include "passes/dce.h"

#include <unordered_set>

namespace kiln {

bool run_dce(Graph& g) {
  // Outputs never change here, so collect them once instead of scanning them per result.
  std::unordered_set<Node*> output_nodes;
  for (const Value& v : g.outputs()) output_nodes.insert(v.node);

  bool changed = false;
  std::vector<Node*> nodes = g.nodes();
  // Backwards: erasing a node drops its uses of its inputs, so a whole dead chain goes in
  // one sweep.
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    if (n->has_uses() || output_nodes.count(n)) continue;
    g.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
