#pragma once
// DeviceStorage: a tensor's elements in a device's own memory, laid out as meta() says
// (meta().device names the device). It is what kiln::Tensor holds for an eager tensor off the
// host, as c10::Storage is for PyTorch: each backend whose memory is not the host's provides
// its own (the CUDA backend's wraps a runtime::cuda::DeviceTensor), made by
// Backend::copy_from_host and by its Programs' run_on_device, and nothing above the backend
// knows which. The host's memory is a HostTensor (ir/host_tensor.h), shared the same way.
#include <memory>

#include "ir/host_tensor.h"
#include "ir/tensor_meta.h"

namespace kiln::backend {

class DeviceStorage {
 public:
  virtual ~DeviceStorage() = default;
  virtual const TensorMeta& meta() const = 0;
  // A contiguous host copy of the elements.
  virtual HostTensor to_host() const = 0;
};

using StoragePtr = std::shared_ptr<const DeviceStorage>;

}  // namespace kiln::backend
