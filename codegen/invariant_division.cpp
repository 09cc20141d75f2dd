#include "codegen/invariant_division.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace kiln::codegen {
namespace {

// The names `s` binds or changes: loop vars, lets, accumulators (with the companions an
// accumulator declares: argmax's _idx, sumexp's _max, welford's _mean and _n).
void names_set_in(const StmtPtr& s, std::set<std::string>& out) {
  visit(s, [&](const Stmt& x) {
    switch (x.kind) {
      case StmtKind::For:
      case StmtKind::Let: out.insert(x.name); break;
      case StmtKind::DeclAcc:
      case StmtKind::Accumulate:
      case StmtKind::CombineAcross:
        for (const char* suffix : {"", "_idx", "_max", "_mean", "_n"}) out.insert(x.name + suffix);
        break;
      default: break;
    }
  });
}

bool is_f32_division(const Expr& e) { return e.kind == ExprKind::Call && e.name == "div" && e.dtype == DType::F32 && e.args.size() == 2; }

// A divisor worth hoisting out of a loop binding `inside`: it reads no memory, depends on
// nothing the loop binds or changes, and is not a constant.
bool hoistable(const ExprPtr& divisor, const std::set<std::string>& inside) {
  bool reads_var = false, ok = true;
  visit(divisor, [&](const Expr& x) {
    if (x.kind == ExprKind::Load) ok = false;
    if (x.kind == ExprKind::Var) {
      reads_var = true;
      if (inside.count(x.name)) ok = false;
    }
  });
  return ok && reads_var;
}

class Hoister {
 public:
  explicit Hoister(const StmtPtr& body) { names_set_in(body, taken_); }

  // The statement list with each loop's invariant divisions hoisted before it, then its body
  // done the same way (a divisor that changes with an outer loop may not change with an inner one).
  std::vector<StmtPtr> list(const std::vector<StmtPtr>& in) {
    std::vector<StmtPtr> out;
    for (const StmtPtr& s : in) {
      if (s->kind == StmtKind::For) {
        StmtPtr loop = hoist_from(s, out);
        auto copy = std::make_shared<Stmt>(*loop);
        copy->body = list(loop->body);
        out.push_back(copy);
      } else if (s->kind == StmtKind::Block) {
        auto copy = std::make_shared<Stmt>(*s);
        copy->body = list(s->body);
        out.push_back(copy);
      } else {
        out.push_back(s);
      }
    }
    return out;
  }

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i) name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  // `loop` with its invariant divisions rewritten; their reciprocals' lets appended to `before`.
  StmtPtr hoist_from(const StmtPtr& loop, std::vector<StmtPtr>& before) {
    std::set<std::string> inside;
    names_set_in(loop, inside);
    struct Reciprocal {
      ExprPtr r, scale;
    };
    std::map<std::string, Reciprocal> by_divisor;  // keyed by the divisor's printed form
    return rewrite_exprs(loop, [&](const ExprPtr& e) -> ExprPtr {
      if (!is_f32_division(*e) || !hoistable(e->args[1], inside)) return e;
      const ExprPtr& b = e->args[1];
      std::string key = print_expr(b);
      auto it = by_divisor.find(key);
      if (it == by_divisor.end()) {
        std::string base = b->kind == ExprKind::Var ? b->name : "divisor";
        std::string r = fresh(base + "_rcp"), s = fresh(base + "_rcp_scale");
        before.push_back(let(r, call("rcp_scaled", DType::F32, {b})));
        before.push_back(let(s, call("rcp_scale", DType::F32, {b})));
        it = by_divisor.emplace(key, Reciprocal{value_var(r, DType::F32), value_var(s, DType::F32)}).first;
      }
      return call("mul", DType::F32, {call("mul", DType::F32, {e->args[0], it->second.r}), it->second.scale});
    });
  }

  std::set<std::string> taken_;
};

}  // namespace

StmtPtr hoist_invariant_reciprocals(const StmtPtr& body) {
  Hoister h(body);
  if (body->kind == StmtKind::For) {
    auto wrapped = h.list({body});
    return wrapped.size() == 1 ? wrapped[0] : block(wrapped);
  }
  auto copy = std::make_shared<Stmt>(*body);
  copy->body = h.list(body->body);
  return copy;
}

}  // namespace kiln::codegen
