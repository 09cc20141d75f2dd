#pragma once
// What the C++ emitter (codegen/cpp_emitter.cpp) and the CUDA emitter (codegen/cuda_emitter.cpp)
// share: the expression printer, literals, dtype conversions, accumulator declarations and
// steps, constant tables. Both languages are C with a prelude that defines the same kiln_*
// names (codegen/prelude_math.h) and the same fixed-width typedefs (int64_t, uint16_t, ...),
// so almost all of the text is identical; what differs is one small CDialect.
//
// Value types are semantic (kernel_ir.h): f16/bf16/f32 compute in float, f64 in double,
// i32/i64 in int64_t, bool in bool; buffers store f16/bf16 as uint16_t bits and bool as uint8_t.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// What differs between the C-family languages kiln emits.
struct CDialect {
  std::string_view language;      // "C++", "CUDA C": for messages
  std::string_view int64_suffix;  // of integer literals past 32 bits: "L" (int64_t = long), "LL" (long long)
  std::string_view index_type;    // loop variables and index arithmetic: "int64_t", "int", "long long"
  // Infinity and NaN of f32 and f64 (clang's builtins; NVRTC has neither INFINITY nor them).
  std::string_view inf_f32, inf_f64, nan_f32, nan_f64;
  // Float max/min accumulators as an integer max/min over order-preserving keys plus a NaN
  // flag (the CPU: LLVM 14 vectorizes integer max/min reductions only); otherwise the plain
  // NaN-winning steps kiln_max_step / kiln_min_step.
  bool order_key_minmax = false;
  // f32 calls take their approximate forms where they have one (exp, division, sigmoid, silu:
  // ScheduleRecord::approx_f32_math).
  bool approx_f32 = false;
};

// The C++ dialect (every index int64_t) and the CUDA C one for a kernel's index width.
const CDialect& cpp_dialect();
CDialect cuda_dialect(int index_bits);

// The C type a value of dtype `t` computes in, and the type a buffer of `t` stores.
std::string_view c_value_type(DType t);
std::string_view c_storage_type(DType t);

std::string float_literal(double v, DType t, const CDialect& d);
std::string int_literal(int64_t v, const CDialect& d);
// `s` in parentheses unless it is one primary/postfix expression (a name, literal, call,
// subscript).
std::string paren(const std::string& s);
// A pointwise row's template ("{0} + {1}") with its operands, each parenthesized as needed.
std::string format_template(std::string_view tmpl, const std::vector<std::string>& args);
// `x` (a value of dtype `from`) converted to `to`'s value type: rounding to f16/bf16,
// saturating float -> int as the reference does.
std::string convert(const std::string& x, DType from, DType to);
// The value `v` of dtype `t` converted to `t`'s storage type (for a store).
std::string store_value(const std::string& v, DType t);
// The starting value of an accumulator.
std::string identity(CombineOp op, DType t, const CDialect& d);
// The initializer list of a constant table (f16/bf16 as their bits).
std::string constant_table(const Buffer& c, const CDialect& d);
// The expression as C: index arithmetic, loads (converted to the value type), casts, calls
// of codegen/pointwise_exprs.def, selects.
std::string c_expr(const ExprPtr& e, const CDialect& d);

// The statement emitter both languages extend: it prints blocks, lets, stores, accumulator
// declarations and steps, and leaves loops and the GPU statements to the language.
class CEmitter {
 public:
  explicit CEmitter(const CDialect& d) : d_(d) {}
  virtual ~CEmitter() = default;
  std::string out;

  void line(int indent, const std::string& s);
  std::string expr(const ExprPtr& e) const { return c_expr(e, d_); }
  void stmt(const StmtPtr& s, int ind);
  void body(const StmtPtr& loop, int ind) {
    for (auto& b : loop->body) stmt(b, ind);
  }

 protected:
  virtual void loop(const StmtPtr& s, int ind) = 0;
  virtual void store(const StmtPtr& s, int ind) { line(ind, store_text(*s)); }
  std::string store_text(const Stmt& s) const;  // `b[i] = v;`, the value converted to storage
  virtual void atomic_add(const StmtPtr& s, int ind) = 0;
  virtual void combine_across(const StmtPtr& s, int ind) = 0;
  virtual void barrier(const StmtPtr& s, int ind) = 0;

  // After a loop that order-key accumulators (order_key_minmax) ran in: their floats back
  // from the keys, NaN if one was seen.
  void finish_order_keys(const StmtPtr& loop, int ind);

  const CDialect d_;  // a copy: string_views of literals, cheap
  std::map<std::string, DType> acc_types_;  // accumulators declared so far, by name
  // Lets whose value was rounded to bf16 (a cast): stored by their top 16 bits, where a store
  // would round again (a cvt on the GPU, six integer instructions on the CPU).
  std::set<std::string> bf16_exact_lets_;
};

}  // namespace kiln::codegen
