#include "tools/cli/inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ir/error.h"
#include "ir/npy.h"
#include "tools/cli/common.h"

namespace kiln::cli {

namespace {

// Ops whose result holds (some of) input 0's values unchanged, so a bound carries over.
bool passes_values_through(const Node& n) {
  return n.category() == OpCategory::View || n.op() == Op::To || n.op() == Op::Contiguous;
}

void collect_bounds(Value v, std::optional<int64_t>& bound, int depth) {
  if (depth > 64) return;  // view chains are short; this only guards against surprises
  auto tighten = [&](int64_t b) { bound = bound ? std::min(*bound, b) : b; };
  for (const Use& u : v.node->result_info(v.index).uses) {
    const Node& n = *u.user;
    if (n.op() == Op::Embedding && u.input_index == 1) {
      tighten(n.input(0).meta().shape.at(0));
    } else if ((n.op() == Op::CrossEntropy || n.op() == Op::NllLoss) && u.input_index == 1) {
      const Shape& logits = n.input(0).meta().shape;  // [N, C] or [C]
      if (!logits.empty()) tighten(logits.size() >= 2 ? logits[1] : logits[0]);
    } else if ((n.op() == Op::Gather || n.op() == Op::ScatterAdd) && u.input_index == 1) {
      const Shape& data = n.input(0).meta().shape;  // indices select along `dim` of input 0
      int64_t rank = std::max<int64_t>(static_cast<int64_t>(data.size()), 1);
      int64_t dim = n.attrs().get_int("dim");
      if (dim < 0) dim += rank;
      tighten(data.empty() ? 1 : data.at(static_cast<size_t>(dim)));
    } else if (passes_values_through(n)) {
      for (int r = 0; r < n.num_results(); ++r) collect_bounds(Value{const_cast<Node*>(&n), r}, bound, depth + 1);
    }
  }
}

}  // namespace

std::optional<int64_t> infer_int_bound(const Graph&, const Node* input) {
  std::optional<int64_t> bound;
  collect_bounds(Value{const_cast<Node*>(input), 0}, bound, 0);
  return bound;
}

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node* in = g.inputs()[i];
    int64_t bound = kDefaultIntBound;
    if (is_integral(in->meta().dtype)) bound = infer_int_bound(g, in).value_or(kDefaultIntBound);
    // A distinct stream per input, so that two inputs of one shape differ.
    uint64_t stream = seed * 1000003u + i;
    out.push_back(random_tensor(in->meta().contiguous(), stream, bound));
  }
  return out;
}

std::vector<HostTensor> npy_inputs(const Graph& g, const std::vector<std::string>& given) {
  const auto& ins = g.inputs();
  std::vector<std::string> files = given;
  // A folder: one NAME.npy per graph input, named as --save-inputs and export write them.
  if (given.size() == 1 && std::filesystem::is_directory(given[0])) {
    files.clear();
    std::vector<std::string> missing;
    for (const Node* in : ins) {
      std::string path = (std::filesystem::path(given[0]) / (file_stem(in->name()) + ".npy")).string();
      if (!std::filesystem::exists(path)) missing.push_back(fmt::format("%{} ({})", in->name(), path));
      files.push_back(path);
    }
    if (!missing.empty())
      fail("--inputs {}: no file for {} of graph '{}''s {} input{}: {}", given[0], missing.size(), g.name(), ins.size(),
           ins.size() == 1 ? "" : "s", fmt::join(missing, ", "));
  }
  if (files.size() != ins.size()) {
    std::string names;
    for (auto* n : ins) names += (names.empty() ? "%" : ", %") + n->name();
    fail("graph '{}' has {} input{} ({}) but --inputs names {} file{}", g.name(), ins.size(), ins.size() == 1 ? "" : "s",
         names, files.size(), files.size() == 1 ? "" : "s");
  }
  std::vector<HostTensor> out;
  for (size_t i = 0; i < ins.size(); ++i) {
    const TensorMeta& want = ins[i]->meta();
    HostTensor t = read_npy(files[i]);
    if (t.shape() != want.shape)
      fail("input %{} expects {} but '{}' holds {}", ins[i]->name(), want.str(), files[i], t.meta().str());
    if (t.dtype() != want.dtype) {
      if (dtype_kind(t.dtype()) != dtype_kind(want.dtype))
        fail("input %{} expects {} but '{}' holds {} (a different kind of number)", ins[i]->name(), want.str(), files[i],
             t.meta().str());
      fmt::print(stderr, "note: '{}' holds {}; converted to {} for input %{}\n", files[i], dtype_name(t.dtype()),
                 dtype_name(want.dtype), ins[i]->name());
      t = t.to(want.dtype);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kiln::cli
