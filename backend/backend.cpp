// The defaults of the backend interface (backend/backend.h): those of a device whose memory is
// the host's.
#include "backend/backend.h"

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln::backend {

// backend::run_on_device turns the CPU away first; a backend of another device that keeps its
// tensors in host memory lands here.
std::vector<StoragePtr> Program::run_on_device(const ExecutableState&, std::span<const StoragePtr>) const {
  fail("this device's programs run on host memory only (its backend has no run_on_device): run the graph with Executable::run");
}

bool Backend::device_present(const Device&, std::string*) const { return true; }

std::optional<std::string> Backend::tuning_device(const CompileOptions&, std::string* why) const {
  if (why) *why = fmt::format("the {} backend does not time candidate schedules", name());
  return std::nullopt;
}

std::vector<double> Backend::time_kernels(const std::vector<codegen::Kernel>&, const CompileOptions&) const {
  fail("the {} backend does not time candidate schedules", name());
}

StoragePtr Backend::copy_from_host(const HostTensor&, const Device& device) const {
  fail("{}'s tensors are in host memory: no device copy to make", device.str());
}

}  // namespace kiln::backend
