#include "frontend/nn/init.h"

#include "ir/for_chunks.h"
#include "ir/random.h"

namespace kiln::nn::init {

// Element i comes from (seed, i) alone, so the host's cores fill chunks of a tensor side by
// side and give the same values (a 1.1B-parameter model's init took tens of seconds on one core).
Tensor uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for_chunks(t.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) t.set(i, low + (high - low) * random_uniform(seed, static_cast<uint64_t>(i)));
  });
  return Tensor(std::move(t));
}

Tensor normal(const Shape& shape, double mean, double std, uint64_t seed, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for_chunks(t.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) t.set(i, mean + std * random_normal(seed, static_cast<uint64_t>(i)));
  });
  return Tensor(std::move(t));
}

Tensor constant(const Shape& shape, double value, DType dtype) {
  HostTensor t = HostTensor::empty(dtype, shape);
  for_chunks(t.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) t.set(i, value);
  });
  return Tensor(std::move(t));
}

}  // namespace kiln::nn::init
