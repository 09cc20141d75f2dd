#include "frontend/device_kernel.h"

#include <fmt/format.h>

#include "backend/compile.h"
#include "frontend/device.h"
#include "frontend/eager_compile.h"
#include "ir/error.h"

namespace kiln {

int device_kernel_compiles() { return eager_compiles(Device::Kind::CUDA); }

std::vector<Tensor> device_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  // The device: that of the first input off the host; every other tensor must be on it (0-d
  // CPU tensors are copied over, as PyTorch allows CPU scalars).
  Device device = Device::cpu();
  size_t first = 0;
  for (size_t i = 0; i < inputs.size() && device.kind == Device::Kind::CPU; ++i)
    if (inputs[i].device().kind != Device::Kind::CPU) device = inputs[i].device(), first = i;
  KILN_INTERNAL_ASSERT(device.kind != Device::Kind::CPU, "the Device key is dispatched with an input off the host");
  std::vector<backend::StoragePtr> args;
  std::vector<TensorMeta> metas;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.device() != device && !(t.device().kind == Device::Kind::CPU && t.dim() == 0))
      fail("{}: every tensor of an op must be on one device, but input {} {} is on {} and input {} {} on {} (move "
           "it with .to(); only 0-d CPU tensors are copied over)",
           op_name(op), i, t.str(), t.device().str(), first, inputs[first].str(), device.str());
    args.push_back(t.device() == device ? t.device_storage() : t.to(device).device_storage());
    const TensorMeta& m = args.back()->meta();
    metas.push_back(TensorMeta(m.dtype, m.shape, m.strides));
  }
  Graph g;
  try {
    g = one_op_graph(op, metas, attrs);
  } catch (const Error& e) {
    fail("{} on {}: {}", op_name(op), device.str(), e.what());
  }
  const backend::Executable& exe = eager_executable(g, device);
  std::vector<Tensor> out;
  for (auto& r : backend::run_on_device(exe, args)) out.push_back(from_device(std::move(r)));
  return out;
}

}  // namespace kiln
