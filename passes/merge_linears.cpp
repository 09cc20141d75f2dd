#include "passes/merge_linears.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/builder.h"
#include "ir/log.h"

namespace kiln {

namespace {

// How many nodes a weight's chain may have to be recomputed before the group's first linear:
// autocast's cast of a parameter is one; a transposed, cast weight two.
constexpr int kMaxHoistedChain = 4;

// The input a linear reads, seen through one cast: to(v, bf16) made twice is one input.
struct InputKey {
  Value source;
  int cast = -1;  // the cast's dtype, or -1 when the linear reads `source` itself
  bool operator<(const InputKey& o) const {
    if (source.node != o.source.node) return std::less<const Node*>()(source.node, o.source.node);
    if (source.index != o.source.index) return source.index < o.source.index;
    return cast < o.cast;
  }
};

InputKey input_key(Value x) {
  const Node& n = *x.node;
  if (!n.is_input() && n.op() == Op::To) return {n.input(0), static_cast<int>(n.meta().dtype)};
  return {x, -1};
}

bool is_linear(const Node& n) { return !n.is_input() && n.op() == Op::Linear; }

// A linear, or a matmul of an input with a 2-D weight [K, n].
bool is_candidate(const Node& n) {
  if (n.is_input()) return false;
  if (n.op() == Op::Linear) return n.input(1).meta().rank() == 2 && n.input(0).meta().rank() >= 1;
  if (n.op() == Op::Matmul) return n.input(1).meta().rank() == 2 && n.input(0).meta().rank() >= 2;
  return false;
}

Value weight_of(const Node& n) { return n.input(1); }
Value bias_of(const Node& n) { return is_linear(n) && n.inputs().size() > 2 ? n.input(2) : Value{}; }
int64_t columns_of(const Node& n) { return weight_of(n).meta().shape[is_linear(n) ? 0 : 1]; }
int64_t depth_of(const Node& n) { return weight_of(n).meta().shape[is_linear(n) ? 1 : 0]; }

// What members of one group must share, and a readable form of it for near misses.
struct Signature {
  Op op;
  DType weight, bias, result;  // (K is x's last dim for every reader of x)
  bool has_bias;
  bool operator==(const Signature&) const = default;
};

Signature signature_of(const Node& n) {
  Value b = bias_of(n);
  return {n.op(), weight_of(n).meta().dtype, b ? b.meta().dtype : DType::F32, n.meta().dtype, static_cast<bool>(b)};
}

std::string differs(const Signature& a, const Signature& b) {
  if (a.op != b.op) return "one is a linear, the other a matmul";
  if (a.weight != b.weight) return fmt::format("their weights' dtypes differ ({} and {})", dtype_name(a.weight), dtype_name(b.weight));
  if (a.has_bias != b.has_bias) return "one has a bias, the other none";
  if (a.bias != b.bias) return fmt::format("their biases' dtypes differ ({} and {})", dtype_name(a.bias), dtype_name(b.bias));
  return fmt::format("their results' dtypes differ ({} and {})", dtype_name(a.result), dtype_name(b.result));
}

class LinearMerger {
 public:
  explicit LinearMerger(Graph& g) : g_(g), log_(log_enabled("merge_linears")) {}

  bool run() {
    std::map<InputKey, std::vector<Node*>> readers;
    std::vector<InputKey> order;  // keys in the order of their first reader: a stable log
    int64_t pos = 0;
    for (Node* n : g_.nodes()) {
      position_[n] = pos++;
      if (!is_candidate(*n)) continue;
      InputKey key = input_key(n->input(0));
      auto [it, fresh] = readers.try_emplace(key);
      if (fresh) order.push_back(key);
      it->second.push_back(n);
    }
    bool changed = false;
    for (const InputKey& key : order) {
      std::vector<Node*>& group = readers[key];
      if (group.size() < 2) continue;
      changed |= merge_group(group);
    }
    if (changed) g_.reinfer_types();  // the readers of the split parts see strided views now
    return changed;
  }

 private:
  bool merge_group(std::vector<Node*> group) {
    // The members that agree with the first of the largest set of agreeing linears.
    std::vector<Node*> members;
    {
      std::vector<std::pair<Signature, std::vector<Node*>>> sets;
      for (Node* n : group) {
        Signature s = signature_of(*n);
        auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& e) { return e.first == s; });
        if (it == sets.end()) sets.push_back({s, {n}});
        else it->second.push_back(n);
      }
      auto best = std::max_element(sets.begin(), sets.end(),
                                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
      members = best->second;
      for (const auto& [s, nodes] : sets)
        if (&nodes != &best->second)
          for (Node* n : nodes) near_miss(*n, *members.front(), differs(s, best->first));
    }
    if (members.size() < 2) return false;

    const Node& first_seen = *members.front();
    const int64_t k = depth_of(first_seen);
    const int64_t rows = k == 0 ? 0 : first_seen.input(0).meta().numel() / k;
    if (rows < kMergeLinearsMinRows) {
      for (size_t i = 1; i < members.size(); ++i)
        near_miss(*members[i], first_seen,
                  fmt::format("the input has {} rows, fewer than {}: concatenating the weights at every call would cost "
                              "more than one GEMM saves",
                              rows, kMergeLinearsMinRows));
      return false;
    }

    // Everything the merged linear reads must exist before the first member.
    Node* first = *std::min_element(members.begin(), members.end(),
                                    [&](Node* a, Node* b) { return position_.at(a) < position_.at(b); });
    hoisted_.clear();  // copies made before another group's first linear may come too late here
    std::vector<Node*> kept, made;
    std::vector<Value> weights, biases;
    for (Node* n : members) {
      const size_t made_before = made.size();
      Value w = available_before(weight_of(*n), first, made, 0);
      Value b = bias_of(*n) ? available_before(bias_of(*n), first, made, 0) : Value{};
      if (!w || (bias_of(*n) && !b)) {
        near_miss(*n, *first, "its weight or bias is computed after the first linear from values not there yet");
        unmake(made, made_before);
        continue;
      }
      kept.push_back(n);
      weights.push_back(w);
      if (b) biases.push_back(b);
    }
    if (kept.size() < 2) {
      unmake(made, 0);
      return false;
    }

    Builder b(g_, first);
    const bool linear = is_linear(*first);
    const Op op = first->op();
    const std::string x_name = first->input(0).name();
    Var wc = b.cat(weights, linear ? 0 : 1);
    std::vector<Value> ins{first->input(0), wc};
    if (!biases.empty()) ins.push_back(b.cat(biases, 0));
    Var merged = b.op(op, ins);
    IntList sizes;
    for (Node* n : kept) sizes.push_back(columns_of(*n));
    std::vector<Var> parts = b.split(merged, sizes, -1);
    // The new nodes sit before `first`: a later group's weight may be one of the parts.
    for (const Value& v : std::vector<Value>{wc, ins.back(), merged, parts[0]}) position_[v.node] = position_.at(first) - 1;

    std::vector<std::string> names;
    std::vector<Node*> dead;
    for (size_t i = 0; i < kept.size(); ++i) {
      Node* n = kept[i];
      names.push_back(n->name());
      g_.replace_all_uses(n->result(), parts[i]);
      dead.push_back(n);
      dead.push_back(n->input(0).node);
      dead.push_back(weight_of(*n).node);
      if (bias_of(*n)) dead.push_back(bias_of(*n).node);
    }
    sweep(dead);
    for (size_t i = 0; i < kept.size(); ++i) g_.rename(parts[i], names[i]);
    for (const auto& [copy, name] : copied_from_)  // a recomputed weight keeps its name when the original went
      if (!g_.find(name)) g_.rename(copy->result(), name);
    copied_from_.clear();
    if (log_) {
      std::string list;
      for (size_t i = 0; i < kept.size(); ++i) list += fmt::format("{}%{} ({} columns)", i ? ", " : "", names[i], sizes[i]);
      log_line("merge_linears", fmt::format("{}s over %{} ({} rows) -> one of {} columns: {}", op_name(op), x_name,
                                            rows, merged.shape().back(), list));
    }
    return true;
  }

  // `v`, when it exists before `first`; else a copy of its short pointwise/view chain made just
  // before `first` (the copies appended to `made`); else an empty Value.
  Value available_before(Value v, Node* first, std::vector<Node*>& made, int depth) {
    Node* n = v.node;
    if (n->is_input() || position_.at(n) < position_.at(first)) return v;
    if (auto it = hoisted_.find(n); it != hoisted_.end()) return Value{it->second, v.index};
    if (depth >= kMaxHoistedChain || (n->category() != OpCategory::Pointwise && n->category() != OpCategory::View))
      return {};
    std::vector<Value> ins;
    for (const Value& in : n->inputs()) {
      Value h = available_before(in, first, made, depth + 1);
      if (!h) return {};
      ins.push_back(h);
    }
    Node* copy = g_.add_node(n->op(), ins, n->attrs(), n->name(), first);
    position_[copy] = position_.at(first) - 1;  // before `first`: usable by later members' chains
    hoisted_[n] = copy;
    copied_from_.emplace_back(copy, n->name());
    made.push_back(copy);
    return Value{copy, v.index};
  }

  // Erases the copies made[from..] (none of them read by anything else yet), latest first.
  void unmake(std::vector<Node*>& made, size_t from) {
    for (size_t i = made.size(); i-- > from;) {
      for (auto it = hoisted_.begin(); it != hoisted_.end();)
        it = it->second == made[i] ? hoisted_.erase(it) : std::next(it);
      position_.erase(made[i]);
      std::erase_if(copied_from_, [&](const auto& e) { return e.first == made[i]; });
      g_.erase(made[i]);
    }
    made.resize(from);
  }

  void near_miss(const Node& n, const Node& other, const std::string& why) {
    if (log_)
      log_line("merge_linears", fmt::format("%{} and %{} read one input but stay apart: {}", n.name(), other.name(), why));
  }

  // Erases the nodes of `nodes` that nothing reads any more, then what only they read (a
  // weight's cast and the transpose before it); graph inputs stay.
  void sweep(std::vector<Node*> nodes) {
    std::unordered_set<const Node*> erased;  // this sweep's: no node is made while it runs
    while (!nodes.empty()) {
      Node* n = nodes.back();
      nodes.pop_back();
      if (erased.count(n) || n->is_input()) continue;  // (a node read twice may be gone already)
      bool used = false;
      for (int r = 0; r < n->num_results(); ++r) used |= g_.is_used(n->result(r));
      if (used) continue;
      for (const Value& in : n->inputs()) nodes.push_back(in.node);
      erased.insert(n);
      position_.erase(n);
      g_.erase(n);
    }
  }

  Graph& g_;
  bool log_;
  std::unordered_map<const Node*, int64_t> position_;
  std::unordered_map<const Node*, Node*> hoisted_;             // original -> its copy before `first`
  std::vector<std::pair<Node*, std::string>> copied_from_;    // this group's copies, the originals' names
};

}  // namespace

bool run_merge_linears(Graph& g) { return LinearMerger(g).run(); }

}  // namespace kiln
