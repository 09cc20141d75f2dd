#include "frontend/device_kernel.h"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>

#include "backend/compile.h"
#include "backend/registry.h"
#include "frontend/device.h"
#include "ir/error.h"
#include "ir/printer.h"

namespace kiln {

namespace {

std::atomic<int> g_compiles{0};

// One executable per (device, printed one-op graph). Compiling under the lock keeps two
// threads from compiling the same signature twice; eager device code is not a hot path.
const backend::Executable& executable_for(const Graph& g, const Device& device) {
  static std::mutex mu;
  static std::map<std::string, backend::Executable> cache;
  std::string key = fmt::format("{}\n{}", device.str(), print_graph(g));
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  backend::CompileOptions options;
  options.device = device;
  options.origin = fmt::format("eager {} op", backend::backend_for(device).name());
  ++g_compiles;
  return cache.emplace(key, backend::compile(g, options).executable).first->second;
}

}  // namespace

int device_kernel_compiles() { return g_compiles.load(); }

std::vector<Tensor> device_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  // The device: that of the first input off the host; every other tensor must be on it (0-d
  // CPU tensors are copied over, as PyTorch allows CPU scalars).
  Device device = Device::cpu();
  size_t first = 0;
  for (size_t i = 0; i < inputs.size() && device.kind == Device::Kind::CPU; ++i)
    if (inputs[i].device().kind != Device::Kind::CPU) device = inputs[i].device(), first = i;
  KILN_INTERNAL_ASSERT(device.kind != Device::Kind::CPU, "the Device key is dispatched with an input off the host");
  std::vector<backend::StoragePtr> args;
  Graph g(std::string(op_short_name(op)));
  std::vector<Value> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.device() != device && !(t.device().kind == Device::Kind::CPU && t.dim() == 0))
      fail("{}: every tensor of an op must be on one device, but input {} {} is on {} and input {} {} on {} (move "
           "it with .to(); only 0-d CPU tensors are copied over)",
           op_name(op), i, t.str(), t.device().str(), first, inputs[first].str(), device.str());
    args.push_back(t.device() == device ? t.device_storage() : t.to(device).device_storage());
    const TensorMeta& m = args.back()->meta();
    values.push_back(g.add_input(fmt::format("x{}", i), TensorMeta(m.dtype, m.shape, m.strides)));
  }
  Node* node = nullptr;
  try {
    node = g.add_node(op, values, attrs, std::string(op_short_name(op)));
  } catch (const Error& e) {
    fail("{} on {}: {}", op_name(op), device.str(), e.what());
  }
  std::vector<Value> results;
  for (int i = 0; i < node->num_results(); ++i) results.push_back(node->result(i));
  g.set_outputs(results);
  const backend::Executable& exe = executable_for(g, device);
  std::vector<Tensor> out;
  for (auto& r : backend::run_on_device(exe, args)) out.push_back(from_device(std::move(r)));
  return out;
}

}  // namespace kiln
