#pragma once
// The canonical text form of a graph: parse(print(g)) rebuilds g exactly.
#include <string>

#include "ir/graph.h"

namespace kiln {

std::string print_graph(const Graph& g);
// One node's statement without indentation: "%y = linear(%a, %w, %b) : f32[8,600]".
std::string print_node(const Node& n);
// A node's attributes in schema order, leaving out those equal to their default: "dim=-1".
std::string print_attrs(const Node& n);

}  // namespace kiln
