// Tensors on devices: copies between host and GPU, and compiled graphs run on device memory.
// What touches CUDA memory is behind KILN_HAVE_CUDA: a build without the CUDA path has no device
// tensors (no impl ever holds device_data), and says so when asked for one.
#include "frontend/device.h"

#include "ir/error.h"

#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#include "runtime/cuda/device_tensor.h"
#endif

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

#if KILN_HAVE_CUDA
Tensor from_device(runtime::cuda::DeviceTensor t, std::string name) {
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = t.meta();
  impl->device_data = std::make_shared<runtime::cuda::DeviceTensor>(std::move(t));
  impl->name = std::move(name);
  return Tensor(std::move(impl));
}
#endif

const runtime::cuda::DeviceTensor& Tensor::device_data() const {
  require_eager(*this, "device_data()");
  if (!impl()->device_data) fail("tensor {} is on {}, not on a GPU: move it with .cuda() first", str(), device().str());
  return *impl()->device_data;
}

HostTensor Tensor::host_data() const {
  require_eager(*this, "host_data()");
#if KILN_HAVE_CUDA
  if (impl()->device_data) return impl()->device_data->to_host();
#endif
  return impl()->data;
}

Tensor Tensor::to(Device target) const {
  require_eager(*this, fmt::format("to({})", target.str()));
  if (device() == target) return *this;
#if KILN_HAVE_CUDA
  if (target.kind == Device::Kind::CPU) return Tensor(impl()->device_data->to_host(), name());
  std::string why;
  if (!backend::cuda_device_present(&why)) fail("to({}): no CUDA device is present ({})", target.str(), why);
  HostTensor host = host_data();  // from another GPU: through the host (kiln runs one GPU per process)
  return from_device(runtime::cuda::DeviceTensor::from_host(host, target.index), name());
#else
  fail("to({}): kiln was built without the CUDA path (no CUDA toolkit was found at build time)", target.str());
#endif
}

std::vector<Tensor> run(const backend::Executable& exe, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    require_eager(inputs[i], fmt::format("run: input {}", i));
    if (inputs[i].device() != exe.device())
      fail("run: input {} ({}) is on {}, the graph was compiled for {}: move it with .to()", i, inputs[i].str(),
           inputs[i].device().str(), exe.device().str());
  }
  std::vector<Tensor> out;
#if KILN_HAVE_CUDA
  if (exe.device().kind == Device::Kind::CUDA) {
    std::vector<runtime::cuda::DeviceTensor> args;
    for (const Tensor& t : inputs) args.push_back(t.device_data());
    for (auto& r : backend::run_on_device(exe, args)) out.push_back(from_device(std::move(r)));
    return out;
  }
#endif
  std::vector<HostTensor> args;
  for (const Tensor& t : inputs) args.push_back(t.data());
  for (auto& r : exe.run(args)) out.emplace_back(std::move(r));
  return out;
}

}  // namespace kiln
