#include "codegen/pointwise_exprs.h"

#include <vector>

#include "ir/error.h"

namespace kiln::codegen {

const std::vector<PointwiseExpr>& pointwise_exprs() {
  static const std::vector<PointwiseExpr> rows = [] {
    std::vector<PointwiseExpr> r;
#define KILN_PW_OP(E, f, i) r.push_back({op_name(Op::E), f, i});
#define KILN_PW_FN(n, f, i) r.push_back({n, f, i});
#include "codegen/pointwise_exprs.def"
#undef KILN_PW_OP
#undef KILN_PW_FN
    return r;
  }();
  return rows;
}

const PointwiseExpr* find_pointwise_expr(std::string_view name) {
  for (const PointwiseExpr& e : pointwise_exprs())
    if (e.name == name) return &e;
  return nullptr;
}

const PointwiseExpr& pointwise_expr(Op op) {
  const PointwiseExpr* e = find_pointwise_expr(op_name(op));
  if (!e) fail("op '{}' has no scalar expression for the code generators (codegen/pointwise_exprs.def)", op_name(op));
  return *e;
}

}  // namespace kiln::codegen
