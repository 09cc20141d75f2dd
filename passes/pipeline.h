#pragma once
// Pipelines: which passes run, in which order. The default pipeline is defined here and
// nowhere else (Halide's Lower.cpp: one linear list in one file).
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The passes run on every graph unless a caller names others.
const std::vector<std::string>& default_pipeline();

// "dce, cse,canonicalize" -> {"dce", "cse", "canonicalize"}; "default" stands for the
// default pipeline. A kiln::Error for an empty item or an unknown pass (listing the known).
std::vector<std::string> parse_pipeline(std::string_view text);

}  // namespace kiln
