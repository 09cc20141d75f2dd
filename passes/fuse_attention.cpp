#include "passes/fuse_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/log.h"
#include "passes/constants.h"

namespace kiln {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The one node that reads `v`, or nullptr (none, several, or v is a graph output).
Node* only_user(const Graph& g, Value v) {
  const auto& uses = v.node->result_info(v.index).uses;
  if (uses.size() != 1) return nullptr;
  for (const Value& o : g.outputs())
    if (o == v) return nullptr;
  return uses[0].user;
}

// Whether a view swaps the last two dims of its input and nothing else.
bool swaps_last_two(const Node& n) {
  int64_t r = n.meta().rank();
  if (r < 2) return false;
  if (n.op() == Op::Transpose) {
    int64_t d0 = normalize_dim(n.attrs().get_int("dim0"), r), d1 = normalize_dim(n.attrs().get_int("dim1"), r);
    return std::min(d0, d1) == r - 2 && std::max(d0, d1) == r - 1;
  }
  if (n.op() == Op::Permute) {
    IntList dims = n.attrs().get_ints("dims");
    for (int64_t d = 0; d < r; ++d)
      if (normalize_dim(dims[d], r) != (d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d)) return false;
    return true;
  }
  return false;
}

// A bool [L, S] lower triangle from the diagonal down: tril(size=[L, S], diagonal=0, dtype=bool).
bool is_causal_keep(Value m, int64_t L, int64_t S) {
  const Node& n = *m.node;
  if (n.is_input() || n.op() != Op::Tril || !n.inputs().empty()) return false;
  return n.meta().dtype == DType::Bool && n.attrs().get_int("diagonal") == 0 && n.meta().shape == Shape{L, S};
}

struct Candidate {
  Node* softmax = nullptr;
  Node* dropout = nullptr;  // a training dropout of the weights, if any
  Node* out = nullptr;      // matmul(weights, v)
  Node* scores = nullptr;   // matmul(q, kᵀ)
  std::vector<Node*> chain; // the scale and mask nodes between them
  double scale = 1.0;
  Value keep;               // bool: true where a query attends a key
  Value bias;               // added to the scores
  Value fill_mask;          // masked_fill's mask (true = masked), when its complement is needed
};

class AttentionFuser {
 public:
  AttentionFuser(Graph& g) : g_(g), log_(log_enabled("fuse_attention")) {}

  bool run() {
    bool changed = false;
    for (Node* n : g_.nodes()) {
      if (erased_(n) || n->op() != Op::Softmax) continue;
      std::string why;
      std::optional<Candidate> c = match(n, why);
      if (!c) {
        if (log_ && !why.empty()) log_line("fuse_attention", fmt::format("%{}: not attention: {}", n->name(), why));
        continue;
      }
      rewrite(*c);
      changed = true;
    }
    return changed;
  }

 private:
  bool erased_(Node* n) const { return std::find(erased_nodes_.begin(), erased_nodes_.end(), n) != erased_nodes_.end(); }

  std::optional<Candidate> match(Node* sm, std::string& why) {
    Candidate c;
    c.softmax = sm;
    const int64_t rank = sm->meta().rank();
    if (rank < 2) return std::nullopt;
    if (normalize_dim(sm->attrs().get_int("dim"), rank) != rank - 1) return fail(why, "softmax over dim {}, not the last", sm->attrs().get_int("dim"));
    if (sm->attrs().opt_dtype("dtype")) return fail(why, "softmax casts to another dtype");
    // Down: [dropout] -> matmul(weights, v).
    Value w = sm->result(0);
    Node* next = only_user(g_, w);
    if (next && next->op() == Op::Dropout && next->attrs().get_bool("train") && next->attrs().get_float("p") > 0) {
      c.dropout = next;
      w = next->result(0);
      next = only_user(g_, w);
    }
    if (!next || (next->op() != Op::Matmul && next->op() != Op::Bmm) || next->input(0) != w)
      return fail(why, "the weights %{} are not read by one matmul alone (as its left operand)", w.name());
    if (next->input(1).meta().rank() < 2) return fail(why, "the values %{} are a vector", next->input(1).name());
    c.out = next;
    // Up: a scale and a mask, in either order, then matmul(q, kᵀ).
    Value x = sm->input(0);
    for (int step = 0; step < 3; ++step) {
      Node* n = x.node;
      if (n->is_input()) break;
      if (only_user(g_, x) == nullptr) return fail(why, "the scores %{} are also read elsewhere", x.name());
      if (n->op() == Op::Mul || n->op() == Op::Div) {
        int k = splat_value(n->input(1)) && n->input(1).meta().rank() == 0 ? 1
                : n->op() == Op::Mul && splat_value(n->input(0)) && n->input(0).meta().rank() == 0 ? 0
                                                                                                  : -1;
        if (k < 0) break;
        double f = *splat_value(n->input(k));
        c.scale *= n->op() == Op::Mul ? f : 1.0 / f;
        x = n->input(1 - k);
      } else if (n->op() == Op::MaskedFill && n->attrs().get_float("value") == -kInf) {
        if (c.keep || c.bias || c.fill_mask) break;
        c.fill_mask = n->input(1);
        x = n->input(0);
      } else if (n->op() == Op::Where && splat_value(n->input(2)) == -kInf) {
        if (c.keep || c.bias || c.fill_mask) break;
        c.keep = n->input(0);
        x = n->input(1);
      } else if (n->op() == Op::Add) {
        if (c.keep || c.bias || c.fill_mask) break;
        // The scores are the side that leads to the matmul; the other is an additive mask.
        int s = leads_to_matmul(n->input(0)) ? 0 : leads_to_matmul(n->input(1)) ? 1 : -1;
        if (s < 0) break;
        c.bias = n->input(1 - s);
        x = n->input(s);
      } else {
        break;
      }
      c.chain.push_back(n);
    }
    if (x.node->is_input() || (x.node->op() != Op::Matmul && x.node->op() != Op::Bmm))
      return fail(why, "the softmax's input %{} does not come from a matmul through a scale and a mask", x.name());
    if (only_user(g_, x) == nullptr) return fail(why, "the scores %{} are also read elsewhere", x.name());
    c.scores = x.node;
    if (x.node->input(0).meta().rank() < 2 || x.node->input(1).meta().rank() < 2) return fail(why, "q or k is a vector");
    if (!is_floating(x.meta().dtype)) return fail(why, "integer scores");
    if (c.bias && c.bias.meta().dtype != x.meta().dtype) return fail(why, "the additive mask's dtype differs from the scores'");
    return c;
  }

  bool leads_to_matmul(Value v) const {
    for (int i = 0; i < 3 && !v.node->is_input(); ++i) {
      Node* n = v.node;
      if (n->op() == Op::Matmul || n->op() == Op::Bmm) return true;
      if (n->op() != Op::Mul && n->op() != Op::Div) return false;
      v = splat_value(n->input(1)) ? n->input(0) : n->input(1);
    }
    return false;
  }

  template <typename... Args>
  std::nullopt_t fail(std::string& why, fmt::format_string<Args...> f, Args&&... args) {
    if (log_) why = fmt::format(f, std::forward<Args>(args)...);
    return std::nullopt;
  }

  void rewrite(const Candidate& c) {
    Builder b(g_, c.out);
    b.set_name_prefix(c.out->name() + "_");
    Value q = c.scores->input(0), kt = c.scores->input(1), v = c.out->input(1);
    Value k = !kt.node->is_input() && swaps_last_two(*kt.node) ? kt.node->input(0) : b.transpose(kt, -2, -1);
    const int64_t L = q.meta().shape[q.meta().rank() - 2], S = k.meta().shape[k.meta().rank() - 2];
    Attrs a{{"scale", c.scale}};
    std::vector<Value> ins{q, k, v};
    bool causal = false;
    if (c.fill_mask) {
      // masked_fill(s, not(keep)) attends where keep; a causal keep is is_causal.
      Value m = c.fill_mask;
      if (!m.node->is_input() && m.node->op() == Op::LogicalNot && is_causal_keep(m.node->input(0), L, S)) causal = true;
      else ins.push_back(!m.node->is_input() && m.node->op() == Op::LogicalNot ? m.node->input(0) : b.logical_not(m));
    } else if (c.keep) {
      if (is_causal_keep(c.keep, L, S)) causal = true;
      else ins.push_back(c.keep);
    } else if (c.bias) {
      ins.push_back(c.bias);
    }
    a.set("is_causal", causal);
    if (c.dropout) {
      a.set("dropout_p", c.dropout->attrs().get_float("p"));
      a.set("seed", c.dropout->attrs().get_int("seed"));
    }
    Var y = b.op(Op::ScaledDotProductAttention, ins, a);
    Value old = c.out->result(0);
    if (y.meta().shape != old.meta().shape || y.meta().dtype != old.meta().dtype ||
        (c.dropout && c.dropout->meta().shape.size() != old.meta().shape.size())) {
      // Broadcasting the chain allowed but attention does not (v's batch wider than the weights').
      if (log_) log_line("fuse_attention", fmt::format("%{}: not attention: {} where the chain gives {}", c.out->name(), y.meta().str(), old.meta().str()));
      sweep({y.v.node});
      return;
    }
    const std::string name = old.name();
    g_.replace_all_uses(old, y);
    std::vector<Node*> dead{c.out};
    const size_t erased_before = erased_nodes_.size();
    if (c.dropout) dead.push_back(c.dropout);
    dead.push_back(c.softmax);
    dead.insert(dead.end(), c.chain.begin(), c.chain.end());
    dead.push_back(c.scores);
    // What fed only the chain: kᵀ, the scale's and the fill's constants, the mask's complement
    // and the triangle it was made from.
    for (Node* n : c.chain)
      for (const Value& in : n->inputs())
        if (is_constant(in)) dead.push_back(in.node);
    for (Value m : {kt, c.fill_mask, c.keep})
      if (m) {
        dead.push_back(m.node);
        if (!m.node->is_input() && m.node->op() == Op::LogicalNot) dead.push_back(m.node->input(0).node);
      }
    sweep(dead);
    g_.rename(y, name);
    if (log_)
      log_line("fuse_attention", fmt::format("%{} = scaled_dot_product_attention(%{}, %{}, %{}{}, is_causal={}, scale={}{}), replacing {} nodes",
                                             name, q.name(), k.name(), v.name(), ins.size() > 3 ? ", %" + ins[3].name() : "",
                                             causal, c.scale, c.dropout ? fmt::format(", dropout_p={}", c.dropout->attrs().get_float("p")) : "",
                                             erased_nodes_.size() - erased_before));
  }

  // Erases the nodes of `nodes` (in order) that nothing reads any more.
  void sweep(const std::vector<Node*>& nodes) {
    for (Node* n : nodes) {
      if (n->is_input() || erased_(n)) continue;
      bool used = false;
      for (int r = 0; r < n->num_results(); ++r) used |= g_.is_used(n->result(r));
      if (used) continue;
      g_.erase(n);
      erased_nodes_.push_back(n);
    }
  }

  Graph& g_;
  bool log_;
  std::vector<Node*> erased_nodes_;
};

}  // namespace

bool run_fuse_attention(Graph& g) { return AttentionFuser(g).run(); }

}  // namespace kiln
