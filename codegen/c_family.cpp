#include "codegen/c_family.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <optional>
#include <set>

#include "codegen/pointwise_exprs.h"
#include "ir/error.h"
#include "ir/half.h"

namespace kiln::codegen {

const CDialect& cpp_dialect() {
  static const CDialect d{.language = "C++",
                          .int64_suffix = "L",
                          .index_type = "int64_t",
                          .inf_f32 = "__builtin_inff()",
                          .inf_f64 = "__builtin_inf()",
                          .nan_f32 = "__builtin_nanf(\"\")",
                          .nan_f64 = "__builtin_nan(\"\")",
                          .order_key_minmax = true};
  return d;
}

CDialect cuda_dialect(int index_bits) {
  // KILN_INFF etc. are the CUDA prelude's bit-pattern constants (codegen/cuda_prelude.cpp).
  return CDialect{.language = "CUDA C",
                  .int64_suffix = "LL",
                  .index_type = index_bits == 32 ? "int" : "long long",
                  .inf_f32 = "KILN_INFF",
                  .inf_f64 = "KILN_INF",
                  .nan_f32 = "KILN_NANF",
                  .nan_f64 = "KILN_NAN",
                  .order_key_minmax = false};
}

std::string_view c_value_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I32:
    case DType::I64: return "int64_t";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

std::string_view c_storage_type(DType t) {
  switch (t) {
    case DType::Bool: return "uint8_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::F16:
    case DType::BF16: return "uint16_t";
    case DType::F32: return "float";
    case DType::F64: return "double";
  }
  return "?";
}

std::string float_literal(double v, DType t, const CDialect& d) {
  bool f64 = t == DType::F64;
  if (std::isnan(v)) return std::string(f64 ? d.nan_f64 : d.nan_f32);
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + std::string(f64 ? d.inf_f64 : d.inf_f32);
  std::string s = f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  if (!f64) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

std::string int_literal(int64_t v, const CDialect& d) {
  if (v == INT64_MIN) return fmt::format("(-9223372036854775807{} - 1)", d.int64_suffix);
  std::string s = std::to_string(v) + std::string(v > INT32_MAX || v < INT32_MIN ? d.int64_suffix : "");
  return v < 0 ? "(" + s + ")" : s;
}

namespace {

// Whether `s` is one primary/postfix expression, which needs no parentheses as an operand.
bool atomic(const std::string& s) {
  if (s.empty() || s[0] == '-' || s[0] == '!' || s[0] == '(') return false;
  int depth = 0;
  for (char c : s) {
    if (c == '(' || c == '[') ++depth;
    else if (c == ')' || c == ']') --depth;
    else if (depth == 0 && !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '"')) return false;
  }
  return true;
}

}  // namespace

std::string paren(const std::string& s) { return atomic(s) ? s : "(" + s + ")"; }

std::string format_template(std::string_view tmpl, const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{' && i + 2 < tmpl.size() && tmpl[i + 2] == '}' && std::isdigit(static_cast<unsigned char>(tmpl[i + 1]))) {
      size_t k = static_cast<size_t>(tmpl[i + 1] - '0');
      KILN_INTERNAL_ASSERT(k < args.size(), "a pointwise expression names an operand the call has");
      out += paren(args[k]);
      i += 2;
    } else {
      out += tmpl[i];
    }
  }
  return out;
}

std::string convert(const std::string& x, DType from, DType to) {
  bool fl = is_floating(from);
  switch (to) {
    case DType::Bool: return from == DType::Bool ? x : paren(x) + " != 0";
    case DType::I32:
      if (fl) return "kiln_f2i32(" + x + ")";
      return "(int64_t)(int32_t)" + paren(x);
    case DType::I64:
      if (fl) return "kiln_f2i64(" + x + ")";
      return from == DType::I32 ? x : "(int64_t)" + paren(x);
    case DType::F16: return "kiln_round_f16((float)" + paren(x) + ")";
    case DType::BF16: return "kiln_round_bf16((float)" + paren(x) + ")";
    case DType::F32: return from == DType::F16 || from == DType::BF16 ? x : "(float)" + paren(x);
    case DType::F64: return "(double)" + paren(x);
  }
  return x;
}

std::string store_value(const std::string& v, DType t) {
  switch (t) {
    case DType::F16: return "kiln_f2h(" + v + ")";
    case DType::BF16: return "kiln_f2bf(" + v + ")";
    case DType::Bool: return "(uint8_t)" + paren(v);
    case DType::I32: return "(int32_t)" + paren(v);
    default: return v;
  }
}

std::string identity(CombineOp op, DType t, const CDialect& d) {
  bool fl = is_floating(t);
  switch (op) {
    case CombineOp::Sum: return fl ? float_literal(0, t, d) : "0";
    case CombineOp::Prod: return fl ? float_literal(1, t, d) : "1";
    case CombineOp::Max:
    case CombineOp::Argmax: return fl ? float_literal(-INFINITY, t, d) : int_literal(INT64_MIN, d);
    case CombineOp::Min: return fl ? float_literal(INFINITY, t, d) : int_literal(INT64_MAX, d);
    case CombineOp::SumExp:
    case CombineOp::Welford: return float_literal(0, t, d);
  }
  return "0";
}

std::string constant_table(const Buffer& c, const CDialect& d) {
  std::string vals;
  for (size_t i = 0; i < c.data.size(); ++i) {
    double v = c.data[i];
    std::string s;
    switch (c.dtype) {
      case DType::F16: s = fmt::format("0x{:04x}", float_to_half_bits(static_cast<float>(v))); break;
      case DType::BF16: s = fmt::format("0x{:04x}", float_to_bf16_bits(static_cast<float>(v))); break;
      case DType::F32:
      case DType::F64: s = float_literal(v, c.dtype, d); break;
      case DType::Bool: s = v != 0 ? "1" : "0"; break;
      default: s = int_literal(static_cast<int64_t>(v), d); break;
    }
    vals += (i ? ", " : "") + s;
  }
  return vals;
}

namespace {
// The approximate f32 forms of the calls that have one (the CUDA prelude's kiln_exp_approx and
// kiln_div_approx, kiln_rcp_approx).
std::optional<std::string_view> approx_f32_expr(std::string_view name) {
  if (name == "exp") return "kiln_exp_approx({0})";
  if (name == "div") return "kiln_div_approx({0}, {1})";
  if (name == "sigmoid") return "kiln_rcp_approx(1.0f + kiln_exp_approx(-{0}))";
  if (name == "silu") return "{0} * kiln_rcp_approx(1.0f + kiln_exp_approx(-{0}))";
  return std::nullopt;
}
}  // namespace

std::string c_expr(const ExprPtr& e, const CDialect& d) {
  auto x = [&](size_t i) { return c_expr(e->args[i], d); };
  auto infix = [&](const char* op) { return paren(x(0)) + " " + op + " " + paren(x(1)); };
  switch (e->kind) {
    case ExprKind::Var: return e->name;
    case ExprKind::IntImm: return e->dtype == DType::Bool ? (e->i ? "true" : "false") : int_literal(e->i, d);
    case ExprKind::FloatImm: return float_literal(e->f, e->dtype, d);
    case ExprKind::Add: return x(0) + " + " + paren(x(1));
    case ExprKind::Sub: return x(0) + " - " + paren(x(1));
    case ExprKind::Mul: return infix("*");
    case ExprKind::FloorDiv: return infix("/");  // index values are never negative
    case ExprKind::Mod: return infix("%");
    case ExprKind::Min: return "kiln_imin(" + x(0) + ", " + x(1) + ")";
    case ExprKind::Max: return "kiln_imax(" + x(0) + ", " + x(1) + ")";
    case ExprKind::Load: {
      std::string a = e->name + "[" + x(0) + "]";
      switch (e->dtype) {
        case DType::F16: return "kiln_h2f(" + a + ")";
        case DType::BF16: return "kiln_bf2f(" + a + ")";
        case DType::Bool: return a + " != 0";
        case DType::I32: return "(int64_t)" + a;
        default: return a;
      }
    }
    case ExprKind::Cast: return convert(x(0), e->args[0]->dtype, e->dtype);
    case ExprKind::Call: {
      const PointwiseExpr* pw = find_pointwise_expr(e->name);
      KILN_INTERNAL_ASSERT(pw, "every call names a row of codegen/pointwise_exprs.def");
      bool fl = !e->args.empty() && is_floating(e->args[0]->dtype);
      std::string_view t = fl ? pw->float_expr : pw->int_expr;
      if (d.approx_f32 && e->dtype == DType::F32 && fl && e->args[0]->dtype == DType::F32)
        if (std::optional<std::string_view> approx = approx_f32_expr(e->name)) t = *approx;
      if (t.empty()) fail("the {} emitter has no {} form of '{}'", d.language, fl ? "floating-point" : "integer", e->name);
      std::vector<std::string> args;
      for (size_t i = 0; i < e->args.size(); ++i) args.push_back(x(i));
      return format_template(t, args);
    }
    case ExprKind::Select: return paren(x(0)) + " ? " + paren(x(1)) + " : " + paren(x(2));
  }
  return "?";
}

// ---- statements

namespace {

// A float max/min accumulator kept as order keys (see CDialect::order_key_minmax).
bool keyed(const Stmt& s, const CDialect& d) {
  return d.order_key_minmax && (s.combine == CombineOp::Max || s.combine == CombineOp::Min) && is_floating(s.dtype);
}
std::string_view key_type(DType t) { return t == DType::F64 ? "int64_t" : "int32_t"; }

}  // namespace

void CEmitter::line(int indent, const std::string& s) { out += std::string(static_cast<size_t>(indent) * 2, ' ') + s + "\n"; }

std::string CEmitter::store_text(const Stmt& s) const {
  const ExprPtr& v = s.exprs[1];
  if (v->kind == ExprKind::Var && v->dtype == DType::BF16 && bf16_exact_lets_.count(v->name))
    return fmt::format("{}[{}] = kiln_bf16_bits({});", s.name, expr(s.exprs[0]), v->name);
  // A cast to bf16 stored at once rounds once, by the store's conversion.
  if (v->kind == ExprKind::Cast && v->dtype == DType::BF16 && is_floating(v->args[0]->dtype))
    return fmt::format("{}[{}] = kiln_f2bf((float){});", s.name, expr(s.exprs[0]), paren(expr(v->args[0])));
  return fmt::format("{}[{}] = {};", s.name, expr(s.exprs[0]), store_value(expr(v), v->dtype));
}

void CEmitter::stmt(const StmtPtr& s, int ind) {
  switch (s->kind) {
    case StmtKind::Block:
      for (auto& b : s->body) stmt(b, ind);
      return;
    case StmtKind::Let: {
      const ExprPtr& v = s->exprs[0];
      if (v->kind == ExprKind::Cast && v->dtype == DType::BF16 && is_floating(v->args[0]->dtype)) bf16_exact_lets_.insert(s->name);
      else bf16_exact_lets_.erase(s->name);
      line(ind, fmt::format("const {} {} = {};", c_value_type(s->dtype), s->name, expr(v)));
      return;
    }
    case StmtKind::Store: store(s, ind); return;
    case StmtKind::AtomicAdd: atomic_add(s, ind); return;
    case StmtKind::CombineAcross: combine_across(s, ind); return;
    case StmtKind::Barrier: barrier(s, ind); return;
    case StmtKind::For: loop(s, ind); return;
    case StmtKind::DeclAcc:
      acc_types_[s->name] = s->dtype;
      line(ind, fmt::format("{} {} = {};", c_value_type(s->dtype), s->name, identity(s->combine, s->dtype, d_)));
      if (s->combine == CombineOp::Argmax) line(ind, fmt::format("int64_t {}_idx = 0;", s->name));
      if (s->combine == CombineOp::SumExp)
        line(ind, fmt::format("{} {}_max = {};", c_value_type(s->dtype), s->name, float_literal(-INFINITY, s->dtype, d_)));
      if (s->combine == CombineOp::Welford)
        line(ind, fmt::format("{0} {1}_mean = {2}, {1}_n = {2};", c_value_type(s->dtype), s->name, float_literal(0, s->dtype, d_)));
      if (keyed(*s, d_)) {
        line(ind, fmt::format("bool {}_nan = false;", s->name));
        line(ind, fmt::format("{0} {1}_key = kiln_order_key({1});", key_type(s->dtype), s->name));
      }
      return;
    case StmtKind::Accumulate: {
      std::string v = expr(s->exprs[0]);
      bool fl = is_floating(s->dtype);
      switch (s->combine) {
        case CombineOp::Sum: line(ind, fmt::format("{} += {};", s->name, v)); return;
        case CombineOp::Prod:
          line(ind, fl ? fmt::format("{} *= {};", s->name, v) : fmt::format("{0} = kiln_wrap_mul({0}, {1});", s->name, v));
          return;
        case CombineOp::Max:
        case CombineOp::Min: {
          const char* cmp = s->combine == CombineOp::Max ? ">" : "<";
          if (!fl) {
            line(ind, fmt::format("{0} = {1} {2} {0} ? {1} : {0};", s->name, paren(v), cmp));
          } else if (!keyed(*s, d_)) {
            line(ind, fmt::format("{0} = kiln_{1}_step({0}, {2});", s->name, s->combine == CombineOp::Max ? "max" : "min", v));
          } else {
            // LLVM 14 vectorizes no float max/min reduction without no-NaNs, but does vectorize
            // integer ones: compare the floats' order-preserving integer keys, with a separate
            // NaN flag that wins after the loop. (Unlike the reference, +0 counts above -0.)
            line(ind, "{");
            line(ind + 1, fmt::format("const {} v_ = {};", c_value_type(s->dtype), v));
            line(ind + 1, fmt::format("const {} k_ = kiln_order_key(v_);", key_type(s->dtype)));
            line(ind + 1, fmt::format("{0}_key = k_ {1} {0}_key ? k_ : {0}_key;", s->name, cmp));
            line(ind + 1, fmt::format("{}_nan |= v_ != v_;", s->name));
            line(ind, "}");
          }
          return;
        }
        case CombineOp::SumExp:
          KILN_INTERNAL_ASSERT(fl, "online softmax statistics are of floats");
          line(ind, fmt::format("kiln_sumexp_step({0}, {0}_max, {1});", s->name, v));
          return;
        case CombineOp::Welford:
          KILN_INTERNAL_ASSERT(fl, "Welford statistics are of floats");
          line(ind, fmt::format("kiln_welford_step({0}, {0}_mean, {0}_n, {1});", s->name, v));
          return;
        case CombineOp::Argmax: {
          line(ind, "{");
          line(ind + 1, fmt::format("const {} v_ = {};", c_value_type(s->dtype), v));
          std::string wins = fl ? fmt::format("kiln_argmax_wins(v_, {})", s->name) : "v_ > " + s->name;
          line(ind + 1, fmt::format("if ({}) {{ {} = v_; {}_idx = {}; }}", wins, s->name, s->name, expr(s->exprs[1])));
          line(ind, "}");
          return;
        }
      }
      return;
    }
  }
}

void CEmitter::finish_order_keys(const StmtPtr& loop, int ind) {
  // Only accumulators declared outside the loop: one declared inside is out of scope here
  // and was finished after its own reduction loop.
  std::set<std::string> flagged, inner;
  visit(loop, [&](const Stmt& a) {
    if (a.kind == StmtKind::Accumulate && keyed(a, d_)) flagged.insert(a.name);
    if (a.kind == StmtKind::DeclAcc) inner.insert(a.name);
  });
  for (const std::string& a : flagged)
    if (!inner.count(a))
      line(ind, fmt::format("{0} = {0}_nan ? {1} : kiln_from_order_key({0}_key);", a, float_literal(NAN, acc_types_[a], d_)));
}

}  // namespace kiln::codegen
