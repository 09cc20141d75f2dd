#pragma once
// --device for `kiln compile` and `kiln run` (compile.cpp).
#include <string>

#include "ir/tensor_meta.h"

namespace kiln::cli {

// "cpu", "cuda" or "cuda:N"; kiln::Error for anything else, listing what is known.
Device parse_device(const std::string& device);

}  // namespace kiln::cli
