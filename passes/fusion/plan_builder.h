#pragma once
// Fusion's plan: the drafts, once every merge is made, as the FusionPlan the lowering reads:
// groups numbered in a valid execution order, the graph rebuilt so that each group's nodes are
// contiguous, each group's kind, inputs, outputs and iteration space, the decision log resolved
// to final group ids, and the matmul epilogues where the target's GEMM has them.
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/fusion.h"

namespace kiln::fusion {

FusionPlan build_plan(Graph& g, const Drafts& drafts, const std::vector<Note>& notes, const FusionOptions& options);

}  // namespace kiln::fusion
