#pragma once
// The reference interpreter: runs a Graph node by node with the reference kernels.
#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

// Inputs in the graph's input order; each must match its input's dtype and shape
// (kiln::Error names the input otherwise). Returns the graph's outputs.
std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs);

}  // namespace kiln
