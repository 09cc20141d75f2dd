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
    } else if ((n.op() == Op::Gather || n.op() == Op::ScatterAdd || n.op() == Op::Scatter || n.op() == Op::ScatterReduce ||
                n.op() == Op::ScatterFold) && u.input_index == 1) {
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

namespace {

HostTensor random_input(const Graph& g, size_t i, uint64_t seed) {
  const Node* in = g.inputs()[i];
  int64_t bound = kDefaultIntBound;
  if (is_integral(in->meta().dtype)) bound = infer_int_bound(g, in).value_or(kDefaultIntBound);
  // A distinct stream per input, so that two inputs of one shape differ.
  uint64_t stream = seed * 1000003u + i;
  return random_tensor(in->meta().contiguous(), stream, bound);
}

bool all_folders(const std::vector<std::string>& given) {
  if (given.empty()) return false;
  for (const std::string& f : given)
    if (!std::filesystem::is_directory(f)) return false;
  return true;
}

// The inputs of `g` at positions `which`, read from `given`: one file each in order, or folders
// holding NAME.npy for each (the first folder that has it).
std::vector<HostTensor> read_inputs(const Graph& g, const std::vector<size_t>& which, const std::vector<std::string>& given) {
  const auto& ins = g.inputs();
  std::vector<std::string> files = given;
  if (all_folders(given)) {
    files.clear();
    std::vector<std::string> missing;
    for (size_t i : which) {
      std::string name = file_stem(ins[i]->name()) + ".npy", path;
      for (const std::string& dir : given) {
        std::string p = (std::filesystem::path(dir) / name).string();
        if (std::filesystem::exists(p)) {
          path = p;
          break;
        }
      }
      if (path.empty()) missing.push_back(fmt::format("%{} ({})", ins[i]->name(), name));
      files.push_back(path);
    }
    if (!missing.empty())
      fail("--inputs {}: no file for {} of graph '{}''s {} input{}: {}", fmt::join(given, ","), missing.size(), g.name(),
           which.size(), which.size() == 1 ? "" : "s", fmt::join(missing, ", "));
  }
  if (files.size() != which.size()) {
    std::string names;
    for (size_t i : which) names += (names.empty() ? "%" : ", %") + ins[i]->name();
    fail("graph '{}' has {} input{} ({}) but --inputs names {} file{}", g.name(), which.size(), which.size() == 1 ? "" : "s",
         names, files.size(), files.size() == 1 ? "" : "s");
  }
  std::vector<HostTensor> out;
  for (size_t k = 0; k < which.size(); ++k) {
    const Node* in = ins[which[k]];
    const TensorMeta& want = in->meta();
    HostTensor t = read_npy(files[k]);
    if (t.shape() != want.shape)
      fail("input %{} expects {} but '{}' holds {}", in->name(), want.str(), files[k], t.meta().str());
    if (t.dtype() != want.dtype) {
      if (dtype_kind(t.dtype()) != dtype_kind(want.dtype))
        fail("input %{} expects {} but '{}' holds {} (a different kind of number)", in->name(), want.str(), files[k],
             t.meta().str());
      fmt::print(stderr, "note: '{}' holds {}; converted to {} for input %{}\n", files[k], dtype_name(t.dtype()),
                 dtype_name(want.dtype), in->name());
      t = t.to(want.dtype);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) out.push_back(random_input(g, i, seed));
  return out;
}

std::vector<HostTensor> npy_inputs(const Graph& g, const std::vector<std::string>& given) {
  std::vector<size_t> all(g.inputs().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return read_inputs(g, all, given);
}

std::vector<HostTensor> model_inputs(const Model& m, const std::vector<std::string>& given, uint64_t seed) {
  const Graph& g = m.graph;
  std::vector<size_t> free;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (!m.weights.count(g.inputs()[i]->name())) free.push_back(i);
  std::vector<HostTensor> read;
  if (!given.empty()) read = read_inputs(g, free, given);
  std::vector<HostTensor> out;
  size_t k = 0;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    auto w = m.weights.find(g.inputs()[i]->name());
    if (w != m.weights.end()) out.push_back(w->second);
    else if (!given.empty()) out.push_back(std::move(read[k++]));
    else out.push_back(random_input(g, i, seed));
  }
  return out;
}

}  // namespace kiln::cli
