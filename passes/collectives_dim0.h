#pragma once
// Collectives along their first dim: the engines (NCCL, Gloo) join and split contiguous memory,
// so an all_gather or a reduce_scatter along a dim with other dims before it is rewritten into
// one along dim 0 between views: the dim is moved to the front (a copy), the collective joins or
// splits it there, and the result is moved back. all_gather(x [3,4], dim=1) over 2 ranks:
//   %t = permute(x, [1,0]) -> contiguous -> all_gather(dim=0) [8,3] -> reshape [2,4,3]
//   -> permute [3,2,4] -> reshape [3,8]
// A dim with only 1s before it is already contiguous memory and is left alone.
#include "ir/graph.h"

namespace kiln {

bool run_collectives_dim0(Graph& g);  // whether it rewrote a collective

// Whether `n` is an all_gather or reduce_scatter the pass rewrites (a dim before its own is
// more than 1).
bool collective_needs_dim0_rewrite(const Node& n);

}  // namespace kiln
