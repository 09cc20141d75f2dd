#pragma once
// "What did the compiler do to my graph?" on one page (`kiln explain FILE.kir`): the ops before
// and after decomposition, the fusion groups with the reason for every merge made or refused,
// the kernels, BLAS/cuBLASLt calls and custom-op calls of the schedule, what training the graph
// would save and recompute (its joint graph under the min-cut partitioner), and the planned
// memory. The fused graph, groups drawn as clusters, comes with it for `--svg`.
#include <string>

#include "backend/compile.h"
#include "ir/graph.h"

namespace kiln::backend {

struct Explanation {
  std::string text;       // the page
  std::string fused_dot;  // Graphviz text of the fused graph, one cluster per group
};

// Compiles `g` for options.device as compile() does and explains it. For CUDA without a GPU
// the kernels are still compiled (NVRTC). kiln::Error as compile().
Explanation explain(const Graph& g, const CompileOptions& options = {});

}  // namespace kiln::backend
