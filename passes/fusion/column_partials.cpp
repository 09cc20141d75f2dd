#include "passes/fusion/column_partials.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "passes/fusion/space.h"

namespace kiln::fusion {

namespace {

// Whether `dims` (sorted) are 0..k-1 for some 0 < k < rank: the leading dims, not all of them.
bool leading(const std::vector<int64_t>& dims, size_t rank) {
  if (dims.empty() || dims.size() >= rank) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Why the column group `cols` cannot compute the row group `rows` in its chunks, or nullopt.
std::optional<std::string> refusal(const Graph& g, const FusionPlan& plan, const FusionGroup& rows, const FusionGroup& cols) {
  for (const Node* n : cols.nodes)
    if (n->category() == OpCategory::Reduction && n->op() != Op::Sum)
      return fmt::format("%{} is a {}, and only sums run as column partials", n->name(), op_name(n->op()));
  // A column sum is whole only after every chunk: nothing of the group over the rows may read
  // it (logsumexp over dim 0 with its gradient in one group: kiln fuzz, seed 5111015963).
  std::set<const Node*> after_sums;
  for (const Node* n : cols.nodes) {
    bool reads_sum = n->category() == OpCategory::Reduction && n->op() == Op::Sum;
    for (const Value& in : n->inputs()) reads_sum = reads_sum || after_sums.count(in.node) > 0;
    if (!reads_sum) continue;
    after_sums.insert(n);
    if (n->category() != OpCategory::Reduction && n->meta().shape == cols.space)
      return fmt::format("%{} reads a column sum over the rows (the sums are whole only after the last chunk)", n->name());
  }
  const Shape keep = keepdim_shape(rows.space, rows.reduce_dims);
  std::set<std::pair<const Node*, int>> returned;
  for (const Value& v : g.outputs()) returned.insert({v.node, v.index});
  for (const Value& v : rows.outputs) {
    if (returned.count({v.node, v.index})) return fmt::format("%{} is an output of the graph", v.name());
    if (v.meta().shape != keep)
      return fmt::format("%{} {} is not a per-row value of shape {}", v.name(), shape_str(v.meta().shape), shape_str(keep));
    for (const Use& u : v.node->result_info(v.index).uses) {
      const Node* user = u.user;
      if (plan.group_of.at(user) == rows.id) continue;
      if (plan.group_of.at(user) != cols.id) return fmt::format("%{} is read by k{} too", v.name(), plan.group_of.at(user));
      if (user->category() != OpCategory::Pointwise || user->meta().shape != cols.space)
        return fmt::format("%{} is read by %{} ({} {}), not by a pointwise node over the rows", v.name(), user->name(),
                           op_name(user->op()), shape_str(user->meta().shape));
    }
  }
  return std::nullopt;
}

}  // namespace

void choose_rows_with_column_partials(const Graph& g, FusionPlan& plan) {
  for (FusionGroup& cols : plan.groups) {
    if (cols.kind != KernelKind::Reduction || cols.folded_into >= 0 || cols.rows_of >= 0) continue;
    const size_t rank = cols.space.size();
    if (!leading(cols.reduce_dims, rank)) continue;
    std::set<int> read_from;  // the groups whose values the column group reads
    for (const Value& v : cols.inputs)
      if (auto it = plan.group_of.find(v.node); it != plan.group_of.end()) read_from.insert(it->second);
    for (int id : read_from) {
      FusionGroup& rows = plan.groups[static_cast<size_t>(id)];
      if (rows.kind != KernelKind::Reduction || rows.space != cols.space || rows.folded_into >= 0 || rows.rows_of >= 0) continue;
      // The row group reduces exactly the dims the column group keeps.
      std::vector<int64_t> rest;
      for (size_t d = cols.reduce_dims.size(); d < rank; ++d) rest.push_back(static_cast<int64_t>(d));
      if (rows.reduce_dims != rest) continue;
      if (auto why = refusal(g, plan, rows, cols)) {
        cols.reasons.push_back(fmt::format("no column partials in the rows of k{}: {}", rows.id, *why));
        continue;
      }
      rows.folded_into = cols.id;
      cols.rows_of = rows.id;
      cols.reasons.push_back(fmt::format("column partials in the rows of k{}: each block walks a chunk of rows of {}, computing k{}'s "
                                         "statistics of each row, this group's values over the row and its column sums' partials",
                                         rows.id, shape_str(cols.space), rows.id));
      rows.reasons.push_back(fmt::format("computed row by row in the chunks of k{} (column partials)", cols.id));
      break;
    }
  }
}

}  // namespace kiln::fusion
