#pragma once
// The verifier: run after parsing and after every pass. It checks SSA (each name defined
// once), that every value is defined before it is used, that use lists match the inputs,
// that attributes fit the op's schema, and that every type equals what the op's rule infers.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Every problem found, each naming the node ("%y = add: ..."); empty when the graph is valid.
std::vector<std::string> verify(const Graph& g);
// Throws kiln::Error listing the problems (prefixed by `context`, e.g. the pass that ran last).
void verify_or_throw(const Graph& g, const std::string& context = "");

}  // namespace kiln
