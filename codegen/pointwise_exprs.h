#pragma once
// Lookup of codegen/pointwise_exprs.def: the scalar expression of a pointwise op or helper.
#include <optional>
#include <string_view>
#include <vector>

#include "ir/op_registry.h"

namespace kiln::codegen {

struct PointwiseExpr {
  std::string_view name;        // the op's name ("add") or the helper's ("clamp_min")
  std::string_view float_expr;  // "" where the op never computes in floats
  std::string_view int_expr;    // "" where it never computes in integers
};

// Every row, in the order of codegen/pointwise_exprs.def.
const std::vector<PointwiseExpr>& pointwise_exprs();
// The row of an op or helper by name; nullptr if there is none.
const PointwiseExpr* find_pointwise_expr(std::string_view name);
// The row of a pointwise op; kiln::Error naming the op when it has none (a user op
// registered at run time without an emitter expression).
const PointwiseExpr& pointwise_expr(Op op);

}  // namespace kiln::codegen
