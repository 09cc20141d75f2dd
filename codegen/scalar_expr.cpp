#include "codegen/scalar_expr.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <mutex>

#include "codegen/pointwise_exprs.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// How many operands a row of pointwise_exprs.def takes: its highest {k} plus one.
int arity(std::string_view expr) {
  int n = 0;
  for (size_t i = 0; i + 2 < expr.size(); ++i)
    if (expr[i] == '{' && std::isdigit(static_cast<unsigned char>(expr[i + 1])) && expr[i + 2] == '}')
      n = std::max(n, expr[i + 1] - '0' + 1);
  return n;
}

bool is_predicate_name(std::string_view n) {
  return n == "eq" || n == "ne" || n == "lt" || n == "le" || n == "gt" || n == "ge" || n == "logical_and" ||
         n == "logical_or" || n == "logical_not";
}

// A recursive-descent parser: expr := cmp; cmp := sum (op sum)?; sum := term (('+'|'-') term)*;
// term := unary (('*'|'/') unary)*; unary := '-' unary | primary;
// primary := number | name | name '(' args ')' | '(' expr ')'.
class Parser {
 public:
  Parser(std::string_view text, std::span<const std::string> inputs, std::span<const std::string> attrs,
         const std::string& what)
      : s_(text), inputs_(inputs), attrs_(attrs), what_(what) {}

  ScalarExprPtr parse() {
    ScalarExprPtr e = comparison();
    skip();
    if (i_ < s_.size()) error(fmt::format("unexpected '{}'", s_[i_]));
    return e;
  }

 private:
  [[noreturn]] void error(const std::string& msg, size_t at = std::string::npos) const {
    fail("{}: scalar expression '{}': {} at column {}", what_, s_, msg, (at == std::string::npos ? i_ : at) + 1);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(i_, tok.size()) != tok) return false;
    i_ += tok.size();
    return true;
  }
  static ScalarExprPtr call(std::string name, std::vector<ScalarExprPtr> args) {
    auto e = std::make_shared<ScalarExpr>();
    e->kind = ScalarExpr::Kind::Call;
    e->predicate = is_predicate_name(name);
    e->name = std::move(name);
    e->args = std::move(args);
    return e;
  }

  ScalarExprPtr comparison() {
    ScalarExprPtr a = sum();
    static const std::pair<std::string_view, const char*> ops[] = {{"<=", "le"}, {">=", "ge"}, {"==", "eq"},
                                                                   {"!=", "ne"}, {"<", "lt"},  {">", "gt"}};
    for (auto [tok, fn] : ops)
      if (eat(tok)) return call(fn, {a, sum()});
    return a;
  }
  ScalarExprPtr sum() {
    ScalarExprPtr a = term();
    for (;;) {
      if (eat("+")) a = call("add", {a, term()});
      else if (eat("-")) a = call("sub", {a, term()});
      else return a;
    }
  }
  ScalarExprPtr term() {
    ScalarExprPtr a = unary();
    for (;;) {
      if (eat("*")) a = call("mul", {a, unary()});
      else if (eat("/")) a = call("div", {a, unary()});
      else return a;
    }
  }
  ScalarExprPtr unary() {
    if (eat("-")) return call("neg", {unary()});
    return primary();
  }
  ScalarExprPtr primary() {
    skip();
    if (i_ >= s_.size()) error("the expression ends where a value is expected");
    const size_t start = i_;
    char c = s_[i_];
    if (eat("(")) {
      ScalarExprPtr e = comparison();
      if (!eat(")")) error("expected ')'");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      auto e = std::make_shared<ScalarExpr>();
      const char* first = s_.data() + i_;
      auto r = std::from_chars(first, s_.data() + s_.size(), e->number);
      if (r.ec != std::errc()) error("malformed number");
      i_ += static_cast<size_t>(r.ptr - first);
      return e;
    }
    if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) error(fmt::format("unexpected '{}'", c));
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    std::string name(s_.substr(start, i_ - start));
    if (eat("(")) return function(name, start);
    auto e = std::make_shared<ScalarExpr>();
    if (auto it = std::find(inputs_.begin(), inputs_.end(), name); it != inputs_.end()) {
      e->kind = ScalarExpr::Kind::Input;
      e->input = static_cast<int>(it - inputs_.begin());
    } else if (std::find(attrs_.begin(), attrs_.end(), name) != attrs_.end()) {
      e->kind = ScalarExpr::Kind::Attr;
      e->name = name;
    } else {
      std::vector<std::string> known(inputs_.begin(), inputs_.end());
      known.insert(known.end(), attrs_.begin(), attrs_.end());
      error(fmt::format("unknown name '{}' (the op's inputs and numeric attributes: {})", name,
                        known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))),
            start);
    }
    return e;
  }
  ScalarExprPtr function(const std::string& name, size_t at) {
    std::vector<ScalarExprPtr> args;
    if (!eat(")")) {
      do args.push_back(comparison());
      while (eat(","));
      if (!eat(")")) error("expected ',' or ')' in the arguments of " + name);
    }
    int want = 3;
    if (name != "where") {
      const PointwiseExpr* row = find_pointwise_expr(name);
      if (!row || row->float_expr.empty())
        error(fmt::format("unknown function '{}' (known: {})", name, scalar_expr_functions()), at);
      want = arity(row->float_expr);
    }
    if (static_cast<int>(args.size()) != want)
      error(fmt::format("{} takes {} argument{}, given {}", name, want, want == 1 ? "" : "s", args.size()), at);
    if (name == "where") {
      auto e = std::make_shared<ScalarExpr>();
      e->kind = ScalarExpr::Kind::Where;
      e->args = std::move(args);
      return e;
    }
    return call(name, std::move(args));
  }

  std::string_view s_;
  size_t i_ = 0;
  std::span<const std::string> inputs_, attrs_;
  const std::string& what_;
};

struct Table {
  std::mutex mu;
  std::map<Op, std::pair<ScalarExprPtr, std::string>> exprs;
};
Table& table() {
  static Table t;
  return t;
}

}  // namespace

ScalarExprPtr parse_scalar_expr(std::string_view text, std::span<const std::string> inputs,
                                std::span<const std::string> attrs, const std::string& what) {
  return Parser(text, inputs, attrs, what).parse();
}

std::string scalar_expr_functions() {
  std::vector<std::string> names{"where"};
  for (const PointwiseExpr& r : pointwise_exprs())
    if (!r.float_expr.empty()) names.emplace_back(r.name);
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

void register_scalar_expr(Op op, ScalarExprPtr expr, std::string text) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (!t.exprs.emplace(op, std::make_pair(std::move(expr), std::move(text))).second)
    fail("op '{}' already has a scalar expression", op_name(op));
}

const ScalarExpr* find_scalar_expr(Op op) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.exprs.find(op);
  return it == t.exprs.end() ? nullptr : it->second.first.get();
}

const std::string* find_scalar_expr_text(Op op) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.exprs.find(op);
  return it == t.exprs.end() ? nullptr : &it->second.second;
}

}  // namespace kiln::codegen
