// Greedy fusion in topological order (Inductor's scheduler, simplified): each node starts a
// draft group, then tries to join the groups of its producers (vertical), then the groups of
// its siblings that read the same inputs (horizontal). Every merge is checked by `refusal`,
// and every decision is written down for KILN_LOGS=fusion. Creation ops are placed last,
// inlined into the groups that read them.
#include "passes/fusion/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <queue>
#include <set>

#include "ir/error.h"
#include "ir/log.h"
#include "passes/decompose.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/rebuild.h"
#include "passes/fusion/space.h"

namespace kiln::fusion {
namespace {

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
    for (Node* n : nodes)
      if (!is_creation(*n)) place(n);
    for (Node* n : nodes)
      if (is_creation(*n)) place_creation(n);
    return finish();
  }

 private:
  void note(int draft, std::string text) { notes_.emplace_back(draft, std::move(text)); }

  // One node: a draft of its own, then the merges it may make.
  void place(Node* n) {
    int d = drafts_.create(n);
    if (is_extern(*n)) {
      note(d, fmt::format("{} is an extern call (BLAS/scatter): a kernel of its own", node_str(n)));
      return;
    }
    bool blas_operand = is_alias_view(*n) && only_extern_readers(n);
    if (is_alias_view(*n) && producer_drafts(n).empty())
      note(d, fmt::format("{} is an alias of %{}: no kernel, readers index through it", node_str(n),
                          n->input(0).name()));
    for (int p : producer_drafts(n)) {
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
      try_merge(p, mine, n, why);
    }
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

  bool try_merge(int into, int from, Node* n, const std::string& why, bool log_refusal = true) {
    if (auto why_not = refusal(into, from)) {
      if (log_refusal) note(from, fmt::format("refused: {} with {}: {}", node_str(n), ref(into), *why_not));
      return false;
    }
    drafts_.merge(into, from);
    note(into, fmt::format("{} joins {} ({})", node_str(n), ref(into), why));
    return true;
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
      for (int d : {a, b})
        for (const Node* n : drafts_.nodes(d)) {
          if (n->category() == OpCategory::Reduction || is_creation(*n)) continue;
          for (int i = 0; i < n->num_results(); ++i) {
            const Shape& sh = n->meta(i).shape;
            if (sh != s && sh != keep && sh != removed)
              return fmt::format("{} {} is outside the rows of {} reduced over {}", node_str(n), shape_str(sh),
                                 shape_str(s), dims_str(r));
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
      for (const Use& u : uses) u.user->set_input(u.input_index, copy->result(0));
      drafts_.add_copy(grp, copy, c);
      note(grp, fmt::format("{} is inlined into {} as a copy %{}", node_str(c), ref(grp), copy->name()));
    }
  }

  FusionPlan finish();

  Graph& g_;
  const FusionOptions& opt_;
  Drafts drafts_;
  std::vector<std::pair<int, std::string>> notes_;  // (draft, text with draft references)
};

KernelKind kind_of(const std::vector<Node*>& nodes) {
  bool all_creation = true, all_alias = true;
  bool reduction = false;
  for (const Node* n : nodes) {
    if (n->category() == OpCategory::Matmul) return KernelKind::Matmul;
    if (n->category() == OpCategory::Scatter) return KernelKind::Scatter;
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
  for (auto& [d, text] : notes_) {
    int id = final_id.at(drafts_.find(d));
    plan.groups[id].reasons.push_back(resolve_refs(text, [&](int draft) { return final_id.at(drafts_.find(draft)); }));
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
