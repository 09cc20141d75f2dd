#pragma once
// The compile-time half of AOTAutograd for kiln::compile (frontend/compiled_backward.h is the
// run-time half): a traced graph differentiated with respect to its leaves and partitioned into
// a forward that also returns what the backward needs, and a backward that takes that and one
// tangent per differentiable output. Each stage goes into the debug folder and KILN_LOGS=aot.
#include <string>
#include <vector>

#include "backend/debug_dump.h"
#include "ir/graph.h"

namespace kiln {

struct AotGraphs {
  Graph forward, backward;
  // Per forward output: the index of its tangent among the backward's tangent inputs, or -1
  // (not differentiable); and the tangents' types, in order.
  std::vector<int> tangent_for_output;
  std::vector<TensorMeta> tangent_metas;
};

// `wrt`: the names of the graph inputs to differentiate (the leaves). `partitioner`: "mincut"
// or "default". `name` names the function in the log.
AotGraphs aot_split(const Graph& g, const std::vector<std::string>& wrt, const std::string& partitioner,
                    backend::DebugDump& debug, const std::string& name);

}  // namespace kiln
