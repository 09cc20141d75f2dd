#pragma once
// Which backend compiles for which device kind. The CPU backend and, in a build with the CUDA
// path, the CUDA backend are there from the start; a backend for another device registers
// itself under a kind of its own (register_device_kind, ir/tensor_meta.h). Adding a device
// then touches only its own files: tests/backend/test_third_backend.cpp does it in one.
#include "backend/backend.h"

namespace kiln::backend {

// Makes `backend` (which must outlive every compile) the backend of `kind`, replacing any
// before it. kiln::Error for the CPU's kind.
void register_backend(Device::Kind kind, const Backend& backend);

// The backend of `device`'s kind; kiln::Error naming what is missing when there is none (for
// CUDA: this build has no CUDA backend, and what to install).
const Backend& backend_for(const Device& device);

}  // namespace kiln::backend
