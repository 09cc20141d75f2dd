#pragma once
// FSDP's graph rewrites, for make_train_step (frontend/optim.cpp) with
// DataParallelConfig::shard_parameters: see fsdp.cpp.
#include <vector>

#include "frontend/trace.h"

namespace kiln::fsdp {

// Elements of one rank's shard of a parameter of `numel` elements: ceil(numel / world).
int64_t shard_numel(int64_t numel, int64_t world);

// The loss graph with each trained parameter input (trained[i], in parameter order) replaced
// by a shard input of the same name, f32[shard_numel], gathered whole before use:
// %fsdp_gather_w = all_gather(%w, world_size, dim=0), sliced to its numel and reshaped.
TracedGraph shard_loss(const TracedGraph& loss, const std::vector<bool>& trained, int64_t world);

// In a train step's graph: each parameter gathered by shard_loss and read by the backward too
// is gathered again just before the backward's first reader, which then reads that copy.
void gather_again_for_backward(Graph& g, Value loss);

// Rank `rank`'s shard of a parameter: its flat elements [rank*s, (rank+1)*s), zeros past the end.
HostTensor shard_of(const HostTensor& whole, int64_t world, int64_t rank);

}  // namespace kiln::fsdp
