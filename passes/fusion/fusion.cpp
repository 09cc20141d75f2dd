// Fusion's merge policy, greedy in topological order (Inductor's scheduler, simplified): each
// node starts a draft group, then tries to join the groups of its producers (vertical), then
// the groups of its siblings that read the same inputs (horizontal). Every merge is checked by
// the legality rules (passes/fusion/legality.h), every decision is written down for
// KILN_LOGS=fusion, creation ops are placed last and cheap inputs recomputed by the graph
// surgery (passes/fusion/surgery.h), and the plan is built from the drafts at the end
// (passes/fusion/plan_builder.h).
#include "passes/fusion/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <optional>
#include <queue>
#include <functional>
#include <set>
#include <unordered_set>

#include "ir/error.h"
#include "ir/log.h"
#include "passes/decompose.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/legality.h"
#include "passes/fusion/matmul_epilogue.h"
#include "passes/fusion/plan_builder.h"
#include "passes/fusion/space.h"
#include "passes/fusion/surgery.h"

namespace kiln::fusion {
namespace {

class Fuser {
 public:
  Fuser(Graph& g, const FusionOptions& options)
      : g_(g), opt_(options), drafts_(g), legality_(drafts_, options), surgery_(g, drafts_, legality_, options, notes_) {}

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
    for (Node* n : creations) surgery_.place_creation(n);
    return build_plan(g_, drafts_, notes_, opt_);
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
                          : n->category() == OpCategory::Attention  ? "attention (codegen/attention.h)"
                          : n->category() == OpCategory::Sort       ? "a sort (codegen/sort.h)"
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
      if (opt_.matmul_epilogues && is_gemm_epilogue(p) && drafts_.nodes(mine).size() == 1) {
        // Joined, n would be a second result of the group the GEMM could compute as its epilogue
        // (the ReLU's mask that a backward reads): the group would stay a kernel that reads the
        // product and writes the activation again. Apart, n joins its own readers and reads the
        // activation the GEMM writes (passes/fusion/matmul_epilogue.h).
        note(mine, fmt::format("{} stays out of {}: that group is a GEMM's bias and activation epilogue", node_str(n), ref(p)), n);
        continue;
      }
      // Once n has joined one producer, a further producer group joins n's group: say which.
      std::string why = vertical_why(n, p);
      if (drafts_.nodes(mine).size() > 1)
        why = fmt::format("its producer group {} comes along: {}", op_list(drafts_.nodes_in_order(p)), why);
      merge_vertical(p, mine, n, why);
    }
    if (!blas_operand) surgery_.recompute_cheap_inputs(n, d);
    if (opt_.horizontal && !blas_operand) horizontal(n, d);
  }

  // Whether draft d is exactly what a GEMM's epilogue computes (passes/fusion/matmul_epilogue.h):
  // a bias added to a product that nothing else reads, then a ReLU or a tanh GELU. The bias's
  // other conditions are matmul_epilogue's to check; a near miss there costs a kernel, as before.
  bool is_gemm_epilogue(int d) const {
    std::vector<Node*> ns = drafts_.nodes_in_order(d);
    if (ns.size() != 2 || ns[0]->op() != Op::Add) return false;
    const Node* act = ns[1];
    if (act->input(0) != ns[0]->result() || ns[0]->result_info(0).uses.size() != 1) return false;
    if (epilogue_activation(*act) == MatmulEpilogue::None) return false;
    for (const Value& in : ns[0]->inputs())
      if (!in.node->is_input() && in.node->op() == Op::Matmul && in.node->result_info(0).uses.size() == 1) return true;
    return false;
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
    note(mine, fmt::format("refused: {} with {}: {}", node_str(n), ref(p), legality_.refusal(p, mine).value_or("?")), n);
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
    std::vector<int> candidates;
    int floor = std::numeric_limits<int>::max();  // the earliest node of a candidate
    for (int x : drafts_.downstream(a)) {
      if (x == b || drafts_.has_extern(x) || drafts_.is_alias(x)) continue;
      candidates.push_back(x);
      for (const Node* m : drafts_.nodes(x)) floor = std::min(floor, drafts_.position(m));
    }
    if (candidates.empty()) return false;
    // Which candidate nodes b reads: the walk up from b stops below the earliest of them.
    std::unordered_set<const Node*> upstream = upstream_of(drafts_.nodes(b), floor);
    int a_floor = std::numeric_limits<int>::max();  // nothing before a's earliest node is in a
    for (const Node* m : drafts_.nodes(a)) a_floor = std::min(a_floor, drafts_.position(m));
    std::unordered_map<const Node*, bool> reads_a;  // shared by the candidates' walks
    std::vector<std::pair<int, int>> splits;  // (the rest, the part split off)
    for (int x : candidates) {
      std::vector<Node*> part, rest;
      for (Node* m : drafts_.nodes(x)) (upstream.count(m) ? part : rest).push_back(m);
      if (part.empty() || rest.empty() || !legality_.valid_alone(part) || !legality_.valid_alone(rest)) continue;
      // Only a small part (a count, a scale) is worth a kernel of its own: one that reads or
      // writes a tensor half the size of a's space or more would be a pass over memory.
      if (largest_tensor(part) * 2 > space_numel(a)) continue;
      bool waits_on_a = false;
      for (const Node* m : part) waits_on_a = waits_on_a || reads_group(m, a, a_floor, reads_a);
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

  // Whether `root` reads a node of draft `a`, directly or not, remembered per node in `memo`
  // (one walk for all of a merge's candidates, not one each). `floor`: a's earliest position;
  // nothing before it is in a or reads from it.
  bool reads_group(const Node* root, int a, int floor, std::unordered_map<const Node*, bool>& memo) const {
    if (auto it = memo.find(root); it != memo.end()) return it->second;
    std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto [n, i] = stack.back();
      if (i < n->inputs().size()) {
        ++stack.back().second;
        const Node* in = n->inputs()[i].node;
        if (drafts_.position(in) >= floor && !memo.count(in)) stack.push_back({in, 0});
        continue;
      }
      bool reads = false;
      for (Value v : n->inputs())
        if (drafts_.position(v.node) >= floor) reads = reads || drafts_.group(v.node) == a || memo.at(v.node);
      memo[n] = reads;
      stack.pop_back();
    }
    return memo.at(root);
  }

  // Every node the given nodes read, directly or not, at or after position `floor` (program
  // order is topological: what a node at `floor` or later reads comes before it, so nothing
  // earlier leads back above the floor). A big graph (a ResNet-50 training step: 12,000 nodes)
  // refuses many merges, and each whole walk cost O(nodes).
  std::unordered_set<const Node*> upstream_of(const std::vector<Node*>& nodes, int floor) const {
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> stack(nodes.begin(), nodes.end());
    while (!stack.empty()) {
      const Node* m = stack.back();
      stack.pop_back();
      for (Value v : m->inputs())
        if (drafts_.position(v.node) >= floor && seen.insert(v.node).second) stack.push_back(v.node);
    }
    return seen;
  }

  bool try_merge(int into, int from, Node* n, const std::string& why, bool log_refusal = true) {
    if (auto why_not = legality_.refusal(into, from)) {
      if (log_refusal) note(from, fmt::format("refused: {} with {}: {}", node_str(n), ref(into), *why_not), n);
      return false;
    }
    drafts_.merge(into, from);
    note(into, fmt::format("{} joins {} ({})", node_str(n), ref(into), why), n);
    return true;
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


  Graph& g_;
  const FusionOptions& opt_;
  Drafts drafts_;
  std::vector<Note> notes_;  // the decision log, with draft references
  Legality legality_;
  Surgery surgery_;
};

}  // namespace

FusionPlan fuse(Graph& g, const FusionOptions& options) {
  if (options.max_group_nodes < 1) fail("fusion: max_group_nodes must be at least 1, got {}", options.max_group_nodes);
  return Fuser(g, options).run();
}

}  // namespace kiln::fusion
