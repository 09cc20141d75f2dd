#pragma once
// DeviceTensor: a tensor in device memory, the CUDA counterpart of HostTensor: storage (a
// DeviceBuffer from the caching allocator, shared by views), a TensorMeta (shape, strides in
// elements, dtype, device cuda:N) and a byte offset into the storage.
#include <cstdint>

#include "ir/host_tensor.h"
#include "ir/tensor_meta.h"
#include "runtime/cuda/allocator.h"

namespace kiln::runtime::cuda {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(DeviceBuffer storage, TensorMeta meta, int64_t offset_bytes = 0);

  // Uninitialized storage for `meta` (its strides honored: the storage spans every element the
  // strides reach). meta.device must be a CUDA device.
  static DeviceTensor empty(const TensorMeta& meta);
  // A contiguous copy of `host` on cuda:`device` (a strided host tensor is made contiguous first).
  static DeviceTensor from_host(const HostTensor& host, int device = 0);
  // A contiguous host copy. A strided tensor is copied as the storage extent its strides span
  // (one copy, no kernel), then laid out contiguously on the host: simple, and correct for any
  // strides, at the price of copying the gaps of a sparse view.
  HostTensor to_host() const;

  bool defined() const { return storage_ != nullptr; }
  void* data() const;  // the first element's address
  const TensorMeta& meta() const { return meta_; }
  const DeviceBuffer& storage() const { return storage_; }
  int64_t offset_bytes() const { return offset_bytes_; }
  int64_t numel() const { return meta_.numel(); }
  int64_t nbytes() const { return meta_.nbytes(); }
  bool is_contiguous() const { return meta_.is_contiguous(); }
  int device() const { return meta_.device.index; }

 private:
  DeviceBuffer storage_;
  TensorMeta meta_;
  int64_t offset_bytes_ = 0;
};

// kiln::storage_extent (ir/tensor_meta.h) of a layout device memory can hold: a negative stride
// is a kiln::Error here.
int64_t device_storage_extent(const TensorMeta& meta);

}  // namespace kiln::runtime::cuda
