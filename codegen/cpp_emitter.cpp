#include "codegen/cpp_emitter.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "codegen/pointwise_exprs.h"
#include "ir/error.h"
#include "ir/half.h"

namespace kiln::codegen {

std::string_view cpp_value_type(DType t) {
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

std::string_view cpp_storage_type(DType t) {
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

namespace {

bool float_repr(DType t) { return is_floating(t); }

std::string float_literal(double v, DType t) {
  bool f64 = t == DType::F64;
  if (std::isnan(v)) return f64 ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")";
  if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + (f64 ? "__builtin_inf()" : "__builtin_inff()");
  std::string s = f64 ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  if (!f64) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807L - 1)";
  std::string s = std::to_string(v) + (v > INT32_MAX || v < INT32_MIN ? "L" : "");
  return v < 0 ? "(" + s + ")" : s;
}

// Whether `s` is one primary/postfix expression (a name, literal, call or subscript), which
// needs no parentheses as an operand.
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
std::string paren(const std::string& s) { return atomic(s) ? s : "(" + s + ")"; }

std::string expr(const ExprPtr& e);

std::string infix(const ExprPtr& e, const char* op) { return paren(expr(e->args[0])) + " " + op + " " + paren(expr(e->args[1])); }

// `e` converted from its dtype's value type to `to`'s (rounding to f16/bf16, saturating
// float -> int as the reference does).
std::string convert(const std::string& x, DType from, DType to) {
  switch (to) {
    case DType::Bool: return from == DType::Bool ? x : paren(x) + " != 0";
    case DType::I32:
      if (float_repr(from)) return "kiln_f2i32(" + x + ")";
      return "(int64_t)(int32_t)" + paren(x);
    case DType::I64:
      if (float_repr(from)) return "kiln_f2i64(" + x + ")";
      return from == DType::I32 ? x : "(int64_t)" + paren(x);
    case DType::F16: return "kiln_round_f16((float)" + paren(x) + ")";
    case DType::BF16: return "kiln_round_bf16((float)" + paren(x) + ")";
    case DType::F32: return from == DType::F16 || from == DType::BF16 ? x : "(float)" + paren(x);
    case DType::F64: return "(double)" + paren(x);
  }
  return x;
}

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

std::string expr(const ExprPtr& e) {
  switch (e->kind) {
    case ExprKind::Var: return e->name;
    case ExprKind::IntImm: return e->dtype == DType::Bool ? (e->i ? "true" : "false") : int_literal(e->i);
    case ExprKind::FloatImm: return float_literal(e->f, e->dtype);
    case ExprKind::Add: return expr(e->args[0]) + " + " + paren(expr(e->args[1]));
    case ExprKind::Sub: return expr(e->args[0]) + " - " + paren(expr(e->args[1]));
    case ExprKind::Mul: return infix(e, "*");
    case ExprKind::FloorDiv: return infix(e, "/");  // index values are never negative
    case ExprKind::Mod: return infix(e, "%");
    case ExprKind::Min: return "kiln_imin(" + expr(e->args[0]) + ", " + expr(e->args[1]) + ")";
    case ExprKind::Max: return "kiln_imax(" + expr(e->args[0]) + ", " + expr(e->args[1]) + ")";
    case ExprKind::Load: {
      std::string a = e->name + "[" + expr(e->args[0]) + "]";
      switch (e->dtype) {
        case DType::F16: return "kiln_h2f(" + a + ")";
        case DType::BF16: return "kiln_bf2f(" + a + ")";
        case DType::Bool: return a + " != 0";
        case DType::I32: return "(int64_t)" + a;
        default: return a;
      }
    }
    case ExprKind::Cast: return convert(expr(e->args[0]), e->args[0]->dtype, e->dtype);
    case ExprKind::Call: {
      const PointwiseExpr* pw = find_pointwise_expr(e->name);
      KILN_INTERNAL_ASSERT(pw, "every call names a row of codegen/pointwise_exprs.def");
      bool fl = !e->args.empty() && float_repr(e->args[0]->dtype);
      std::string_view t = fl ? pw->float_expr : pw->int_expr;
      if (t.empty()) fail("the C++ emitter has no {} form of '{}'", fl ? "floating-point" : "integer", e->name);
      std::vector<std::string> args;
      for (auto& a : e->args) args.push_back(expr(a));
      return format_template(t, args);
    }
    case ExprKind::Select:
      return paren(expr(e->args[0])) + " ? " + paren(expr(e->args[1])) + " : " + paren(expr(e->args[2]));
  }
  return "?";
}

std::string identity(CombineOp op, DType t) {
  bool fl = float_repr(t);
  switch (op) {
    case CombineOp::Sum: return fl ? float_literal(0, t) : "0";
    case CombineOp::Prod: return fl ? float_literal(1, t) : "1";
    case CombineOp::Max:
    case CombineOp::Argmax: return fl ? float_literal(-INFINITY, t) : int_literal(INT64_MIN);
    case CombineOp::Min: return fl ? float_literal(INFINITY, t) : int_literal(INT64_MAX);
  }
  return "0";
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

// Element-iterations below which a loop stays on the calling thread (a pool handoff costs
// a few microseconds; 32K simple elements take about as long).
constexpr int64_t kParallelWork = 32768;

// Element-iterations inside one iteration of a loop's body (for the parallel grain).
int64_t work_of(const StmtPtr& s) {
  int64_t w = 0;
  for (auto& b : s->body) w += b->kind == StmtKind::For ? b->extent * std::max<int64_t>(work_of(b), 1) : work_of(b);
  return std::max<int64_t>(w, 1);
}

bool only_sums(const StmtPtr& loop) {
  bool any = false, ok = true;
  visit(loop, [&](const Stmt& s) {
    if (s.kind != StmtKind::Accumulate) return;
    any = true;
    ok = ok && (s.combine == CombineOp::Sum || s.combine == CombineOp::Prod) && float_repr(s.dtype);
  });
  return any && ok;
}

// A float max/min accumulator: an integer max/min over order-preserving keys of the floats
// plus a NaN flag (see Accumulate).
std::string_view key_type(DType t) { return t == DType::F64 ? "int64_t" : "int32_t"; }
bool nan_flagged(const Stmt& s) {
  return (s.combine == CombineOp::Max || s.combine == CombineOp::Min) && float_repr(s.dtype);
}

class Emitter {
 public:
  std::string out;
  std::map<std::string, DType> dtypes_;  // accumulator types, by name

  void line(int indent, const std::string& s) { out += std::string(static_cast<size_t>(indent) * 2, ' ') + s + "\n"; }

  void stmt(const StmtPtr& s, int ind, bool in_parallel) {
    switch (s->kind) {
      case StmtKind::Block:
        for (auto& b : s->body) stmt(b, ind, in_parallel);
        return;
      case StmtKind::Let:
        line(ind, fmt::format("const {} {} = {};", cpp_value_type(s->dtype), s->name, expr(s->exprs[0])));
        return;
      case StmtKind::Store: {
        DType t = s->exprs[1]->dtype;
        line(ind, fmt::format("{}[{}] = {};", s->name, expr(s->exprs[0]), store_value(expr(s->exprs[1]), t)));
        return;
      }
      case StmtKind::DeclAcc:
        dtypes_[s->name] = s->dtype;
        line(ind, fmt::format("{} {} = {};", cpp_value_type(s->dtype), s->name, identity(s->combine, s->dtype)));
        if (s->combine == CombineOp::Argmax) line(ind, fmt::format("int64_t {}_idx = 0;", s->name));
        if (nan_flagged(*s)) {
          line(ind, fmt::format("bool {}_nan = false;", s->name));
          line(ind, fmt::format("{0} {1}_key = kiln_order_key({1});", key_type(s->dtype), s->name));
        }
        return;
      case StmtKind::Accumulate: {
        std::string v = expr(s->exprs[0]);
        switch (s->combine) {
          case CombineOp::Sum: line(ind, fmt::format("{} += {};", s->name, v)); return;
          case CombineOp::Prod:
            line(ind, float_repr(s->dtype) ? fmt::format("{} *= {};", s->name, v)
                                           : fmt::format("{0} = kiln_wrap_mul({0}, {1});", s->name, v));
            return;
          case CombineOp::Max:
          case CombineOp::Min: {
            const char* cmp = s->combine == CombineOp::Max ? ">" : "<";
            if (!float_repr(s->dtype)) {
              line(ind, fmt::format("{0} = {1} {2} {0} ? {1} : {0};", s->name, paren(v), cmp));
              return;
            }
            // LLVM 14 vectorizes no float max/min reduction without no-NaNs, but does vectorize
            // integer ones: compare the floats' order-preserving integer keys, with a separate
            // NaN flag that wins after the loop. (Unlike the reference, +0 counts above -0.)
            line(ind, "{");
            line(ind + 1, fmt::format("const {} v_ = {};", cpp_value_type(s->dtype), v));
            line(ind + 1, fmt::format("const {} k_ = kiln_order_key(v_);", key_type(s->dtype)));
            line(ind + 1, fmt::format("{0}_key = k_ {1} {0}_key ? k_ : {0}_key;", s->name, cmp));
            line(ind + 1, fmt::format("{}_nan |= v_ != v_;", s->name));
            line(ind, "}");
            return;
          }
          case CombineOp::Argmax: {
            line(ind, "{");
            line(ind + 1, fmt::format("const {} v_ = {};", cpp_value_type(s->dtype), v));
            std::string wins = float_repr(s->dtype) ? fmt::format("kiln_argmax_wins(v_, {})", s->name) : "v_ > " + s->name;
            line(ind + 1, fmt::format("if ({}) {{ {} = v_; {}_idx = {}; }}", wins, s->name, s->name, expr(s->exprs[1])));
            line(ind, "}");
            return;
          }
        }
        return;
      }
      case StmtKind::For: {
        if (!s->comment.empty()) line(ind, "// " + s->comment);
        // A loop run in chunks on the pool: each chunk is one plain loop over [begin, end).
        auto chunked = [&](int64_t grain) {
          line(ind, fmt::format("kiln_parallel({}, {}, [&](int64_t {}_begin, int64_t {}_end) {{", s->extent, grain, s->name, s->name));
          line(ind + 1, fmt::format("for (int64_t {0} = {0}_begin; {0} < {0}_end; ++{0}) {{", s->name));
          for (auto& b : s->body) stmt(b, ind + 2, true);
          line(ind + 1, "}");
          line(ind, "});");
        };
        if (s->loop == LoopKind::Parallel && !in_parallel) return chunked(std::max<int64_t>(1, kParallelWork / work_of(s)));
        // A vectorized loop outside any parallel loop (a flat pointwise kernel) has independent
        // iterations: it runs in contiguous chunks on the pool, each chunk one simple loop
        // that clang vectorizes. Small loops stay inline (kiln_parallel's grain).
        if (s->loop == LoopKind::Vectorized && !in_parallel && s->extent * work_of(s) > kParallelWork)
          return chunked(std::max<int64_t>(1024, kParallelWork / work_of(s)));
        bool reassoc = s->loop != LoopKind::Parallel && only_sums(s);
        int body_ind = ind;
        if (reassoc) {
          line(ind, "{");
          line(ind + 1, "#pragma clang fp reassociate(on)");
          body_ind = ind + 1;
        }
        line(body_ind, fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) {{", s->name, s->extent));
        for (auto& b : s->body) stmt(b, body_ind + 1, in_parallel);
        line(body_ind, "}");
        if (reassoc) line(ind, "}");
        std::set<std::string> flagged;
        visit(s, [&](const Stmt& a) {
          if (a.kind == StmtKind::Accumulate && nan_flagged(a)) flagged.insert(a.name);
        });
        for (const std::string& a : flagged)
          line(ind, fmt::format("{0} = {0}_nan ? {1} : kiln_from_order_key({0}_key);", a, float_literal(NAN, dtypes_[a])));
        return;
      }
    }
  }
};

std::string constant_table(const Buffer& c) {
  std::string vals;
  for (size_t i = 0; i < c.data.size(); ++i) {
    double v = c.data[i];
    std::string s;
    switch (c.dtype) {
      case DType::F16: s = fmt::format("0x{:04x}", float_to_half_bits(static_cast<float>(v))); break;
      case DType::BF16: s = fmt::format("0x{:04x}", float_to_bf16_bits(static_cast<float>(v))); break;
      case DType::F32:
      case DType::F64: s = float_literal(v, c.dtype); break;
      case DType::Bool: s = v != 0 ? "1" : "0"; break;
      default: s = int_literal(static_cast<int64_t>(v)); break;
    }
    vals += (i ? ", " : "") + s;
  }
  return vals;
}

}  // namespace

std::string emit_cpp_kernel(const Kernel& k) {
  Emitter em;
  if (!k.comment.empty()) em.line(0, "// " + k.comment);
  em.line(0, fmt::format("extern \"C\" void {}(void* const* buffers, const int64_t* scalars) {{", k.name));
  em.line(1, "(void)scalars;");
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    bool in = b.role == BufferRole::Input;
    em.line(1, fmt::format("{}{}* __restrict {} = ({}{}*)buffers[{}];  // {} {}", in ? "const " : "", cpp_storage_type(b.dtype), b.name,
                           in ? "const " : "", cpp_storage_type(b.dtype), i, buffer_role_name(b.role), b.what));
  }
  for (const Buffer& c : k.constants)
    em.line(1, fmt::format("static const {} {}[{}] = {{{}}};  // {}", cpp_storage_type(c.dtype), c.name,
                           std::max<size_t>(c.data.size(), 1), c.data.empty() ? "0" : constant_table(c), c.what));
  em.stmt(k.body, 1, false);
  em.line(0, "}");
  return em.out;
}

std::string emit_cpp_module(const std::vector<Kernel>& kernels) {
  std::string out(cpp_prelude());
  for (const Kernel& k : kernels) out += "\n" + emit_cpp_kernel(k);
  return out;
}

}  // namespace kiln::codegen
