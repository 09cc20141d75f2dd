// Tensor's op methods: each forwards to the free function of the same name (frontend/ops.h).
#include "frontend/ops.h"
#include "frontend/trace_context.h"
#include "ir/error.h"

namespace kiln {

Tensor Tensor::reshape(const IntList& shape) const { return kiln::reshape(*this, shape); }
Tensor Tensor::permute(const IntList& dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return kiln::transpose(*this, dim0, dim1); }
Tensor Tensor::expand(const IntList& size) const { return kiln::expand(*this, size); }
Tensor Tensor::unsqueeze(int64_t dim) const { return kiln::unsqueeze(*this, dim); }
Tensor Tensor::squeeze(const Dims& dim) const { return kiln::squeeze(*this, dim); }
Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
Tensor Tensor::sum(const Dims& dim, bool keepdim, std::optional<DType> dtype) const {
  return kiln::sum(*this, dim, keepdim, dtype);
}
Tensor Tensor::mean(const Dims& dim, bool keepdim, std::optional<DType> dtype) const {
  return kiln::mean(*this, dim, keepdim, dtype);
}
Tensor Tensor::amax(const Dims& dim, bool keepdim) const { return kiln::amax(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::to(DType dtype) const { return kiln::to(*this, dtype); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::softmax(int64_t dim) const { return kiln::softmax(*this, dim); }
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return kiln::masked_fill(*this, mask, value); }

Tensor& Tensor::copy_(const Tensor& src) {
  if (!defined() || !src.defined()) fail("copy_: the {} is an undefined tensor", defined() ? "source" : "destination");
  Tensor v = src.dtype() == dtype() ? src : kiln::to(src, dtype());
  if (v.shape() != shape()) v = kiln::expand(v, IntList(shape().begin(), shape().end()));
  if (TraceContext* ctx = TraceContext::current(); ctx || is_traced() || v.is_traced()) {
    if (!ctx) fail("copy_: {} was traced by a trace that has ended", (is_traced() ? *this : v).str());
    ctx->write(*this, ctx->value_of(v));
    return *this;
  }
  v = kiln::contiguous(v);
  if (v.device() != device()) v = v.to(device());
  // The tensor's own storage would be shared with `src` (nothing writes storage in place).
  impl_->set_storage_from(*v.impl());
  return *this;
}

}  // namespace kiln
