#pragma once
// Graphviz export: a graph as .dot text, and rendering to SVG/PNG with Graphviz's `dot`.
//
// Drawing: graph inputs are blue rounded boxes ("%x" and its type); each node is a box with
// its result names, op, result types and (abbreviated) attributes; edges are values, labelled
// with their type (and with the result's name when the producer has several results, as
// split does); the outputs meet in one grey "return" box, the edges numbered by position.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// A box drawn around some nodes (a fusion group): `subgraph cluster_<name> { label="..." }`.
struct DotCluster {
  std::string name;   // letters, digits and '_' ("k3")
  std::string label;  // "k3 reduction [amax, sub, exp, sum, div]"
  bool dashed = false;
};

struct DotOptions {
  bool edge_types = true;        // label each edge with the value's type
  size_t max_attr_chars = 40;    // attributes longer than this are cut with "..."
  // Optional grouping: node -> index into `clusters`. Nodes not in the map are drawn
  // outside any cluster; with no clusters the drawing is the plain one.
  std::vector<DotCluster> clusters;
  std::unordered_map<const Node*, int> cluster_of;
};

std::string to_dot(const Graph& g, const DotOptions& options = {});

// Escapes text for a double-quoted Graphviz string: \ and " are escaped, newlines become \n.
std::string dot_escape(std::string_view text);

// Where Graphviz's `dot` program is on PATH; empty if it is not installed.
std::optional<std::string> find_dot_program();

// Renders .dot text to `out_path` in `format` ("svg" or "png") by running `dot`. Throws
// kiln::Error if Graphviz is not installed (the .dot text can still be written) or if `dot`
// fails (with its message).
void render_dot(const std::string& dot_text, const std::string& out_path, const std::string& format);

// Writes `g` to `out_path`, choosing the format by the extension: .dot (text, no Graphviz
// needed), .svg or .png (rendered). Other extensions are a kiln::Error.
void write_graph_image(const Graph& g, const std::string& out_path, const DotOptions& options = {});

}  // namespace kiln
