#pragma once
// Fusion: groups the nodes of a decomposed graph (primitive ops only) into kernels, as
// Inductor's scheduler does. Each group becomes one generated loop kernel (or one BLAS call
// for a matmul), so values inside a group never touch memory.
//
// Rules (each decision is explained under KILN_LOGS=fusion):
// - vertical: a pointwise consumer joins its producer's group when they iterate the same
//   space (chains of pointwise ops become one loop);
// - reductions absorb their pointwise producers, and their consumers that iterate the
//   reduced or the unreduced space of the same rows (softmax, log-softmax, layer-norm forward
//   and backward, cross-entropy become one or two passes over each row);
// - horizontal: siblings reading the same input over the same space share a kernel, and
//   reductions over the same rows (same S, same R) share one loop nest even when they read
//   different tensors (the weight and bias gradients of a layer norm);
// - views are not kernels: they fold into the index arithmetic of the loads that read them
//   (a `contiguous` or a reshape that needs a copy is a pointwise copy); a view read by
//   several groups, or only by matmuls (BLAS takes transposed operands), stays an Alias;
// - a matmul is an extern kernel (BLAS); pointwise consumers after it (bias, activation)
//   form the epilogue kernel that follows it;
// - nothing is duplicated, with one exception: a reduction or matmul belongs to exactly one
//   group, and a value computed in one group and read by another is materialized once;
//   but a value of the graph's inputs alone, made by a few cheap pointwise ops (a mask, a
//   cast), is recomputed by a group that reads it from a group it cannot join;
// - a merge refused because another group sits on a path between the two (a cycle) splits
//   that group when only part of it is on the path (cross-entropy: the count of counted
//   rows runs before the row kernel, so the row kernel writes the logits' gradient).
// Groups never form a cycle: the group graph stays acyclic and groups are numbered in an
// order in which they can run.
//
// Input-less creation ops (full, arange, ...) are inlined into every group that reads them:
// when several groups read one, fuse() gives each reading group its own copy of the node
// (so a shared scalar never costs a kernel); a Constant group holds one only where a matmul,
// a scatter, an alias or a graph output reads it directly.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

enum class KernelKind {
  Pointwise,  // one loop nest over an iteration space
  Reduction,  // loops over rows with one or more reductions over the same row space
  Matmul,     // an extern BLAS call (matmul / bmm)
  Scatter,    // scatter_add: accumulates into its result
  Alias,      // only views of other buffers or graph inputs: no kernel, no memory
  Constant,   // creation ops with no inputs, materialized once (full, arange, constant)
  Opaque,     // a custom op's own kernel (frontend/custom_op.h): a call of its own
  Collective, // a collective (all_reduce, ...): a call of the process group's engine
  Attention,  // flash_attention or its backward: tiled kernels of their own (codegen/attention.h)
  Sort,       // sort or topk: a kernel kind of its own (codegen/sort.h)
};
std::string_view kernel_kind_name(KernelKind k);

// What a matmul group's GEMM also computes, where the target's GEMM can
// (passes/fusion/matmul_epilogue.h): a bias added along its columns, then a ReLU or a tanh GELU.
enum class MatmulEpilogue : uint8_t { None, Bias, BiasRelu, BiasGelu };
std::string_view matmul_epilogue_name(MatmulEpilogue e);

struct FusionGroup {
  int id = 0;
  KernelKind kind = KernelKind::Pointwise;
  std::vector<Node*> nodes;     // topological order
  std::vector<Value> inputs;    // values read from outside the group, in first-use order
  std::vector<Value> outputs;   // values read outside the group or returned by the graph
  std::vector<std::string> reasons;  // one line per merge decision (the fusion log)
  // The iteration space: for a Reduction the shape S its reductions read and the dims R they
  // reduce (normalized, sorted); otherwise the shape of the outputs (R empty).
  Shape space;
  std::vector<int64_t> reduce_dims;
  // A Matmul group whose GEMM computes the pointwise group after it: which epilogue, the bias
  // it adds and the value it writes (that group's result).
  MatmulEpilogue epilogue = MatmulEpilogue::None;
  Value epilogue_bias, epilogue_result;
  // A group with no kernel of its own, computed by group `folded_into`'s: a Pointwise group by
  // that group's GEMM (its epilogue), or a Reduction group over rows by that column group's
  // chunks (rows_of); -1.
  int folded_into = -1;
  // A Reduction group over columns whose kernel computes the row reductions of group `rows_of`
  // row by row and its own sums as column partials (passes/fusion/column_partials.h); -1.
  int rows_of = -1;
  std::string label() const;    // "k3 reduction [amax, sub, exp, sum, div]"
};

struct FusionOptions {
  bool vertical = true;
  bool horizontal = true;
  bool reductions = true;   // fuse producers/consumers into reductions
  // Recompute a few cheap ops of the graph's inputs in a group that reads them from another
  // (instead of waiting on that group for a materialized value).
  bool recompute = true;
  // ... also cones that start at small values of reduction groups (a row's mean and rstd),
  // so a layer norm's backward recomputes x̂ instead of writing it. The target decides
  // (Target::recompute_from_statistics): it pays on a GPU, not on the CPU (bench/NOTES.md).
  bool recompute_from_statistics = false;
  // Caps how many nodes one group may hold (a guard against huge kernels).
  int max_group_nodes = 128;
  // The target's GEMM adds a bias and applies a ReLU or tanh GELU to its output (cuBLASLt):
  // a matmul group then computes such a group after it (passes/fusion/matmul_epilogue.h).
  bool matmul_epilogues = false;
  // A column reduction group computes the row reductions it reads in chunks of rows, with its
  // sums as per-chunk partials (passes/fusion/column_partials.h): a norm's backward reads x
  // and dy once. The target decides (Target::column_partials_in_rows: a GPU).
  bool column_partials_in_rows = false;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in a valid execution order
  std::unordered_map<const Node*, int> group_of;
  int num_kernels() const;          // groups that are generated kernels or BLAS calls (not views, not epilogues)
  const FusionGroup& group(const Node* n) const { return groups.at(group_of.at(n)); }
};

// Reorders `g` so every group's nodes are contiguous and in group order (a valid topological
// order), and returns the plan. `g` must hold primitive ops only (run decompose first);
// kiln::Error otherwise, naming the composite node.
// Graph has no way to move a node, so when the order must change `g` is rebuilt (same names,
// same inputs and outputs by position): Node pointers and Values taken from `g` before the
// call are then stale; use the plan's pointers or look values up by name.
FusionPlan fuse(Graph& g, const FusionOptions& options = {});

// The graph as .kir text with a comment line before each group:
//   # kernel k3 (reduction): rows [8,64] over [1] [amax, sub, exp, sum, div] -> %y
//   # alias k4 (alias): space [64,16] [transpose] -> %wt
// The text parses back to the same graph (comments are ignored).
std::string print_fused(const Graph& g, const FusionPlan& plan);

// The graph as Graphviz text with one `subgraph cluster_k3 { label="k3 reduction [...]" }`
// per group (ir/dot.h's grouping option).
std::string fused_to_dot(const Graph& g, const FusionPlan& plan);

}  // namespace kiln::fusion
