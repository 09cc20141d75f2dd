// The defaults of the backend interface (backend/backend.h): those of a device whose memory is
// the host's.
#include "backend/backend.h"

#include "ir/error.h"

namespace kiln::backend {

// backend::run_on_device turns the CPU away first; a backend of another device that keeps its
// tensors in host memory lands here.
std::vector<StoragePtr> Program::run_on_device(const ExecutableState&, std::span<const StoragePtr>) const {
  fail("this device's programs run on host memory only (its backend has no run_on_device): run the graph with Executable::run");
}

bool Backend::device_present(const Device&, std::string*) const { return true; }

StoragePtr Backend::copy_from_host(const HostTensor&, const Device& device) const {
  fail("{}'s tensors are in host memory: no device copy to make", device.str());
}

}  // namespace kiln::backend
