#pragma once
// HostTensor: a tensor in host memory, the value type of the reference interpreter and of
// constant folding (which is why it lives in ir/: passes may depend on ir/ only). A view
// shares storage with its base and has its own strides and element offset, as in PyTorch.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ir/tensor_meta.h"

namespace kiln {

class HostTensor {
 public:
  HostTensor() = default;
  // A new contiguous tensor (zero-filled) with meta's dtype, shape and device.
  static HostTensor empty(const TensorMeta& meta);
  // The same, its values left as the allocator gives them: for a result every element of
  // which is about to be written (compiled graphs' outputs), where zero-filling would be a
  // pass over memory for nothing.
  static HostTensor uninitialized(const TensorMeta& meta);
  static constexpr size_t kStorageAlignment = 64;  // bytes
  static HostTensor empty(DType dt, const Shape& shape) { return empty(TensorMeta(dt, shape)); }
  // A contiguous tensor over memory it does not own (a compiled graph's buffer handed to a
  // custom op's kernel): valid only while that memory is.
  static HostTensor borrow(const TensorMeta& meta, void* data);
  // From values given in row-major order, converted to `dt`.
  static HostTensor from_doubles(DType dt, const Shape& shape, std::span<const double> values);
  static HostTensor from_ints(DType dt, const Shape& shape, std::span<const int64_t> values);
  static HostTensor scalar(DType dt, double v) { return from_doubles(dt, {}, std::span<const double>(&v, 1)); }

  bool defined() const { return storage_ != nullptr; }
  const TensorMeta& meta() const { return meta_; }
  DType dtype() const { return meta_.dtype; }
  const Shape& shape() const { return meta_.shape; }
  const Strides& strides() const { return meta_.strides; }
  int64_t rank() const { return meta_.rank(); }
  int64_t numel() const { return meta_.numel(); }
  int64_t offset() const { return offset_; }  // in elements, into the storage
  bool is_contiguous() const { return meta_.is_contiguous(); }

  // A view of the same storage with other shape/strides and element offset.
  HostTensor view(const TensorMeta& meta, int64_t offset) const;
  // This tensor if contiguous, else a contiguous copy.
  HostTensor contiguous() const;
  // A contiguous copy converted to `dt`.
  HostTensor to(DType dt) const;
  // A copy laid out with exactly these strides (negative ones start from the far end; where
  // they overlap, as in an expanded tensor, the last element written wins), converted to `dt`:
  // view kernels compute their results' strides from their argument's declared layout.
  HostTensor laid_out(const Strides& strides, DType dt) const;
  HostTensor clone() const { return to(dtype()); }

  // Element access by logical row-major index (0 .. numel-1), honoring strides.
  double get(int64_t i) const;
  int64_t get_int(int64_t i) const;  // exact for i64
  void set(int64_t i, double v);      // rounds to the dtype (f16/bf16: nearest even)
  void set_int(int64_t i, int64_t v);
  // Memory offset (in elements, from the storage start) of logical index i.
  int64_t element_offset(int64_t i) const;

  // Raw storage of a contiguous tensor, in the dtype's representation.
  void* data();
  const void* data() const;
  int64_t nbytes() const { return meta_.nbytes(); }

  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_ints() const;

 private:
  TensorMeta meta_;
  std::shared_ptr<std::byte[]> storage_;
  int64_t offset_ = 0;
};

// Random values for a graph input: floats ~ U(-1, 1) (never all zeros), ints in [0, int_bound),
// bools half true; from the counter-based generator, so seed N gives the same tensor anywhere.
HostTensor random_tensor(const TensorMeta& meta, uint64_t seed, int64_t int_bound = 8);

}  // namespace kiln
