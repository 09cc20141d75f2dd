// Tensors on devices: copies between host and device memory, and compiled graphs run on device
// memory. Nothing here knows a device: each device's memory comes from its backend
// (backend/registry.h: copy_from_host, run_on_device), as backend::DeviceStorage.
#include "frontend/device.h"

#include "backend/registry.h"
#include "ir/error.h"

namespace kiln {

namespace {

void require_eager(const Tensor& t, std::string_view what) {
  if (!t.defined()) fail("{} of an undefined tensor", what);
  if (t.is_traced())
    fail("{} of traced tensor {}: move tensors to their device before tracing (the graph is device-neutral; "
         "compile it for a device)",
         what, t.str());
}

}  // namespace

Tensor from_device(backend::StoragePtr t, std::string name) {
  KILN_INTERNAL_ASSERT(t && t->meta().device.kind != Device::Kind::CPU, "device storage is off the host");
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = t->meta();
  impl->device_data = std::move(t);
  impl->name = std::move(name);
  return Tensor(std::move(impl));
}

const backend::StoragePtr& Tensor::device_storage() const {
  require_eager(*this, "device_data()");
  if (!impl()->device_data) fail("tensor {} is on {}, not on a GPU: move it with .cuda() first", str(), device().str());
  return impl()->device_data;
}

const backend::DeviceStorage& Tensor::device_data() const { return *device_storage(); }

HostTensor Tensor::host_data() const {
  require_eager(*this, "host_data()");
  if (impl()->device_data) return impl()->device_data->to_host();
  return impl()->data;
}

Tensor Tensor::to(Device target) const {
  require_eager(*this, fmt::format("to({})", target.str()));
  if (device() == target) return *this;
  if (target.kind == Device::Kind::CPU) return Tensor(host_data(), name());
  const std::string kind = target.kind == Device::Kind::CUDA ? "CUDA" : device_kind_name(target.kind);
  const backend::Backend* be = nullptr;
  try {
    be = &backend::backend_for(target);
  } catch (const Error& e) {
    fail("to({}): no {} device is present ({})", target.str(), kind, e.what());
  }
  std::string why;
  if (!be->device_present(target, &why)) fail("to({}): no {} device is present ({})", target.str(), kind, why);
  // From another device: through the host (kiln runs one GPU per process).
  return from_device(be->copy_from_host(host_data(), target), name());
}

std::vector<Tensor> run(const backend::Executable& exe, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    require_eager(inputs[i], fmt::format("run: input {}", i));
    if (inputs[i].device() != exe.device())
      fail("run: input {} ({}) is on {}, the graph was compiled for {}: move it with .to()", i, inputs[i].str(),
           inputs[i].device().str(), exe.device().str());
  }
  std::vector<Tensor> out;
  if (exe.device().kind != Device::Kind::CPU) {
    std::vector<backend::StoragePtr> args;
    for (const Tensor& t : inputs) args.push_back(t.device_storage());
    for (auto& r : backend::run_on_device(exe, args)) out.push_back(from_device(std::move(r)));
    return out;
  }
  std::vector<HostTensor> args;
  for (const Tensor& t : inputs) args.push_back(t.data());
  for (auto& r : exe.run(args)) out.emplace_back(std::move(r));
  return out;
}

}  // namespace kiln
