#include "frontend/nn/init.h"

#include "ir/random.h"

namespace kiln::nn::init {

Tensor uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, low + (high - low) * random_uniform(seed, static_cast<uint64_t>(i)));
  return Tensor(std::move(t));
}

Tensor normal(const Shape& shape, double mean, double std, uint64_t seed, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, mean + std * random_normal(seed, static_cast<uint64_t>(i)));
  return Tensor(std::move(t));
}

Tensor constant(const Shape& shape, double value, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, value);
  return Tensor(std::move(t));
}

}  // namespace kiln::nn::init
