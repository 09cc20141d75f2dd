#pragma once
// Graph offers no way to move a node, so putting a graph's nodes in another (valid) order
// means building it again: same inputs, same names and attributes, same outputs.
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

// Replaces `g` by a copy whose nodes run in `order` (every node of g once, producers before
// consumers). Returns the old node -> new node map; old pointers are only keys afterwards.
std::unordered_map<const Node*, Node*> rebuild_in_order(Graph& g, const std::vector<Node*>& order);

}  // namespace kiln::fusion
