#pragma once
// Pipelines: which passes run, in which order. The default pipeline is defined here and
// nowhere else (Halide's Lower.cpp: one linear list in one file).
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The optimization passes run on every graph unless a caller names others.
const std::vector<std::string>& default_pipeline();

// What the compile driver (backend::compile) runs before fusion, to a fixpoint: decompose
// composites into primitives (`decompose`), rewrite collectives into what the engines run (always),
// then the default pipeline (`optimize`).
std::vector<std::string> compile_pipeline(bool decompose, bool optimize);

// "dce, cse,canonicalize" -> {"dce", "cse", "canonicalize"}; "default" stands for the
// default pipeline. A kiln::Error for an empty item or an unknown pass (listing the known).
std::vector<std::string> parse_pipeline(std::string_view text);

}  // namespace kiln
