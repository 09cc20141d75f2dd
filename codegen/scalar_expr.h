#pragma once
// Scalar expressions of custom pointwise ops (frontend/custom_op.h): the formula a user gives
// for one element, e.g. "x * sigmoid(beta * x)", parsed once at registration and lowered like
// a built-in op's row of codegen/pointwise_exprs.def, so the op fuses with its neighbours in
// every emitter (C++ and CUDA) and a kernel never calls out for it.
//
// The language: numbers (1, 0.5, 1e-3); the op's tensor inputs and numeric attributes by
// their schema names; + - * / and unary -; comparisons < <= > >= == != (giving booleans);
// parentheses; and calls of the pointwise functions: every op or helper of
// codegen/pointwise_exprs.def with a floating-point form (exp, tanh, sigmoid, maximum,
// pow, erf, gelu, ...) plus where(condition, a, b). Everything computes in the result's
// computation type (f32 for f16/bf16/f32, f64 for f64), as built-in pointwise ops do.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op_registry.h"

namespace kiln::codegen {

struct ScalarExpr;
using ScalarExprPtr = std::shared_ptr<const ScalarExpr>;

struct ScalarExpr {
  enum class Kind { Number, Input, Attr, Call, Where };
  Kind kind = Kind::Number;
  double number = 0;          // Number
  int input = 0;              // Input: the tensor input's position
  std::string name;           // Attr: the attribute; Call: the function (a pointwise_exprs row)
  bool predicate = false;     // Call: gives a boolean (comparisons, logical ops)
  std::vector<ScalarExprPtr> args;
};

// Parses `text` over the op's tensor inputs and numeric attributes (by name). kiln::Error,
// prefixed with `what`, naming the problem and its column: a syntax error, an unknown name, an
// unknown function (with the list of known ones) or a call with the wrong number of arguments.
ScalarExprPtr parse_scalar_expr(std::string_view text, std::span<const std::string> inputs,
                                std::span<const std::string> attrs, const std::string& what);

// The functions an expression may call, comma-separated (for messages and docs).
std::string scalar_expr_functions();

// The expression an op computes, registered with the op (frontend/custom_op.cpp) and read
// by the lowering (codegen/lower_values.cpp). kiln::Error if the op has one already.
void register_scalar_expr(Op op, ScalarExprPtr expr, std::string text);
const ScalarExpr* find_scalar_expr(Op op);       // nullptr: none
const std::string* find_scalar_expr_text(Op op);  // as the user wrote it

}  // namespace kiln::codegen
