#include "passes/constant_fold.h"

#include <unordered_map>

#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/printer.h"
#include "ir/reference/reference.h"
#include "passes/constants.h"
#include "ir/log.h"

namespace kiln {

namespace {

// A creation node to be made: full or constant, with its attributes.
struct Creation {
  Op op;
  Attrs attrs;
};

bool all_same(const HostTensor& t) {
  if (is_integral(t.dtype())) {  // get_int is exact for i64, doubles are not beyond 2^53
    for (int64_t i = 1; i < t.numel(); ++i)
      if (t.get_int(i) != t.get_int(0)) return false;
    return true;
  }
  for (int64_t i = 1; i < t.numel(); ++i)
    if (!same_number(t.get(i), t.get(0))) return false;
  return true;
}

// The creation node that reproduces `t`, or nullopt (with the reason in `why`) when `t` is
// too large and not uniform, or holds i64 values a `constant` cannot hold exactly.
std::optional<Creation> creation_for(const HostTensor& t, std::string& why) {
  IntList size(t.shape().begin(), t.shape().end());
  DType dt = t.dtype();
  if (t.numel() == 0 || all_same(t)) {
    AttrValue fill;
    if (t.numel() == 0) fill = is_floating(dt) ? AttrValue(0.0) : AttrValue(int64_t{0});
    else if (is_floating(dt)) fill = t.get(0);
    else fill = t.get_int(0);  // ints and bools: an int fill keeps i64 exact
    return Creation{Op::Full, Attrs{{"size", size}, {"fill_value", fill}, {"dtype", dt}}};
  }
  if (t.numel() > kMaxFoldedConstantElements) {
    why = fmt::format("{} elements, not all equal (limit {})", t.numel(), kMaxFoldedConstantElements);
    return std::nullopt;
  }
  FloatList values(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    values[i] = t.get(i);
    // `constant` holds doubles: an i64 beyond 2^53 would come back as another number.
    if (is_integral(dt) && static_cast<int64_t>(values[i]) != t.get_int(i)) {
      why = fmt::format("element {} ({}) is not exact as a double", i, t.get_int(i));
      return std::nullopt;
    }
  }
  return Creation{Op::Constant, Attrs{{"size", size}, {"dtype", dt}, {"values", values}}};
}

class Folder {
 public:
  explicit Folder(Graph& g) : g_(g), log_(log_enabled("constant_fold")) {}

  // Folds `n` if it can; returns whether it did.
  bool fold(Node* n) {
    if (n->category() == OpCategory::Creation) return false;
    // A collective's result depends on the other ranks' tensors, which this rank does not see.
    if (n->category() == OpCategory::Collective) return false;
    for (const Value& v : n->inputs())
      if (!is_constant(v)) return false;
    std::string why;
    if (!try_fold(n, why)) {
      if (log_) log_line("constant_fold", fmt::format("not folded: {}: {}", print_node(*n), why));
      return false;
    }
    return true;
  }

  bool strides_changed() const { return strides_changed_; }

 private:
  bool too_big(const TensorMeta& m, std::string& why) {
    if (m.numel() <= kMaxFoldEvalElements) return false;
    why = fmt::format("{} has more than {} elements", m.str(), kMaxFoldEvalElements);
    return true;
  }

  // Whether one of n's inputs is a `constant`: values only a table holds.
  static bool reads_a_table(const Node& n) {
    for (const Value& v : n.inputs())
      if (v.node->op() == Op::Constant) return true;
    return false;
  }

  // The value of a constant, evaluated once per pass run.
  const HostTensor& value_of(Value v) {
    auto it = cache_.find(v.node);
    if (it == cache_.end()) it = cache_.emplace(v.node, run_reference(v.node->op(), {}, v.node->attrs())).first;
    return it->second.at(v.index);
  }

  bool try_fold(Node* n, std::string& why) {
    for (const Value& v : n->inputs())
      if (too_big(v.meta(), why)) return false;
    for (int i = 0; i < n->num_results(); ++i)
      if (too_big(n->meta(i), why)) return false;

    std::vector<HostTensor> outs;
    try {
      std::vector<HostTensor> ins;
      for (const Value& v : n->inputs()) ins.push_back(value_of(v));
      outs = run_reference(n->op(), ins, n->attrs());
    } catch (const Error& e) {
      // A kernel that rejects these inputs (an index out of range, say) fails at run time
      // too, where the user gets the error; folding is not the place to report it.
      why = e.what();
      return false;
    }

    // Build every replacement before touching the graph, so a skip leaves it unchanged.
    std::vector<std::pair<int, Creation>> plan;
    for (int i = 0; i < n->num_results(); ++i) {
      if (!g_.is_used(n->result(i))) continue;
      auto c = creation_for(outs.at(i), why);
      if (!c) return false;
      if (c->op == Op::Constant && !reads_a_table(*n)) {
        // reshape(arange(1024)) as a table of 1024 numbers: a kernel would read them from
        // memory where it now computes them from its index.
        why = fmt::format("its {} values follow from the index of the creations it reads (no `constant` among them): "
                          "a kernel computes them, a table would be read",
                          outs.at(i).numel());
        return false;
      }
      plan.emplace_back(i, std::move(*c));
    }

    std::vector<std::pair<Value, std::string>> renames;
    for (auto& [i, c] : plan) {
      Value old = n->result(i);
      Value now = g_.add_node(c.op, {}, c.attrs, old.name(), n)->result(0);
      if (!(now.meta() == old.meta())) strides_changed_ = true;
      g_.replace_all_uses(old, now);
      renames.emplace_back(now, old.name());
    }
    if (log_) log_line("constant_fold", fmt::format("folded: {}", print_node(*n)));
    g_.erase(n);
    for (auto& [v, name] : renames) g_.rename(v, name);  // the old name is free now
    return true;
  }

  Graph& g_;
  bool log_;
  bool strides_changed_ = false;
  std::unordered_map<const Node*, std::vector<HostTensor>> cache_;
};

}  // namespace

bool run_constant_fold(Graph& g) {
  Folder folder(g);
  bool changed = false;
  // In order: a folded node becomes a constant, so its users fold in the same sweep.
  for (Node* n : g.nodes()) changed |= folder.fold(n);
  // A folded view (transpose of a constant) is now a contiguous constant: views downstream
  // of it must re-derive their strides.
  if (folder.strides_changed()) g.reinfer_types();
  return changed;
}

}  // namespace kiln
