#pragma once
// Parameter initializers: concrete tensors from the counter-based generator (ir/random.h),
// computed directly (not through ops) so that a module built inside a trace still gets
// concrete parameters. kiln follows PyTorch's default module initialization:
//   Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in));  Embedding: N(0, 1);
//   LayerNorm: weight 1, bias 0.
#include <cstdint>

#include "frontend/tensor.h"

namespace kiln::nn::init {

Tensor uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype = DType::F32);
Tensor normal(const Shape& shape, double mean, double std, uint64_t seed, DType dtype = DType::F32);
Tensor constant(const Shape& shape, double value, DType dtype = DType::F32);

}  // namespace kiln::nn::init
