// Greedy fusion in topological order (Inductor's scheduler, simplified): each node starts a
// draft group, then tries to join the groups of its producers (vertical), then the groups of
// its siblings that read the same inputs (horizontal). Every merge is checked by `refusal`,
// and every decision is written down for KILN_LOGS=fusion. Creation ops are placed last,
// inlined into the groups that read them.
#include "passes/fusion/fusion.h"
#include "passes/fusion/matmul_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <queue>
#include <functional>
#include <set>
#include <unordered_set>

#include "ir/error.h"
#include "ir/log.h"
#include "passes/decompose.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/rebuild.h"
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

// "%y = exp"
std::string node_str(const Node* n) { return fmt::format("%{} = {}", n->name(), n->info().name); }

// "[ne, where]", cut short for big groups.
std::string op_list(const std::vector<Node*>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < 6; ++i) out += (i ? ", " : "") + std::string(nodes[i]->info().name);
  return "[" + out + (nodes.size() > 6 ? ", ...]" : "]");
}

class Fuser {
 public:
  Fuser(Graph& g, const FusionOptions& options) : g_(g), opt_(options), drafts_(g) {}

  FusionPlan run() {
    std::vector<Node*> nodes = g_.nodes();
    for (Node* n : nodes)
      if (!is_primitive(n->op()))
        fail("fusion needs primitive ops, but {} is not one; run the decompose pass first", node_str(n));
    for (size_t i = 0; i < nodes.size(); ++i) drafts_.set_position(nodes[i], static_cast<int>(i));
    // Creation ops are listed first: placing the others may erase nodes (a recompute).
    std::vector<Node*> creations;
    for (Node* n : nodes)
      if (is_creation(*n)) creations.push_back(n);
    for (Node* n : nodes)
      if (!is_creation(*n)) place(n);
    for (Node* n : creations) place_creation(n);
    return finish();
  }

 private:
  // A decision about `subject` (when given) follows it if its group is later split.
  void note(int draft, std::string text, const Node* subject = nullptr) {
    notes_.push_back({draft, std::move(text), subject});
  }

  // One node: a draft of its own, then the merges it may make.
  void place(Node* n) {
    int d = drafts_.create(n);
    if (is_extern(*n)) {
      note(d, fmt::format("{} is {}: a kernel of its own", node_str(n),
                          n->category() == OpCategory::Opaque       ? "a custom op with kernels of its own"
                          : n->category() == OpCategory::Collective ? "a collective, a call of the process group's engine"
                                                                    : "an extern call (BLAS/scatter)"));
      return;
    }
    bool blas_operand = is_alias_view(*n) && only_extern_readers(n);
    if (is_alias_view(*n) && producer_drafts(n).empty())
      note(d, fmt::format("{} is an alias of %{}: no kernel, readers index through it", node_str(n),
                          n->input(0).name()));
    // Producers are re-read after each merge: a split (unblock_by_splitting) makes a new one.
    std::vector<int> handled;
    for (;;) {
      int p = -1;
      for (int q : producer_drafts(n))
        if (std::find(handled.begin(), handled.end(), q) == handled.end()) {
          p = q;
          break;
        }
      if (p < 0) break;
      handled.push_back(p);
      int mine = drafts_.find(d);
      if (p == mine) continue;
      if (drafts_.is_alias(p)) {
        fold_view_chain(n, p, mine);
        continue;
      }
      if (blas_operand) {
        note(d, fmt::format("{} stays an alias of {}: only matmul/scatter read it (BLAS takes strided operands)",
                            node_str(n), ref(p)));
        continue;
      }
      if (drafts_.has_extern(p)) {
        note(d, fmt::format("{} starts a new kernel: {} is an extern call (its epilogue follows it)", node_str(n),
                            ref(p)));
        continue;
      }
      if (!opt_.vertical) continue;
      // Once n has joined one producer, a further producer group joins n's group: say which.
      std::string why = vertical_why(n, p);
      if (drafts_.nodes(mine).size() > 1)
        why = fmt::format("its producer group {} comes along: {}", op_list(drafts_.nodes_in_order(p)), why);
      merge_vertical(p, mine, n, why);
    }
    if (!blas_operand) recompute_cheap_inputs(n, d);
    if (opt_.horizontal && !blas_operand) horizontal(n, d);
  }

  // A view chain (an alias draft) is folded into the one group that reads it; read by
  // several groups it stays an alias and each reader indexes through it.
  void fold_view_chain(Node* n, int p, int mine) {
    if (is_alias_view(*n) && drafts_.nodes(mine).size() == 1) {
      drafts_.merge(p, mine);
      note(mine, fmt::format("{} extends the view chain {}", node_str(n), ref(p)));
      return;
    }
    if (!drafts_.only_read_by(p, mine)) {
      note(mine, fmt::format("{} reads alias {} through its index (the alias has other readers)", node_str(n), ref(p)));
      return;
    }
    try_merge(p, mine, n, "folds the view chain into its index arithmetic");
  }

  void horizontal(Node* n, int d) {
    std::set<int> tried;
    for (Value v : n->inputs()) {
      if (is_creation(*v.node)) continue;
      for (const Use& u : v.node->result_info(v.index).uses) {
        int other = drafts_.group(u.user), mine = drafts_.find(d);
        if (other < 0 || other == mine || !tried.insert(other).second) continue;
        if (drafts_.is_alias(other) || drafts_.has_extern(other)) continue;
        try_merge(other, mine, n, fmt::format("horizontal: both read %{}", v.name()));
      }
    }
    // Reductions over the same rows share one loop nest even when they read different
    // tensors (layer-norm backward: the weight and bias gradients both reduce over rows).
    int mine = drafts_.find(d);
    if (n->category() != OpCategory::Reduction || drafts_.reductions(mine).size() != 1) return;
    // Speculative, so refusals go unlogged, and only the nearest few candidates are tried.
    auto [s, r] = drafts_.row_space(mine);
    int candidates = 0;
    for (int other : drafts_.alive_reduction_drafts()) {
      mine = drafts_.find(d);
      if (other == mine || tried.count(other)) continue;
      auto [s2, r2] = drafts_.row_space(other);
      if (s2 != s || r2 != r) continue;
      if (++candidates > 8) return;
      std::string why = fmt::format("horizontal: reduction over the same rows {} of {}", dims_str(r), shape_str(s));
      if (try_merge(other, mine, n, why, /*log_refusal=*/false)) return;
    }
  }

  void merge_vertical(int p, int mine, Node* n, const std::string& why) {
    if (try_merge(p, mine, n, why, /*log_refusal=*/false)) return;
    if (opt_.recompute && unblock_by_splitting(p, mine, n) && try_merge(p, drafts_.find(mine), n, why, /*log_refusal=*/false)) return;
    note(mine, fmt::format("refused: {} with {}: {}", node_str(n), ref(p), refusal(p, mine).value_or("?")), n);
  }

  // n's group b may not join its producer group a when a path a -> X -> b would become a
  // cycle. Where X lies on that path only in part -- b needs some of X's nodes, and those do
  // not wait on a -- X is split in two, so that the needed part runs before a and the rest
  // after it. Cross-entropy's backward is the case: the row kernel over the logits writes the
  // gradient only if the scale (the count of counted rows) is not in the same kernel as the
  // loss's sum, which waits on the row kernel. Undone when the path does not go away.
  bool unblock_by_splitting(int a, int b, Node* n) {
    a = drafts_.find(a);
    b = drafts_.find(b);
    if (!drafts_.path_through_other(a, b)) return false;
    std::unordered_set<const Node*> upstream = upstream_of(drafts_.nodes(b));
    std::vector<std::pair<int, int>> splits;  // (the rest, the part split off)
    for (int x : drafts_.downstream(a)) {
      if (x == b || drafts_.has_extern(x) || drafts_.is_alias(x)) continue;
      std::vector<Node*> part, rest;
      for (Node* m : drafts_.nodes(x)) (upstream.count(m) ? part : rest).push_back(m);
      if (part.empty() || rest.empty() || !valid_alone(part) || !valid_alone(rest)) continue;
      // Only a small part (a count, a scale) is worth a kernel of its own: one that reads or
      // writes a tensor half the size of a's space or more would be a pass over memory.
      if (largest_tensor(part) * 2 > space_numel(a)) continue;
      bool waits_on_a = false;
      for (const Node* m : upstream_of(part)) waits_on_a |= drafts_.group(m) == a;
      if (waits_on_a) continue;
      splits.push_back({x, drafts_.split(x, part)});
    }
    if (!splits.empty() && !drafts_.path_through_other(a, b) && !drafts_.path_through_other(b, a)) {
      for (auto [x, part] : splits) {
        const auto& moved = drafts_.nodes(part);
        for (Note& nt : notes_)
          if (nt.subject && std::find(moved.begin(), moved.end(), nt.subject) != moved.end()) nt.draft = part;
      }
      for (auto [x, part] : splits)
        note(part, fmt::format("{} split off {}: {} reads only these of its nodes, and they do not wait on {}",
                               op_list(drafts_.nodes_in_order(part)), ref(x), node_str(n), ref(a)));
      return true;
    }
    for (auto [x, part] : splits) drafts_.merge(x, part);
    return false;
  }

  static int64_t largest_tensor(const std::vector<Node*>& nodes) {
    int64_t most = 0;
    for (const Node* m : nodes) {
      for (Value v : m->inputs()) most = std::max(most, v.meta().numel());
      for (int i = 0; i < m->num_results(); ++i) most = std::max(most, m->meta(i).numel());
    }
    return most;
  }

  // The number of elements a draft's loops run over: its reductions' input, else its largest result.
  int64_t space_numel(int d) const {
    auto reds = drafts_.reductions(d);
    if (!reds.empty()) return reds.front()->input(0).meta().numel();
    int64_t most = 0;
    for (const Node* m : drafts_.nodes(d))
      for (int i = 0; i < m->num_results(); ++i) most = std::max(most, m->meta(i).numel());
    return most;
  }

  // Every node the given nodes read, directly or not.
  static std::unordered_set<const Node*> upstream_of(const std::vector<Node*>& nodes) {
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> stack(nodes.begin(), nodes.end());
    while (!stack.empty()) {
      const Node* m = stack.back();
      stack.pop_back();
      for (Value v : m->inputs())
        if (seen.insert(v.node).second) stack.push_back(v.node);
    }
    return seen;
  }

  // Whether a node's result is read by a node outside `nodes`, or returned.
  bool read_outside(const Node* m, const std::unordered_set<const Node*>& nodes) const {
    for (int i = 0; i < m->num_results(); ++i) {
      if (drafts_.is_graph_output(m, i)) return true;
      for (const Use& u : m->result_info(i).uses)
        if (!nodes.count(u.user)) return true;
    }
    return false;
  }

  // Whether these nodes could be a group by themselves: reductions over the same rows and
  // everything else in those rows, or, with no reduction, one space.
  bool valid_alone(const std::vector<Node*>& nodes) const {
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

  // A value computed from the graph's inputs alone by a few cheap ops (a mask, a cast, an
  // index), which n reads from a group it did not join, is recomputed in n's group: reading
  // the inputs again costs no more than reading the materialized value, the producer may not
  // have to write it, and n's group does not wait on a kernel for it (which could keep a
  // consumer of n's group out of that kernel: cross-entropy's non-ignored count).
  void recompute_cheap_inputs(Node* n, int d) {
    if (!opt_.vertical || !opt_.recompute || is_alias_view(*n)) return;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      Value v = n->input(static_cast<int>(i));
      int p = drafts_.group(v.node), mine = drafts_.find(d);
      if (p < 0 || p == mine || drafts_.is_alias(p) || drafts_.has_extern(p)) continue;
      std::vector<Node*> cone;
      if (!cheap_input_cone(v.node, cone)) continue;
      if (drafts_.nodes(mine).size() + cone.size() > static_cast<size_t>(opt_.max_group_nodes)) continue;
      // The copies must live in n's loops: in a reduction, in its rows; in a pointwise loop,
      // in its space (a broadcast copy there would keep a later reduction from absorbing
      // the loop). A scalar chain (AdamW's bias corrections) read by a reduction over other
      // rows is read, not recomputed.
      if (!copies_fit(mine, n, cone)) continue;
      std::unordered_map<const Node*, Node*> copy_of;
      std::vector<Node*> copies;
      for (Node* c : cone) {
        std::vector<Value> ins;
        for (Value u : c->inputs()) {
          auto it = copy_of.find(u.node);
          ins.push_back(it == copy_of.end() ? u : Value{it->second, u.index});
        }
        Node* copy = g_.add_node(c->op(), std::move(ins), c->attrs(), c->name());
        copy->set_origin(c->origin());
        copy_of[c] = copy;
        copies.push_back(copy);
        drafts_.add_copy(mine, copy, c);
      }
      n->set_input(static_cast<int>(i), Value{copy_of.at(v.node), v.index});
      note(mine, fmt::format("{} recomputes %{} from the graph's inputs ({}) instead of reading it from {}, which it "
                             "did not join",
                             node_str(n), v.name(), op_list(copies), ref(p)),
           n);
      // Originals nothing reads any more leave their group and the graph.
      for (auto it = cone.rbegin(); it != cone.rend(); ++it) {
        Node* c = *it;
        bool used = c->has_uses();
        for (int r = 0; r < c->num_results(); ++r) used |= drafts_.is_graph_output(c->result(r));
        if (used) continue;
        drafts_.remove(c);
        g_.erase(c);
      }
    }
  }

  bool copies_fit(int d, const Node* reader, const std::vector<Node*>& cone) const {
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

  // The nodes between the graph's inputs (and creation ops) and `root`, producers first, when
  // they are few cheap pointwise ops or views; false otherwise.
  static bool cheap_input_cone(Node* root, std::vector<Node*>& cone) {
    constexpr size_t kMaxRecomputed = 4;
    std::unordered_set<const Node*> seen;
    std::function<bool(Node*)> visit = [&](Node* m) {
      if (m->is_input() || is_creation(*m)) return true;
      if (!seen.insert(m).second) return true;
      if (m->category() != OpCategory::Pointwise && !is_alias_view(*m)) return false;
      if (seen.size() > kMaxRecomputed) return false;
      for (Value u : m->inputs())
        if (!visit(u.node)) return false;
      cone.push_back(m);
      return true;
    };
    return visit(root);
  }

  bool try_merge(int into, int from, Node* n, const std::string& why, bool log_refusal = true) {
    if (auto why_not = refusal(into, from)) {
      if (log_refusal) note(from, fmt::format("refused: {} with {}: {}", node_str(n), ref(into), *why_not), n);
      return false;
    }
    drafts_.merge(into, from);
    note(into, fmt::format("{} joins {} ({})", node_str(n), ref(into), why), n);
    return true;
  }

  // Whether `n` is a view (a reshape, copying or not, a transpose, a slice, a cat...) or a
  // cast whose inputs are buffers the group reads, or such views or casts of them, and which
  // the group does not write out: then the kernel only indexes through it (and converts what
  // it loads), in any shape. The cast counts so that a bf16 layer_norm's f32 weight, cast
  // where it is read, joins the rows that read it instead of being a kernel of its own.
  static bool views_of_buffers_only(const Node* n, const std::set<const Node*>& members,
                                    const std::set<const Node*>& stored) {
    if ((n->category() != OpCategory::View && n->op() != Op::To) || stored.count(n)) return false;
    return std::all_of(n->inputs().begin(), n->inputs().end(), [&](const Value& v) {
      return !members.count(v.node) || views_of_buffers_only(v.node, members, stored);
    });
  }

  // Why drafts a and b may not become one group, or nullopt when they may.
  std::optional<std::string> refusal(int a, int b) {
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

  std::string vertical_why(const Node* n, int p) const {
    bool red_consumer = n->category() == OpCategory::Reduction;
    auto producer_reds = drafts_.reductions(p);
    std::string space = shape_str(n->meta().shape);
    if (red_consumer && !producer_reds.empty())
      return fmt::format("reduction over the same rows {} of {}", dims_str(reduced_dims(*n)),
                         shape_str(n->input(0).meta().shape));
    if (red_consumer)
      return fmt::format("reduction over {} absorbs its producers in {}", dims_str(reduced_dims(*n)),
                         shape_str(n->input(0).meta().shape));
    if (!producer_reds.empty()) {
      auto [s, r] = drafts_.row_space(p);
      return fmt::format("{} consumer in the rows of {} over {}, space {}", category_name(n->category()),
                         shape_str(s), dims_str(r), space);
    }
    if (n->category() == OpCategory::View) return fmt::format("view folds into the index arithmetic, space {}", space);
    return fmt::format("{} consumer, same space {}", category_name(n->category()), space);
  }

  // The producer drafts of n's inputs, each once, in input order.
  std::vector<int> producer_drafts(const Node* n) {
    std::vector<int> out;
    for (Value v : n->inputs()) {
      int p = drafts_.group(v.node);
      if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    return out;
  }

  bool only_extern_readers(Node* n) const {
    for (int i = 0; i < n->num_results(); ++i) {
      if (drafts_.is_graph_output(n->result(i))) return false;
      for (const Use& u : n->result_info(i).uses)
        if (!is_extern(*u.user)) return false;
    }
    return n->has_uses();
  }

  // A creation op goes into the group that reads it; every further reading group gets its
  // own copy (recomputing a fill or an arange is cheaper than a buffer). Only a reader that
  // is no loop (matmul, scatter, alias) or a graph output makes it a Constant group.
  void place_creation(Node* c) {
    std::vector<std::pair<int, std::vector<Use>>> readers;  // group -> its uses, first read first
    bool materialize = drafts_.is_graph_output(c->result(0));
    for (const Use& u : c->result_info(0).uses) {
      int grp = drafts_.group(u.user);
      KILN_INTERNAL_ASSERT(grp >= 0, "every reader of a creation op is placed");
      if (drafts_.is_alias(grp) || drafts_.has_extern(grp)) materialize = true;
      else {
        auto it = std::find_if(readers.begin(), readers.end(), [&](auto& r) { return r.first == grp; });
        if (it == readers.end()) readers.push_back({grp, {u}});
        else it->second.push_back(u);
      }
    }
    if (materialize || readers.empty()) {
      int d = drafts_.create(c);
      note(d, fmt::format("{} is materialized: {}", node_str(c),
                          readers.empty() && !materialize ? "nothing reads it" : "a matmul, scatter, alias or graph output reads it"));
    } else {
      drafts_.add_to(readers.front().first, c);
      note(readers.front().first, fmt::format("{} is inlined into {}", node_str(c), ref(readers.front().first)));
      readers.erase(readers.begin());
    }
    for (auto& [grp, uses] : readers) {
      Node* copy = g_.add_node(c->op(), {}, c->attrs(), c->name());
      copy->set_origin(c->origin());
      for (const Use& u : uses) u.user->set_input(u.input_index, copy->result(0));
      drafts_.add_copy(grp, copy, c);
      note(grp, fmt::format("{} is inlined into {} as a copy %{}", node_str(c), ref(grp), copy->name()));
    }
  }

  FusionPlan finish();

  Graph& g_;
  const FusionOptions& opt_;
  Drafts drafts_;
  struct Note {
    int draft;
    std::string text;  // with draft references
    const Node* subject;
  };
  std::vector<Note> notes_;
};

KernelKind kind_of(const std::vector<Node*>& nodes) {
  bool all_creation = true, all_alias = true;
  bool reduction = false;
  for (const Node* n : nodes) {
    if (n->category() == OpCategory::Matmul) return KernelKind::Matmul;
    if (n->category() == OpCategory::Scatter) return KernelKind::Scatter;
    if (n->category() == OpCategory::Opaque) return KernelKind::Opaque;
    if (n->category() == OpCategory::Collective) return KernelKind::Collective;
    reduction |= n->category() == OpCategory::Reduction;
    all_creation &= is_creation(*n);
    all_alias &= is_alias_view(*n);
  }
  if (reduction) return KernelKind::Reduction;
  if (all_creation) return KernelKind::Constant;
  if (all_alias) return KernelKind::Alias;
  return KernelKind::Pointwise;
}

FusionPlan Fuser::finish() {
  std::vector<int> order = drafts_.execution_order();
  std::unordered_map<int, int> final_id;
  for (size_t i = 0; i < order.size(); ++i) final_id[order[i]] = static_cast<int>(i);

  std::vector<Node*> node_order;
  FusionPlan plan;
  for (int d : order) {
    FusionGroup grp;
    grp.id = final_id.at(d);
    grp.nodes = drafts_.nodes_in_order(d);
    node_order.insert(node_order.end(), grp.nodes.begin(), grp.nodes.end());
    plan.groups.push_back(std::move(grp));
  }
  for (auto& [d, text, subject] : notes_) {
    auto it = final_id.find(drafts_.find(d));
    if (it == final_id.end()) continue;  // a group a recompute left empty
    plan.groups[it->second].reasons.push_back(resolve_refs(text, [&](int draft) {
      auto f = final_id.find(drafts_.find(draft));
      return f == final_id.end() ? -1 : f->second;
    }));
  }

  if (node_order != g_.nodes()) {
    auto map = rebuild_in_order(g_, node_order);
    for (auto& grp : plan.groups)
      for (Node*& n : grp.nodes) n = map.at(n);
  }

  for (auto& grp : plan.groups)
    for (Node* n : grp.nodes) plan.group_of[n] = grp.id;
  std::set<std::pair<const Node*, int>> returned;
  for (const Value& v : g_.outputs()) returned.insert({v.node, v.index});
  for (auto& grp : plan.groups) {
    grp.kind = kind_of(grp.nodes);
    for (Node* n : grp.nodes) {
      for (Value v : n->inputs()) {
        auto it = plan.group_of.find(v.node);
        bool outside = it == plan.group_of.end() || it->second != grp.id;
        if (outside && std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end()) grp.inputs.push_back(v);
      }
      for (int i = 0; i < n->num_results(); ++i) {
        bool read_outside = returned.count({n, i}) != 0;
        for (const Use& u : n->result_info(i).uses) read_outside |= plan.group_of.at(u.user) != grp.id;
        if (read_outside) grp.outputs.push_back(n->result(i));
      }
    }
    const Node* red = nullptr;
    for (const Node* n : grp.nodes)
      if (n->category() == OpCategory::Reduction) { red = n; break; }
    if (red) {
      grp.space = red->input(0).meta().shape;
      grp.reduce_dims = reduced_dims(*red);
    } else {
      grp.space = grp.outputs.empty() ? grp.nodes.back()->meta().shape : grp.outputs.front().meta().shape;
    }
  }

  if (opt_.matmul_epilogues) choose_matmul_epilogues(g_, plan);

  if (log_enabled("fusion")) {
    log_line("fusion", fmt::format("graph {}: {} nodes -> {} kernels in {} groups", g_.name(), g_.num_nodes(),
                                   plan.num_kernels(), plan.groups.size()));
    for (auto& grp : plan.groups) {
      log_line("fusion", grp.label());
      for (auto& r : grp.reasons) log_line("fusion", fmt::format("  k{}: {}", grp.id, r));
    }
  }
  return plan;
}

}  // namespace

FusionPlan fuse(Graph& g, const FusionOptions& options) {
  if (options.max_group_nodes < 1) fail("fusion: max_group_nodes must be at least 1, got {}", options.max_group_nodes);
  return Fuser(g, options).run();
}

}  // namespace kiln::fusion
