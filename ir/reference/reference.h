#pragma once
// Reference kernels: the definition of what each op computes, in plain C++ on HostTensors.
// Compiled kernels are checked against them; constant folding runs them.
#include <functional>

#include "ir/host_tensor.h"
#include "ir/op_registry.h"

namespace kiln {

// Called once when the op table is built; hands every built-in op's kernel to `set`.
void install_reference_kernels(const std::function<void(Op, ReferenceFn)>& set);

// Runs one op on concrete inputs (inferring result types first). Throws kiln::Error for bad
// inputs (shape errors, out-of-range indices) naming the op.
std::vector<HostTensor> run_reference(Op op, std::span<const HostTensor> inputs, const Attrs& attrs);

}  // namespace kiln
