#pragma once
// A small pattern rewriter for peephole rules, so that rules read like rules (MLIR's pattern
// rewriter, Halide's `rewrite(x + 0, x)`):
//
//   Var x("x");
//   rule("x*1 -> x", op(Op::Mul, x, splat(1)), x)
//   rule("reshape(reshape(x)) -> reshape(x)", op(Op::Reshape, op(Op::Reshape, x)).bind(outer),
//        [=](const Match& m, Why&) -> Rewrite { return NewNode{Op::Reshape, {m[x]}, m.node(outer)->attrs()}; })
//
// Matching only reads the graph; the graph changes only once a rule has matched, its
// rewrite function has accepted the match and the replacement has exactly the type
// (dtype, shape, device) of the value it replaces, so broadcasting and type promotion are
// never lost. A failed match can say why (collected only when someone is logging).
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/graph.h"

namespace kiln::rewrite {

// A named slot that a pattern binds to a value. A Var used twice in one pattern must match
// the same value both times.
class Var {
 public:
  explicit Var(std::string name);
  int id() const { return id_; }
  const std::string& name() const { return *name_; }

 private:
  int id_;
  std::shared_ptr<const std::string> name_;
};

// Why a match or a rewrite failed. Formatting costs time, so reasons are kept only when
// `enabled` (the canonicalize log is on). `no(...)` returns nullopt to end a rewrite
// function; `miss(...)` returns false to end a match.
class Why {
 public:
  explicit Why(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  template <typename... Args>
  std::nullopt_t no(fmt::format_string<Args...> f, Args&&... args) {
    if (enabled_) reason_ = fmt::format(f, std::forward<Args>(args)...);
    return std::nullopt;
  }
  template <typename... Args>
  bool miss(fmt::format_string<Args...> f, Args&&... args) {
    no(f, std::forward<Args>(args)...);
    return false;
  }
  const std::string& reason() const { return reason_; }

 private:
  bool enabled_;
  std::string reason_;
};

// The values a successful match bound, by Var.
class Match {
 public:
  Value operator[](const Var& v) const;  // the value bound to v (internal error if unbound)
  Node* node(const Var& v) const { return (*this)[v].node; }
  // Binds v to value; false if v is bound to another value already.
  bool bind(const Var& v, Value value);

 private:
  std::vector<std::pair<int, Value>> bound_;
};

class Pattern {
 public:
  Pattern(const Var& v);  // matches any value and binds it (implicit: `op(Op::Neg, x)`)
  // Also binds the matched value to `v` (to read the matched node's attributes).
  Pattern bind(const Var& v) const;
  // Matches `value`, adding bindings to `m`; on failure says why (when `why` is enabled).
  bool match(Value value, Match& m, Why& why) const;
  // The op a matching node must have, if the pattern is an op pattern (a quick filter).
  std::optional<Op> root_op() const;

  struct Impl;

 private:
  friend Pattern op_pattern(Op op, std::vector<Pattern> inputs);
  friend Pattern splat(double c);
  explicit Pattern(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

Pattern op_pattern(Op op, std::vector<Pattern> inputs);
// A node of `op` whose inputs match `inputs` (as many as given, no more).
template <typename... P>
Pattern op(Op o, P&&... inputs) {
  return op_pattern(o, std::vector<Pattern>{Pattern(std::forward<P>(inputs))...});
}
// A constant (full, zeros, ones, or a folded constant) all of whose elements equal c
// (0 matches -0.0 as well).
Pattern splat(double c);

// A replacement: an existing value, or a new node inserted where the matched node was.
struct NewNode {
  Op op;
  std::vector<Value> inputs;
  Attrs attrs;
};
using Replacement = std::variant<Value, NewNode>;
using Rewrite = std::optional<Replacement>;
// Decides on a match: returns the replacement, or `why.no("...")` to decline.
using RewriteFn = std::function<Rewrite(const Match&, Why&)>;

struct Rule {
  std::string name;
  Pattern pattern;
  RewriteFn rewrite;
};

// "pattern -> the value bound to `to`".
Rule rule(std::string name, Pattern pattern, Var to);
Rule rule(std::string name, Pattern pattern, RewriteFn rewrite);

// Tries `rules` in order on every node, in graph order, rewriting with the first one that
// applies; the matched node is erased (nodes it made dead are left to DCE). Sweeps again
// until a sweep changes nothing, since a rewrite can expose another (neg(neg(neg(neg(x)))).
// Re-infers types when a replacement has other strides than the value it replaced. With
// `log_stream` enabled in KILN_LOGS, reports each rewrite and each failed match with its
// reason. Returns whether anything changed.
bool apply_rules(Graph& g, const std::vector<Rule>& rules, const std::string& log_stream);

}  // namespace kiln::rewrite
