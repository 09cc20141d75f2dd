#pragma once
// Matmul epilogues, a fusion decision: on a target whose GEMM can add a bias along its columns
// and then apply a ReLU or a tanh GELU (FusionOptions::matmul_epilogues: cuBLASLt's epilogues),
// a matmul group followed by a pointwise group that does exactly that, where nothing else reads
// the matmul's result, computes that group in its GEMM: the matmul group records the epilogue
// (FusionGroup::epilogue), and the pointwise group is folded into it (no kernel of its own).
// Each fold, and each near miss of a matmul followed by a pointwise group, is in the groups'
// reasons (the fusion log, kiln explain).
#include "ir/graph.h"
#include "passes/fusion/fusion.h"

namespace kiln::fusion {

void choose_matmul_epilogues(const Graph& g, FusionPlan& plan);

// The epilogue that applies `act` after the bias (BiasRelu, BiasGelu), or None: the activations
// the target's GEMM has (a ReLU, a tanh GELU).
MatmulEpilogue epilogue_activation(const Node& act);

}  // namespace kiln::fusion
