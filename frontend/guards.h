#pragma once
// Guards of kiln::compile (frontend/compile.h): what a compiled graph's trace depended on,
// per tensor, checked at every call before the graph is reused (Dynamo's tensor guards).
#include <optional>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

struct TensorGuard {
  std::string what;  // "input 0", "parameter 'fc.weight'": how a failure names the tensor
  TensorMeta meta;   // dtype, shape, strides, device
  bool requires_grad = false;
};

TensorGuard guard_of(const Tensor& t, std::string what);

// Why `t` fails the guard ("input 0: shape [64,64] -> [128,64]"), or nothing when it passes.
std::optional<std::string> guard_failure(const TensorGuard& guard, const Tensor& t);

// The first failure over a list of tensors, in order; nothing when all pass.
std::optional<std::string> first_guard_failure(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors);
// How far the tensors get through the guards before the first failure (each tensor's checks
// count: dtype, shape, device, strides, requires_grad); says which cache entry a call came
// nearest to, whose failure is the one worth reporting.
size_t guard_match_score(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors);

}  // namespace kiln
