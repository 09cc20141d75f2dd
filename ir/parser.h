#pragma once
// Parser of the .kir text form. Every error is a kiln::Error starting "file:line:column:".
// The parsed graph is verified before it is returned.
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Parses exactly one graph.
Graph parse_graph(std::string_view text, const std::string& file = "<input>");
// Parses a file that holds one or more graphs (e.g. a forward and a backward graph).
std::vector<Graph> parse_graphs(std::string_view text, const std::string& file = "<input>");
// Reads and parses a file; a missing or unreadable file is a kiln::Error naming it.
std::vector<Graph> parse_file(const std::string& path);

// Parses a type such as "f32[8,64]", "f32[4,8]{1,4}" or "bf16[2]@cuda:0".
TensorMeta parse_type(std::string_view text);

}  // namespace kiln
