#pragma once
// Dead-code elimination (XLA's HloDCE): removes every node none of whose results is used by
// another node or as a graph output. Graph inputs stay: they are the graph's signature. All
// ops are pure (dropout takes an explicit seed), so no node is kept for its side effects.
#include "ir/graph.h"

namespace kiln {

bool run_dce(Graph& g);  // whether it removed anything

}  // namespace kiln
