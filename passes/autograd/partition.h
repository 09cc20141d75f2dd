#pragma once
// Partitioners: split a joint graph into a forward graph and a backward graph (AOTAutograd's
// default_partition and min_cut_rematerialization_partition).
//
//   forward(primals...)                 -> (outputs..., saved...)
//   backward(saved..., tangents...)     -> (grads...)
//
// Saved values are the forward values the backward reads. The default partitioner saves
// every one of them; the min-cut partitioner recomputes cheap pointwise work (and views) in
// the backward when that saves fewer bytes, never recomputing matmuls or reductions.
#include <cstdint>
#include <string>
#include <vector>

#include "passes/autograd/joint.h"

namespace kiln::autograd {

enum class PartitionKind { Default, MinCut };

struct SavedTensor {
  std::string name;   // its name in both graphs
  TensorMeta meta;
  int64_t bytes = 0;
};

struct Partition {
  Graph forward;
  Graph backward;
  std::vector<SavedTensor> saved;  // forward outputs after the user's, backward inputs before the tangents
  int64_t saved_bytes = 0;
  int num_forward_outputs = 0;     // the user's outputs at the head of forward's outputs
  int recomputed_nodes = 0;        // nodes the backward recomputes (min-cut only)
};

Partition partition(const JointGraph& joint, PartitionKind kind);
std::string_view partition_kind_name(PartitionKind kind);
PartitionKind parse_partition_kind(std::string_view name);  // "default" | "mincut"; kiln::Error otherwise

}  // namespace kiln::autograd
