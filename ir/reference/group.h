#pragma once
// A simulated process group for the reference interpreter: every rank runs the same graph
// (SPMD) on its own inputs, and each collective (all_reduce, all_gather, reduce_scatter,
// broadcast, reduce) hands every rank what the real group would. It is the definition the
// collective engines (NCCL, Gloo) are checked against, and how their derivative rules are
// gradchecked.
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

// Runs `g` once per rank: inputs_per_rank[r] are rank r's inputs, in the graph's input order.
// Returns each rank's outputs. Every collective's world_size must be the number of ranks, and
// the ranks' tensors must agree in dtype and shape at each collective (kiln::Error names the
// node and the rank otherwise).
std::vector<std::vector<HostTensor>> interpret_group(const Graph& g, const std::vector<std::vector<HostTensor>>& inputs_per_rank);

namespace reference {
// The collective `op` over every rank's tensor (rank order): each rank's result, of meta `out`.
std::vector<HostTensor> run_collective(Op op, const std::vector<HostTensor>& ranks, const Attrs& attrs, const TensorMeta& out);
}  // namespace reference

}  // namespace kiln
