#pragma once
// Gradient checking against central finite differences in float64 (torch.autograd.gradcheck).
//
// The forward graph is re-typed to float64 (floating inputs, and dtype attributes that name a
// floating type), the inputs are converted, and for random non-zero output tangents v the
// analytic vector-Jacobian product from build_joint + the reference interpreter is compared
// with (f(x + eps*e) - f(x - eps*e)) / (2*eps) projected on v:
//   |analytic - numeric| <= atol + rtol * |numeric|   for every checked element.
// Full mode perturbs every input element (two forward runs each); fast mode checks a few
// random directions per input instead (torch's fast_mode), for graphs with many parameters.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  std::vector<std::string> wrt;  // empty: every floating input
  bool fast = false;             // random directions instead of every element
  int directions = 3;            // per input, in fast mode
  uint64_t seed = 0;             // tangents and directions
};

struct GradcheckInputReport {
  std::string name;
  int64_t checked = 0;       // elements (full) or directions (fast)
  double max_abs_error = 0;
  double max_rel_error = 0;
  bool ok = true;
};

struct GradcheckResult {
  bool ok = true;
  std::vector<GradcheckInputReport> inputs;
  std::string failure;  // the first mismatch: input, element, analytic vs numeric
};

// `forward` is any graph; inputs match its inputs (any floating dtype; converted to f64).
GradcheckResult gradcheck(const Graph& forward, std::span<const HostTensor> inputs, const GradcheckOptions& options = {});

// The graph with floating inputs and floating dtype attributes re-typed to float64.
Graph to_float64(const Graph& g);

std::string format_gradcheck(const GradcheckResult& r);

}  // namespace kiln::autograd
