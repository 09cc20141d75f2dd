#pragma once
// The CPU key's kernel: runs an op eagerly with its reference kernel (ir/reference), the same
// code the reference interpreter runs, so eager and traced-then-interpreted results agree bit
// for bit.
#include <span>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

std::vector<Tensor> cpu_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

}  // namespace kiln
