#pragma once
// Derivative rules fed NaN and +-inf, with the gradients PyTorch gives (issue 12, "NaN and
// infinity through every derivative rule"). One table, two users:
//   tests/autograd/test_rules_nonfinite.cpp: build_joint + the reference interpreter give
//     `expected` (NaN and infinities at the same positions, finite values within 1e-12);
//   tests/backend/test_backend_nonfinite.cpp: the joint graphs compiled for every device
//     match the reference interpreter (in f64 as given, and in f32).
// Every expected value is written out from PyTorch's formula for that op (derivatives.yaml
// and the ATen backward kernels it names), quoted in `torch`.
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::testing {

struct NonfiniteGradCase {
  std::string name;
  std::string torch;  // PyTorch's formula, for failure messages
  Graph graph;        // forward: one op over inputs %x0, %x1, ...; its result %y
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> tangents;  // one per floating output
  // PyTorch's gradient of each floating input, in input order (as joint_gradients returns
  // them: masks, conditions and class targets get none).
  std::vector<HostTensor> expected;
};

std::vector<NonfiniteGradCase> nonfinite_grad_cases();

}  // namespace kiln::testing
