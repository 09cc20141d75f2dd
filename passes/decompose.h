#pragma once
// Decompositions: each composite op (and mean, var) rewritten into primitives — pointwise,
// sum/prod/amax/amin/argmax, views, matmul/bmm, gather, scatter_add, scatter_fold, creation — the only ops
// the backends generate code for (PyTorch's decomposition table, torch._decomp).
//
// A decomposition receives the node and builds, with the Builder, one value per result that
// computes what the node's reference kernel computes (ir/reference/*). It may use other ops
// that have decompositions (cross_entropy builds log_softmax and nll_loss): the pass repeats
// until none is left. Rules live in passes/decompose/*.cpp, one small function per op.
#include <functional>
#include <span>
#include <vector>

#include "ir/builder.h"

namespace kiln {

struct DecompositionContext {
  Builder& b;
  const Node& node;  // the node being replaced; new nodes go just before it

  Var input(int i) const { return b.wrap(node.input(i)); }
  int num_inputs() const { return static_cast<int>(node.inputs().size()); }
  const Attrs& attrs() const { return node.attrs(); }
  const TensorMeta& out_meta(int i = 0) const { return node.meta(i); }
};

// Returns one value per result of the node, of the result's dtype and shape (strides may
// differ: a decomposition's result is its own layout).
using DecompositionFn = std::function<std::vector<Value>(DecompositionContext&)>;

// Throws kiln::Error if the op already has one.
void register_decomposition(Op op, DecompositionFn fn);
const DecompositionFn* find_decomposition(Op op);  // nullptr: the op is kept as it is

// Whether backends generate code for the op directly: it is not a composite and has no
// decomposition (mean and var are reductions but lower to sum).
bool is_primitive(Op op);

// Throws kiln::Error naming the first node whose op is not primitive.
void check_primitive(const Graph& g);

// The pass: replaces every node that has a decomposition by its expansion, repeatedly, so
// the graph ends with primitive ops only; a composite op without a decomposition is a
// kiln::Error naming the node. Returns whether it changed the graph.
bool run_decompose(Graph& g);
// Decomposes the nodes of `ops` only (and what their decompositions make of those ops); other
// composites stay. build_joint runs it on the ops that are differentiated through their parts.
bool decompose_ops(Graph& g, std::span<const Op> ops);

}  // namespace kiln
