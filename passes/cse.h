#pragma once
// Common-subexpression elimination: two nodes with the same op, the same inputs and equal
// attributes compute the same values (every op is pure), so the later one's results are
// replaced by the earlier one's and the later node is erased. Creation nodes count too: two
// identical `full`s become one.
#include "ir/graph.h"

namespace kiln {

bool run_cse(Graph& g);  // whether it merged anything

}  // namespace kiln
