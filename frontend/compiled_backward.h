#pragma once
// The run-time half of AOTAutograd for kiln::compile: what a gradient-carrying compiled call
// leaves on its results, and what Tensor::backward() runs (frontend/compiled_backward.cpp).
#include <memory>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "frontend/tensor.h"

namespace kiln {

struct CompiledBackward {
  std::string name;                                  // the compiled function's, for messages
  std::shared_ptr<const backend::Executable> graph;  // backward(saved..., tangents...) -> grads, in `leaves` order
  std::vector<Tensor> saved;                         // from the forward call; freed once the backward ran
  std::vector<int> tangent_for_output;               // per result: its tangent's index, or -1 (not differentiable)
  std::vector<TensorMeta> tangent_metas;             // graph types of the tangents, in order
  std::vector<Tensor> leaves;                        // the inputs and parameters that require a gradient
  Device device;                                     // where `graph` runs
  bool ran = false;
};

}  // namespace kiln
