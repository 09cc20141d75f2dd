#pragma once
// The reference interpreter: runs a Graph node by node with the reference kernels.
#include <functional>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

// Inputs in the graph's input order; each must match its input's dtype and shape
// (kiln::Error names the input otherwise). Returns the graph's outputs.
std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs);

// Called after each node's reference kernel with its arguments and its results, which it may
// change (kiln fuzz perturbs them by the rounding a compiled kernel may make). A view's result
// may share its argument's storage: a hook changes only results the op computed.
using AfterNodeHook = std::function<void(const Node& n, std::span<const HostTensor> args, std::vector<HostTensor>& results)>;
std::vector<HostTensor> interpret(const Graph& g, std::span<const HostTensor> inputs, const AfterNodeHook& after_node);

}  // namespace kiln
