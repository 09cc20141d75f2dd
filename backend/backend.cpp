// The defaults of the backend interface (backend/backend.h): those of a device whose memory is
// the host's.
#include "backend/backend.h"

#include "backend/executable_state.h"
#include "ir/error.h"

namespace kiln::backend {

std::vector<StoragePtr> Program::run_on_device(const ExecutableState& s, std::span<const StoragePtr>) const {
  fail("graph {} was compiled for {}, whose tensors are in host memory: run it with Executable::run", s.graph_name, s.device.str());
}

bool Backend::device_present(const Device&, std::string*) const { return true; }

StoragePtr Backend::copy_from_host(const HostTensor&, const Device& device) const {
  fail("{}'s tensors are in host memory: no device copy to make", device.str());
}

}  // namespace kiln::backend
