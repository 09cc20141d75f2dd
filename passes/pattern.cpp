#include "passes/pattern.h"

#include <atomic>

#include "ir/error.h"
#include "ir/printer.h"
#include "passes/constants.h"
#include "ir/log.h"

namespace kiln::rewrite {

Var::Var(std::string name) : name_(std::make_shared<const std::string>(std::move(name))) {
  static std::atomic<int> next{0};
  id_ = next++;
}

Value Match::operator[](const Var& v) const {
  for (auto& [id, value] : bound_)
    if (id == v.id()) return value;
  KILN_INTERNAL_ASSERT(false, "a rewrite reads only Vars its pattern binds (" + v.name() + ")");
  return {};
}

bool Match::bind(const Var& v, Value value) {
  for (auto& [id, bound] : bound_)
    if (id == v.id()) return bound == value;
  bound_.emplace_back(v.id(), value);
  return true;
}

struct Pattern::Impl {
  enum class Kind { Any, Op, Splat };
  explicit Impl(Kind k) : kind(k) {}
  Kind kind;
  std::vector<Var> binds;  // Vars bound to the matched value
  kiln::Op op = kiln::Op::Input;
  std::vector<Pattern> inputs;
  double splat = 0;
};

Pattern::Pattern(const Var& v) {
  auto impl = std::make_shared<Impl>(Impl::Kind::Any);
  impl->binds.push_back(v);
  impl_ = std::move(impl);
}

Pattern Pattern::bind(const Var& v) const {
  auto copy = std::make_shared<Impl>(*impl_);
  copy->binds.push_back(v);
  return Pattern(std::move(copy));
}

std::optional<Op> Pattern::root_op() const {
  if (impl_->kind == Impl::Kind::Op) return impl_->op;
  return std::nullopt;
}

Pattern op_pattern(Op op, std::vector<Pattern> inputs) {
  auto impl = std::make_shared<Pattern::Impl>(Pattern::Impl::Kind::Op);
  impl->op = op;
  impl->inputs = std::move(inputs);
  return Pattern(std::move(impl));
}

Pattern splat(double c) {
  auto impl = std::make_shared<Pattern::Impl>(Pattern::Impl::Kind::Splat);
  impl->splat = c;
  return Pattern(std::move(impl));
}

bool Pattern::match(Value value, Match& m, Why& why) const {
  const Impl& p = *impl_;
  switch (p.kind) {
    case Impl::Kind::Any:
      break;
    case Impl::Kind::Splat: {
      auto c = splat_value(value);
      if (!c) return why.miss("%{} is not a constant with all elements equal", value.name());
      if (*c != p.splat)  // == on purpose: splat(0) matches -0.0 too
        return why.miss("%{} holds {}, not {}", value.name(), format_double(*c), format_double(p.splat));
      break;
    }
    case Impl::Kind::Op: {
      const Node& n = *value.node;
      if (n.op() != p.op) return why.miss("%{} is {}, not {}", value.name(), n.info().name, op_name(p.op));
      if (n.inputs().size() != p.inputs.size())
        return why.miss("%{} has {} inputs, the pattern {}", value.name(), n.inputs().size(), p.inputs.size());
      for (size_t i = 0; i < p.inputs.size(); ++i)
        if (!p.inputs[i].match(n.input(static_cast<int>(i)), m, why)) return false;
      break;
    }
  }
  for (const Var& v : p.binds)
    if (!m.bind(v, value)) return why.miss("'{}' would be both %{} and %{}", v.name(), m[v].name(), value.name());
  return true;
}

Rule rule(std::string name, Pattern pattern, Var to) {
  return Rule{std::move(name), std::move(pattern), [to](const Match& m, Why&) -> Rewrite { return m[to]; }};
}

Rule rule(std::string name, Pattern pattern, RewriteFn rewrite) {
  return Rule{std::move(name), std::move(pattern), std::move(rewrite)};
}

namespace {

bool same_type(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.device == b.device;
}

class Rewriter {
 public:
  Rewriter(Graph& g, const std::vector<Rule>& rules, const std::string& stream)
      : g_(g), rules_(rules), stream_(stream), log_(log_enabled(stream)) {}

  bool sweep() {
    misses_.clear();
    bool changed = false;
    for (Node* n : g_.nodes())
      if (n->num_results() == 1) changed |= rewrite_node(n);
    return changed;
  }

  // Near misses of the last sweep only: earlier sweeps' misses repeat or are outdated.
  void log_misses() {
    for (const std::string& m : misses_) log_line(stream_, m);
  }

 private:
  bool rewrite_node(Node* n) {
    for (const Rule& r : rules_) {
      // Rules for other ops are skipped silently: only near misses are worth a log line.
      if (auto root = r.pattern.root_op(); root && *root != n->op()) continue;
      Why why(log_);
      if (try_rule(r, n, why)) return true;
      if (log_) misses_.push_back(fmt::format("'{}' does not apply to {}: {}", r.name, print_node(*n), why.reason()));
    }
    return false;
  }

  bool try_rule(const Rule& r, Node* n, Why& why) {
    Match m;
    if (!r.pattern.match(n->result(), m, why)) return false;
    Rewrite rep = r.rewrite(m, why);
    if (!rep) return false;
    if (auto* v = std::get_if<Value>(&*rep)) return replace_with_value(r, n, *v, why);
    return replace_with_node(r, n, std::get<NewNode>(*rep), why);
  }

  bool type_differs(Node* n, const TensorMeta& rep, Why& why) {
    if (same_type(n->meta(), rep)) return false;
    why.miss("the result would be {} instead of {}", rep.str(), n->meta().str());
    return true;
  }

  bool replace_with_value(const Rule& r, Node* n, Value v, Why& why) {
    if (type_differs(n, v.meta(), why)) return false;
    if (log_) log_line(stream_, fmt::format("'{}': {} -> %{}", r.name, print_node(*n), v.name()));
    finish(n, v);
    return true;
  }

  bool replace_with_node(const Rule& r, Node* n, const NewNode& spec, Why& why) {
    std::vector<TensorMeta> in_metas;
    for (const Value& v : spec.inputs) in_metas.push_back(v.meta());
    std::vector<TensorMeta> metas;
    try {
      metas = infer_meta(op_info(spec.op), in_metas, spec.attrs);
    } catch (const Error& e) {
      return why.miss("the replacement {} does not type-check: {}", op_name(spec.op), e.what());
    }
    if (metas.size() != 1) return why.miss("the replacement has {} results", metas.size());
    if (type_differs(n, metas[0], why)) return false;
    std::string name = n->name();
    Value v = g_.add_node(spec.op, spec.inputs, spec.attrs, name, n)->result();
    if (log_) log_line(stream_, fmt::format("'{}': {} -> {}", r.name, print_node(*n), print_node(*v.node)));
    finish(n, v);
    g_.rename(v, name);  // the replaced node is gone, its name is free
    return true;
  }

  void finish(Node* n, Value v) {
    // Same dtype and shape, but strides may differ (a reshape that copied vs one that
    // views), and downstream views derive their strides from their input's. Later rules
    // read types (contiguous(x) asks whether x is contiguous), so re-infer right away.
    bool strides_differ = !(n->meta() == v.meta());
    g_.replace_all_uses(n->result(), v);
    g_.erase(n);
    if (strides_differ) g_.reinfer_types();
  }

  Graph& g_;
  const std::vector<Rule>& rules_;
  std::string stream_;
  bool log_;
  std::vector<std::string> misses_;
};

}  // namespace

bool apply_rules(Graph& g, const std::vector<Rule>& rules, const std::string& log_stream) {
  Rewriter rw(g, rules, log_stream);
  bool changed = false;
  // Rules make chains shorter, so sweeps end; the cap guards against a rule set that
  // would rewrite back and forth.
  constexpr int kMaxSweeps = 64;
  for (int i = 0; i < kMaxSweeps && rw.sweep(); ++i) changed = true;
  rw.log_misses();
  return changed;
}

}  // namespace kiln::rewrite
