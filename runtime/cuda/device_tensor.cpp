// DeviceTensor: allocation, and copies to and from the host.
#include "runtime/cuda/device_tensor.h"

#include "ir/error.h"
#include "runtime/cuda/stream.h"

namespace kiln::runtime::cuda {

int64_t device_storage_extent(const TensorMeta& meta) {
  for (int64_t stride : meta.strides)
    if (stride < 0) kiln::fail("negative strides are not supported on CUDA tensors ({})", meta.str());
  return kiln::storage_extent(meta);
}

DeviceTensor::DeviceTensor(DeviceBuffer storage, TensorMeta meta, int64_t offset_bytes)
    : storage_(std::move(storage)), meta_(std::move(meta)), offset_bytes_(offset_bytes) {
  if (meta_.device.kind != Device::Kind::CUDA)
    kiln::fail("a DeviceTensor needs a CUDA device, not {} ({})", meta_.device.str(), meta_.str());
  int64_t need = offset_bytes_ + device_storage_extent(meta_) * dtype_size(meta_.dtype);
  if (storage_ && need > static_cast<int64_t>(storage_->size()))
    kiln::fail("a {} tensor at byte offset {} needs {} bytes of storage, the buffer has {}", meta_.str(),
               offset_bytes_, need, storage_->size());
}

DeviceTensor DeviceTensor::empty(const TensorMeta& meta) {
  if (meta.device.kind != Device::Kind::CUDA)
    kiln::fail("DeviceTensor::empty: {} is not on a CUDA device", meta.str());
  int64_t bytes = device_storage_extent(meta) * dtype_size(meta.dtype);
  return DeviceTensor(device_alloc(static_cast<size_t>(bytes), meta.device.index), meta, 0);
}

DeviceTensor DeviceTensor::from_host(const HostTensor& host, int device) {
  HostTensor src = host.contiguous();
  DeviceTensor t = empty(TensorMeta(src.dtype(), src.shape(), Device::cuda(device)));
  copy_host_to_device(t.data(), src.data(), static_cast<size_t>(src.nbytes()), device);
  return t;
}

void* DeviceTensor::data() const {
  if (!storage_ || !storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

HostTensor DeviceTensor::to_host() const {
  TensorMeta host_meta(meta_.dtype, meta_.shape, Device::cpu());
  if (is_contiguous()) {
    HostTensor out = HostTensor::uninitialized(host_meta);
    copy_device_to_host(out.data(), data(), static_cast<size_t>(out.nbytes()), device());
    return out;
  }
  int64_t extent = device_storage_extent(meta_);
  HostTensor span = HostTensor::uninitialized(TensorMeta(meta_.dtype, {extent}));
  copy_device_to_host(span.data(), data(), static_cast<size_t>(span.nbytes()), device());
  return span.view(TensorMeta(meta_.dtype, meta_.shape, meta_.strides, Device::cpu()), 0).contiguous();
}

}  // namespace kiln::runtime::cuda
