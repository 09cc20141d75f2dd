#pragma once
// The joint forward-backward graph (AOTAutograd's joint graph).
//
// From a forward graph F(inputs) -> outputs, build_joint makes one graph
//   joint(primals..., tangents...) -> (outputs..., grads...)
// - primals: F's inputs, same names, same order;
// - tangents: one input per differentiable forward output (floating dtype), named
//   `tangent_<output name>`, same shape and dtype as that output; a scalar loss's tangent is
//   usually fed 1.0;
// - outputs: F's outputs unchanged, then one gradient per input in `wrt`, in `wrt` order,
//   named `grad_<input name>`. An input the outputs do not depend on gets a zero gradient.
// Gradients of values used several times are summed; integer and bool inputs have none.
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::autograd {

struct JointOptions {
  // Inputs to differentiate with respect to, by name; empty = every floating-point input.
  std::vector<std::string> wrt;
  // Rewrite attention written out into scaled_dot_product_attention first
  // (passes/fuse_attention.h), so that its derivative is the flash backward.
  bool fuse_attention = true;
  // Then merge linears that read one input into one over concatenated weights
  // (passes/merge_linears.h), so that the backward's GEMMs merge too.
  bool merge_linears = true;
  // How many leading outputs get a tangent (-1: every floating one). The others are values the
  // forward also returns but nothing differentiates (a training step's new running statistics).
  int seeded_outputs = -1;
};

struct JointGraph {
  Graph graph;
  int num_primals = 0;                  // graph inputs [0, num_primals) are F's inputs
  int num_tangents = 0;                 // then the tangents
  int num_forward_outputs = 0;          // graph outputs [0, num_forward_outputs) are F's outputs
  std::vector<std::string> wrt;         // inputs whose gradients follow, in output order
  std::vector<int> tangent_for_output;  // per forward output: index of its tangent input, or -1
  // Which forward node each backward node differentiates, by result name (a node's first):
  // {"grad_x": "m"} when %grad_x was made by the derivative rule of %m. A sum of two gradient
  // contributions counts as made by the node whose rule gave the second one. The zeros of an
  // input no output depends on, and a copy that gives a gradient its name, differentiate none.
  std::unordered_map<std::string, std::string> derivative_of;
};

// Throws kiln::Error naming the input if `wrt` names an unknown or non-floating input, and
// naming the op if a differentiable op on the path has no rule.
JointGraph build_joint(const Graph& forward, const JointOptions& options = {});

}  // namespace kiln::autograd
