#include "passes/fusion/legality.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/fusion/space.h"

namespace kiln::fusion {

namespace {

// Whether a view sends an element to another position of a same-shaped result: a transpose or
// permute that reorders dims of size > 1 (shapes alone do not show it).
bool moves_elements(const Node& n) {
  if (n.op() != Op::Transpose && n.op() != Op::Permute) return false;
  const Shape& in = n.input(0).meta().shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) perm[static_cast<size_t>(d)] = d;
  if (n.op() == Op::Transpose) {
    if (rank == 0) return false;
    std::swap(perm[static_cast<size_t>(normalize_dim(n.attrs().get_int("dim0"), rank))],
              perm[static_cast<size_t>(normalize_dim(n.attrs().get_int("dim1"), rank))]);
  } else {
    IntList dims = n.attrs().get_ints("dims");
    for (int64_t d = 0; d < rank && d < static_cast<int64_t>(dims.size()); ++d)
      perm[static_cast<size_t>(d)] = normalize_dim(dims[static_cast<size_t>(d)], rank);
  }
  // The dims of size > 1, in order, must come out in the same order.
  std::vector<int64_t> moved;
  for (int64_t p : perm)
    if (in[static_cast<size_t>(p)] > 1) moved.push_back(p);
  return !std::is_sorted(moved.begin(), moved.end());
}

// Whether a value of the reduced shape (the rows, no keepdim), broadcast into `out` (of the
// space's rank) by numpy's rule, lands on other dims than the rows of `space` reduced over
// `reduced` (each row dim of size > 1 must keep its place).
bool rows_misaligned(const Shape& space, const std::vector<int64_t>& reduced, const Shape& out) {
  if (out.size() != space.size()) return false;
  std::vector<size_t> kept;
  for (size_t d = 0; d < space.size(); ++d)
    if (std::find(reduced.begin(), reduced.end(), static_cast<int64_t>(d)) == reduced.end()) kept.push_back(d);
  const size_t shift = out.size() - kept.size();
  for (size_t k = 0; k < kept.size(); ++k)
    if (space[kept[k]] > 1 && kept[k] != shift + k) return true;
  return false;
}

// Whether `n` is a view (a reshape, copying or not, a transpose, a slice, a cat...) or a
// cast whose inputs are buffers the group reads, or such views or casts of them, and which
// the group does not write out: then the kernel only indexes through it (and converts what
// it loads), in any shape. The cast counts so that a bf16 layer_norm's f32 weight, cast
// where it is read, joins the rows that read it instead of being a kernel of its own.
bool views_of_buffers_only(const Node* n, const std::set<const Node*>& members,
                                  const std::set<const Node*>& stored) {
  if ((n->category() != OpCategory::View && n->op() != Op::To) || stored.count(n)) return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(), [&](const Value& v) {
    return !members.count(v.node) || views_of_buffers_only(v.node, members, stored);
  });
}

}  // namespace

std::optional<std::string> Legality::refusal(int a, int b) const {
  size_t size = drafts_.nodes(a).size() + drafts_.nodes(b).size();
  if (size > static_cast<size_t>(opt_.max_group_nodes))
    return fmt::format("the group would hold {} nodes, over the cap of {}", size, opt_.max_group_nodes);
  std::vector<const Node*> reds = drafts_.reductions(a), rb = drafts_.reductions(b);
  reds.insert(reds.end(), rb.begin(), rb.end());
  if (!reds.empty()) {
    if (!opt_.reductions && drafts_.nodes(a).size() + drafts_.nodes(b).size() != reds.size())
      return std::string("fusion into reductions is off");
    const Node* first = reds.front();
    Shape s = first->input(0).meta().shape;
    std::vector<int64_t> r = reduced_dims(*first);
    for (const Node* other : reds) {
      if (other->input(0).meta().shape != s || reduced_dims(*other) != r)
        return fmt::format("{} over {} of {} vs {} over {} of {}", other->info().name, dims_str(reduced_dims(*other)),
                           shape_str(other->input(0).meta().shape), first->info().name, dims_str(r), shape_str(s));
    }
    Shape keep = keepdim_shape(s, r), removed = removed_shape(s, r);
    std::set<const Node*> members;
    for (int d : {a, b})
      for (const Node* n : drafts_.nodes(d)) members.insert(n);
    std::set<const Node*> stored;  // nodes whose results the merged group writes out
    for (const Value& v : drafts_.outputs_if_merged(a, b)) stored.insert(v.node);
    for (int d : {a, b})
      for (const Node* n : drafts_.nodes(d)) {
        if (n->category() == OpCategory::Reduction || is_creation(*n)) continue;
        // Views of buffers the group does not compute are only index arithmetic on those
        // buffers' loads, whatever their shape: cat(reshape(g1, [-1]), reshape(g2, [-1]))
        // summed reads each gradient in place (the grad scaler's inf/NaN check, one kernel).
        if (views_of_buffers_only(n, members, stored)) continue;
        for (int i = 0; i < n->num_results(); ++i) {
          const Shape& sh = n->meta(i).shape;
          if (sh != s && sh != keep && sh != removed)
            return fmt::format("{} {} is outside the rows of {} reduced over {}", node_str(n), shape_str(sh),
                               shape_str(s), dims_str(r));
        }
        // A transpose of a square row space keeps its shape but not its rows: element (i,j)
        // would be computed with row (j,i)'s accumulators (found by kiln fuzz).
        if (moves_elements(*n))
          return fmt::format("{} moves elements to other rows of {}", node_str(n), shape_str(s));
        // A per-row value of the reduced shape (no keepdim) broadcast into the row space (by a
        // pointwise op or an expand) aligns its dims to the right, which are the rows' dims
        // only when the reduced dims lead:
        // maximum(x[5,17,5], amin(x, dim=[1,2])[5]) pairs amin[k] with x[i,j,k], not amin[i]
        // (found by kiln fuzz; the kernel used row i's amin).
        if ((n->category() == OpCategory::Pointwise || n->op() == Op::Expand) && removed != keep)
          for (const Value& v : n->inputs())
            if (members.count(v.node) && v.meta().shape == removed && !views_of_buffers_only(v.node, members, stored) &&
                rows_misaligned(s, r, n->meta(0).shape))
              return fmt::format("{} broadcasts %{} {} against other dims than its rows", node_str(n), v.name(),
                                 shape_str(removed));
        // Likewise a gather of a value computed in the group, along a dim that is not reduced:
        // the value is recomputed at the gathered row with this row's accumulators (found by
        // kiln fuzz: exp(softmax(x)) gathered along dim 0 used row i's max and sum for row
        // idx[i]). Along a reduced dim it stays in its row; from a buffer it is a plain load.
        if (n->op() == Op::Gather && members.count(n->input(0).node) && !n->input(0).meta().shape.empty()) {
          const Shape& in = n->input(0).meta().shape;
          const int64_t dim = normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(in.size()));
          const bool along_reduced = in == s && std::find(r.begin(), r.end(), dim) != r.end();
          if (!along_reduced && in[static_cast<size_t>(dim)] > 1)
            return fmt::format("{} reads other rows of %{}, computed in the group", node_str(n), n->input(0).name());
        }
      }
  } else if (!(drafts_.all_alias_views(a) && drafts_.all_alias_views(b))) {
    std::vector<Value> outs = drafts_.outputs_if_merged(a, b);
    for (const Value& v : outs)
      if (v.meta().shape != outs.front().meta().shape)
        return fmt::format("different spaces: %{} {} vs %{} {}", outs.front().name(),
                           shape_str(outs.front().meta().shape), v.name(), shape_str(v.meta().shape));
  }
  // The group in the way is named by a node too: it may later merge with one of the two.
  for (auto [from, to] : {std::pair(a, b), std::pair(b, a)})
    if (auto via = drafts_.path_through_other(from, to))
      return fmt::format("a cycle through {} (%{})", ref(*via), drafts_.nodes_in_order(*via).front()->name());
  return std::nullopt;
}

// Whether a node's result is read by a node outside `nodes`, or returned.
bool Legality::read_outside(const Node* m, const std::unordered_set<const Node*>& nodes) const {
  for (int i = 0; i < m->num_results(); ++i) {
    if (drafts_.is_graph_output(m, i)) return true;
    for (const Use& u : m->result_info(i).uses)
      if (!nodes.count(u.user)) return true;
  }
  return false;
}


bool Legality::valid_alone(const std::vector<Node*>& nodes) const {
  const Node* red = nullptr;
  for (const Node* m : nodes)
    if (m->category() == OpCategory::Reduction) {
      red = m;
      break;
    }
  const std::unordered_set<const Node*> inside(nodes.begin(), nodes.end());
  std::optional<Shape> space;
  for (const Node* m : nodes) {
    // Without a reduction, views count too: a part split off to run alone must give every
    // result it hands on in one space (an expand [1] -> [8] read by another kernel broke
    // lowering's assertion; found by kiln fuzz). With one, an alias view read only inside
    // is index arithmetic; one read outside is written per row, so it must fit the rows
    // (unsqueeze(x) [1,8,1] split off with a sum over [0,1] of [1,8,7] was written for 7
    // rows of 8, and its reader saw garbage; found by kiln fuzz).
    if (is_creation(*m) || (red && is_alias_view(*m) && !read_outside(m, inside))) continue;
    if (red && m->category() == OpCategory::Reduction) {
      if (m->input(0).meta().shape != red->input(0).meta().shape || reduced_dims(*m) != reduced_dims(*red)) return false;
      continue;
    }
    for (int i = 0; i < m->num_results(); ++i) {
      const Shape& sh = m->meta(i).shape;
      if (red) {
        const Shape& s = red->input(0).meta().shape;
        std::vector<int64_t> r = reduced_dims(*red);
        if (sh != s && sh != keepdim_shape(s, r) && sh != removed_shape(s, r)) return false;
      } else if (!space) {
        space = sh;
      } else if (sh != *space) {
        return false;
      }
    }
  }
  return true;
}

bool Legality::copies_fit(int d, const Node* reader, const std::vector<Node*>& cone) const {
  if (drafts_.reductions(d).empty())
    return std::all_of(cone.begin(), cone.end(),
                       [&](const Node* c) { return is_alias_view(*c) || c->meta().shape == reader->meta().shape; });
  // A cast or an alias view of the inputs is a load in any shape (views_of_buffers_only):
  // only the cone's computed values must fit the rows.
  std::vector<Node*> together = drafts_.nodes(d);
  for (Node* c : cone)
    if (c->op() != Op::To && !is_alias_view(*c)) together.push_back(c);
  return valid_alone(together);
}


}  // namespace kiln::fusion
