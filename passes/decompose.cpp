#include "passes/decompose.h"

#include <algorithm>

#include <fmt/format.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/log.h"
#include "ir/printer.h"
#include "passes/decompose/rules.h"

namespace kiln {

namespace {

// The table, and a once-only install of the built-in rules (as the VJP registry does:
// installers call register_decomposition, which writes the table directly while installing).
std::unordered_map<Op, DecompositionFn>& table() {
  static std::unordered_map<Op, DecompositionFn> rules;
  return rules;
}
thread_local bool installing = false;

std::unordered_map<Op, DecompositionFn>& installed_table() {
  static std::once_flag once;
  std::call_once(once, [] {
    installing = true;
    decompositions::install_linalg();
    decompositions::install_reductions();
    decompositions::install_losses();
    decompositions::install_masks();
    decompositions::install_activations();
    decompositions::install_nonfinite();
    decompositions::install_attention();
    decompositions::install_conv();
    decompositions::install_norms();
    decompositions::install_bitwise();
    decompositions::install_einsum();
    decompositions::install_scatter();
    installing = false;
  });
  return table();
}

// Rewriting a composite may create composites (cross_entropy -> log_softmax -> ...); the
// nesting is shallow, so a long chain of rounds means a rule that rebuilds its own op.
constexpr int kMaxRounds = 16;

class Decomposer {
 public:
  explicit Decomposer(Graph& g) : g_(g), log_(log_enabled("decompose")) {
    for (Node* n : g.inputs()) seen_.insert(n);
    for (Node* n : g.nodes()) seen_.insert(n);
  }

  // One sweep over the nodes as they are now; returns whether it replaced any. `only`: the ops
  // to decompose (empty: every op with a decomposition, and a composite without one fails).
  bool round(std::span<const Op> only = {}) {
    bool changed = false;
    for (Node* n : g_.nodes()) {
      if (!only.empty() && std::find(only.begin(), only.end(), n->op()) == only.end()) continue;
      if (const DecompositionFn* fn = find_decomposition(n->op())) {
        expand(n, *fn);
        changed = true;
      } else if (n->category() == OpCategory::Composite) {
        no_rule(*n);  // made by another decomposition
      }
    }
    return changed;
  }

  [[noreturn]] static void no_rule(const Node& n) {
    fail("decompose: %{} = {}(...) is a composite op with no decomposition (register one with "
         "register_decomposition)",
         n.name(), op_name(n.op()));
  }

 private:
  void expand(Node* n, const DecompositionFn& fn) {
    std::string before = log_ ? print_node(*n) : "";
    size_t count_before = g_.num_nodes();
    Builder b(g_, n);
    // New values are named after the node they replace ("%probs_amax"), so a dump still says
    // where each came from.
    b.set_name_prefix(n->name() + "_");
    DecompositionContext ctx{b, *n};
    std::vector<Value> outs = fn(ctx);
    check_results(*n, outs);
    // The new nodes (inserted just before n) remember the op the user wrote: the outermost one,
    // where a decomposition's own composites are decomposed in a later round.
    const std::string origin = n->origin().empty() ? fmt::format("%{} = {}", n->name(), op_name(n->op())) : n->origin();
    size_t made = g_.num_nodes() - count_before;
    for (Node* m : g_.nodes_before(n, made)) m->set_origin(origin);

    std::vector<std::string> names;
    for (int i = 0; i < n->num_results(); ++i) {
      names.push_back(n->result_info(i).name);
      g_.replace_all_uses(n->result(i), outs[i]);
    }
    seen_.erase(n);  // its address may be reused by a node made later
    g_.erase(n);
    // A result the expansion made takes over the replaced node's name; a value that existed
    // before (dropout in eval mode returns its input) keeps its own.
    for (size_t i = 0; i < outs.size(); ++i) {
      bool fresh = !seen_.count(outs[i].node);
      mark_seen(outs[i]);
      if (fresh && !g_.find(names[i])) g_.rename(outs[i], names[i]);
    }
    if (log_)
      log_line("decompose", fmt::format("{}  ->  {} node(s), result {}", before, g_.num_nodes() + 1 - count_before,
                                        outs.size() == 1 ? "%" + outs[0].name() : "(several)"));
  }

  void check_results(const Node& n, const std::vector<Value>& outs) const {
    if (static_cast<int>(outs.size()) != n.num_results())
      fail("decompose: the decomposition of %{} ({}) gave {} values for {} results", n.name(), op_name(n.op()),
           outs.size(), n.num_results());
    for (size_t i = 0; i < outs.size(); ++i) {
      KILN_INTERNAL_ASSERT(outs[i], "a decomposition returns non-empty values");
      const TensorMeta &got = outs[i].meta(), &want = n.meta(static_cast<int>(i));
      if (got.dtype != want.dtype || got.shape != want.shape)
        fail("decompose: the decomposition of %{} ({}) gives {} where the op gives {}", n.name(), op_name(n.op()),
             got.str(), want.str());
    }
  }

  // The nodes an expansion made are those its result reaches that were not there before.
  void mark_seen(Value v) {
    std::vector<Node*> stack{v.node};
    while (!stack.empty()) {
      Node* m = stack.back();
      stack.pop_back();
      if (!seen_.insert(m).second) continue;
      for (const Value& in : m->inputs()) stack.push_back(in.node);
    }
  }

  Graph& g_;
  bool log_;
  std::unordered_set<Node*> seen_;
};

}  // namespace

void register_decomposition(Op op, DecompositionFn fn) {
  auto& rules = installing ? table() : installed_table();
  if (!rules.emplace(op, std::move(fn)).second) fail("op '{}' already has a decomposition", op_name(op));
}

const DecompositionFn* find_decomposition(Op op) {
  auto& rules = installed_table();
  auto it = rules.find(op);
  return it == rules.end() ? nullptr : &it->second;
}

bool is_primitive(Op op) { return op_info(op).category != OpCategory::Composite && !find_decomposition(op); }

void check_primitive(const Graph& g) {
  for (Node* n : g.nodes())
    if (!is_primitive(n->op()))
      fail("graph '{}': %{} = {}(...) is not a primitive op (run the decompose pass first)", g.name(), n->name(),
           op_name(n->op()));
}

bool decompose_ops(Graph& g, std::span<const Op> ops) {
  Decomposer d(g);
  bool changed = false;
  while (d.round(ops)) changed = true;  // a decomposition never rebuilds its own op (run_decompose checks)
  if (changed) g.reinfer_types();
  return changed;
}

bool run_decompose(Graph& g) {
  // A composite that cannot be lowered fails before anything is rewritten.
  for (Node* n : g.nodes())
    if (n->category() == OpCategory::Composite && !find_decomposition(n->op())) Decomposer::no_rule(*n);
  Decomposer d(g);
  bool changed = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    if (!d.round()) {
      // Replacing a node by a value of another layout (dropout's input may be a strided view)
      // can change the strides of the views downstream.
      if (changed) g.reinfer_types();
      return changed;
    }
    changed = true;
  }
  fail("decompose: ops were still left to decompose after {} rounds (does a decomposition rebuild its own op?)",
       kMaxRounds);
}

}  // namespace kiln
