#include "backend/registry.h"

#include <map>
#include <mutex>

#include "ir/error.h"

namespace kiln::backend {

namespace {

struct Registry {
  std::mutex mu;
  std::map<Device::Kind, const Backend*> backends;
  Registry() {
    backends[Device::Kind::CPU] = &cpu_backend();
#if KILN_HAVE_CUDA
    backends[Device::Kind::CUDA] = &cuda_backend();
#endif
  }
};

// Built on first use, so a backend registered from another translation unit's static
// initializer finds it whatever the order.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(Device::Kind kind, const Backend& backend) {
  if (kind == Device::Kind::CPU) fail("register_backend: the CPU's backend is built in and cannot be replaced");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.backends[kind] = &backend;
}

const Backend& backend_for(const Device& device) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    auto it = r.backends.find(device.kind);
    if (it != r.backends.end()) return *it->second;
  }
  if (device.kind == Device::Kind::CUDA)
    fail("device {}: this build of kiln has no CUDA backend (no CUDA toolkit was found when it was built; on Debian: "
         "apt-get install nvidia-cuda-dev from the non-free component, then rebuild)", device.str());
  fail("device {}: no backend is registered for '{}' devices (backend::register_backend)", device.str(), device_kind_name(device.kind));
}

}  // namespace kiln::backend
