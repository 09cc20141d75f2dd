#include "passes/fusion/space.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace kiln::fusion {

std::vector<int64_t> reduced_dims(const Node& n) {
  int64_t rank = n.input(0).meta().rank();
  std::vector<int64_t> dims;
  if (auto given = n.attrs().opt_ints("dim"))
    for (int64_t d : *given) dims.push_back(rank == 0 ? 0 : normalize_dim(d, rank));
  if (dims.empty() || rank == 0) {
    dims.clear();
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

Shape keepdim_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape out = s;
  for (int64_t d : dims) out[d] = 1;
  return out;
}

Shape removed_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(i))) out.push_back(s[i]);
  return out;
}

bool is_creation(const Node& n) { return n.category() == OpCategory::Creation && n.inputs().empty(); }

bool is_extern(const Node& n) {
  return n.category() == OpCategory::Matmul || n.category() == OpCategory::Scatter || n.category() == OpCategory::Opaque ||
         n.category() == OpCategory::Collective || n.category() == OpCategory::Attention || n.category() == OpCategory::Sort;
}

bool is_alias_view(const Node& n) {
  if (n.category() != OpCategory::View) return false;
  if (n.op() == Op::Contiguous || n.op() == Op::Cat) return false;
  if (n.op() == Op::Reshape) {
    // The shape rule gives a copying reshape fresh contiguous strides; a view of a
    // contiguous base is contiguous too, so only a non-contiguous base can tell them apart.
    const TensorMeta& in = n.input(0).meta();
    const TensorMeta& out = n.meta();
    if (!in.is_contiguous() && out.is_contiguous() && out.numel() > 1) return false;
  }
  return true;
}

std::string dims_str(const std::vector<int64_t>& dims) { return fmt::format("[{}]", fmt::join(dims, ",")); }

}  // namespace kiln::fusion
