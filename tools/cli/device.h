#pragma once
// --device for `kiln compile` and `kiln run` (compile.cpp).
#include <string>

#include "ir/tensor_meta.h"

namespace kiln::cli {

// "cpu", "cuda" or "cuda:N"; kiln::Error for anything else, listing what is known.
Device parse_device(const std::string& device);

// Checks, before any work, that `command` ("kiln run") can run compiled graphs on `device`:
// the CPU backend built in, or a usable CUDA GPU of that index. kiln::Error saying what is
// missing otherwise.
void require_runnable(const Device& device, const std::string& command);

}  // namespace kiln::cli
