#pragma once
// A graph's inputs for `kiln run`: read from .npy files, or random.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "tools/cli/common.h"

namespace kiln::cli {

// An exclusive upper bound for the values of integer input `input`, inferred from its uses:
// the indices of an embedding are < weight.shape[0], the target of cross_entropy/nll_loss is
// < the number of classes. Uses are followed through views and casts. nullopt if no use says.
std::optional<int64_t> infer_int_bound(const Graph& g, const Node* input);

// Used where nothing bounds an integer input.
inline constexpr int64_t kDefaultIntBound = 8;

// Random inputs: floats ~ U(-1,1), integers in [0, bound), each input with its own stream.
std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed);

// Inputs read from .npy files, one per graph input in order, or from folders holding NAME.npy
// for each input NAME (as --save-inputs writes them; the names as file_stem gives; the first
// folder that has a name gives it). A file must hold the input's
// shape; a dtype of the same kind (f64 for f32, i64 for i32) is converted, with a note on
// stderr. kiln::Error names the input and the file otherwise.
std::vector<HostTensor> npy_inputs(const Graph& g, const std::vector<std::string>& files);

// A model's inputs: its weights where it has them (an ONNX model's), the others read from
// `files` as npy_inputs reads them (one file each, in order, or folders), or random (seed).
std::vector<HostTensor> model_inputs(const Model& m, const std::vector<std::string>& files, uint64_t seed);

}  // namespace kiln::cli
