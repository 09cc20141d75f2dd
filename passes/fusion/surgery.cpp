#include "passes/fusion/surgery.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "passes/decompose.h"
#include "passes/fusion/space.h"

namespace kiln::fusion {

// A value computed from the graph's inputs alone by a few cheap ops (a mask, a cast, an
// index), which n reads from a group it did not join, is recomputed in n's group: reading
// the inputs again costs no more than reading the materialized value, the producer may not
// have to write it, and n's group does not wait on a kernel for it (which could keep a
// consumer of n's group out of that kernel: cross-entropy's non-ignored count).
// The cone may also start at small values of other groups (at most 1/16 of its size: a row's
// mean and rstd): a layer norm's backward then recomputes x̂ = (x - mean) * rstd in each pass
// that needs it from x and the two row statistics, instead of writing x̂ (and dy * x̂) as
// full tensors in one kernel to read them back in the next two.
void Surgery::recompute_cheap_inputs(Node* n, int d) {
  if (!opt_.vertical || !opt_.recompute || is_alias_view(*n)) return;
  for (size_t i = 0; i < n->inputs().size(); ++i) {
    Value v = n->input(static_cast<int>(i));
    int p = drafts_.group(v.node), mine = drafts_.find(d);
    if (p < 0 || p == mine || drafts_.is_alias(p) || drafts_.has_extern(p)) continue;
    std::vector<Node*> cone;
    // A small value may be read from a reduction group, whose outputs include values of its
    // reduced rows (a mean, an rstd); a pointwise group writes only its own space.
    auto readable_small = [&](Value u) {
      int q = drafts_.group(u.node);
      return opt_.recompute_from_statistics && q >= 0 && !is_alias_view(*u.node) && !drafts_.reductions(drafts_.find(q)).empty();
    };
    if (!cheap_input_cone(v.node, cone, readable_small)) continue;
    if (drafts_.nodes(mine).size() + cone.size() > static_cast<size_t>(opt_.max_group_nodes)) continue;
    // The copies must live in n's loops: in a reduction, in its rows; in a pointwise loop,
    // in its space (a broadcast copy there would keep a later reduction from absorbing
    // the loop). A scalar chain (AdamW's bias corrections) read by a reduction over other
    // rows is read, not recomputed.
    if (!legality_.copies_fit(mine, n, cone)) continue;
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
    note(mine, fmt::format("{} recomputes %{} from the graph's inputs and small values ({}) instead of reading it from {}, which it "
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

// The nodes between `root` and the graph's inputs, creation ops and small values (at most
// 1/kSmallFraction of root's elements, computed elsewhere, where `readable_small` says they
// can be read), producers first, when they are
// few cheap pointwise ops or views, reading at most two tensors of root's size; false
// otherwise.
bool Surgery::cheap_input_cone(Node* root, std::vector<Node*>& cone, const std::function<bool(Value)>& readable_small) {
  constexpr size_t kMaxRecomputed = 4;
  constexpr int64_t kSmallFraction = 16;
  constexpr int kMaxLargeLeaves = 2;
  const int64_t size = root->meta(0).numel();
  // Small leaves only under a pointwise root of some size (an empty tensor has no small part,
  // and a view of a statistic is that statistic's broadcast: nothing to save).
  const bool small_leaves = size > 0 && root->category() == OpCategory::Pointwise;
  std::unordered_set<const Node*> seen;
  std::unordered_set<Value> large_leaves;
  std::function<bool(Value)> visit = [&](Value u) {
    Node* m = u.node;
    if (m->is_input() || is_creation(*m)) {
      if (u.meta().numel() * kSmallFraction > size) large_leaves.insert(u);
      return true;
    }
    if (small_leaves && m != root && u.meta().numel() * kSmallFraction <= size && readable_small(u)) return true;  // a row statistic
    if (!seen.insert(m).second) return true;
    if (m->category() != OpCategory::Pointwise && !is_alias_view(*m)) return false;
    if (seen.size() > kMaxRecomputed) return false;
    for (Value w : m->inputs())
      if (!visit(w)) return false;
    cone.push_back(m);
    return true;
  };
  return visit(root->result(0)) && static_cast<int>(large_leaves.size()) <= kMaxLargeLeaves;
}

// A creation op goes into the group that reads it; every further reading group gets its
// own copy (recomputing a fill or an arange is cheaper than a buffer). Only a reader that
// is no loop (matmul, scatter, alias) or a graph output makes it a Constant group.
void Surgery::place_creation(Node* c) {
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

}  // namespace kiln::fusion
