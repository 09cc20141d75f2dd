#pragma once
// --device for `kiln compile` and `kiln run` (compile.cpp).
#include <string>

namespace kiln::cli {

// Accepts "cpu"; "cuda" is a kiln::Error saying the CUDA backend is not built yet.
void check_device(const std::string& device);

}  // namespace kiln::cli
