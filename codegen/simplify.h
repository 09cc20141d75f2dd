#pragma once
// The index simplifier: rewrites i64 index arithmetic into a short canonical form so that
// the emitted index code reads like hand-written code (p*1023 + i rather than
// (p / 33 % 7)*33759 + p % 33*1023 + i).
//
// Index expressions are put in linear form (a constant plus coefficient*atom terms, atoms
// being vars and the non-linear pieces). On that form it folds constants and drops x*1, x+0
// and x*0; divides out terms a floordiv/mod divisor divides, so (a*c)/c = a; decides a
// floordiv or mod from the ranges of what remains (loop vars know their extents); flattens
// nested floordiv/mod; and merges the pieces an unravel left behind back into one var:
//   (x / a)*a + x % a = x   and   (x / a % b)*a + x % a = x % (a*b).
// Value expressions are walked for the indices inside them (loads) and casts of constants
// fold. All index values are assumed non-negative, as the lowering guarantees.
#include <optional>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

ExprPtr simplify(const ExprPtr& e);
StmtPtr simplify(const StmtPtr& s);

// The range an i64 expression is known to lie in, if the simplifier can bound it.
struct IndexRange {
  int64_t lo = 0, hi = 0;
};
std::optional<IndexRange> index_range(const ExprPtr& e);

}  // namespace kiln::codegen
