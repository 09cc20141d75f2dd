#pragma once
// The canonicalizer: peephole rules that remove operations which compute their input again
// (x*1, x+0, neg(neg(x)), to(x) with x's own dtype, view chains that undo each other) and
// merge chains (permute of a permute, reshape of a reshape). Each rule fires only when the
// replacement has the matched value's dtype and shape, so broadcasting and promotion are
// never lost. The rules are in canonicalize.cpp, written with passes/pattern.h.
// KILN_LOGS=canonicalize logs each rewrite and each near miss with its reason.
#include "ir/graph.h"

namespace kiln {

bool run_canonicalize(Graph& g);  // whether any rule fired

}  // namespace kiln
