// PyTorch's type promotion: torch.promote_types over every pair of dtypes, and result_type's
// rule that dimensioned tensors outrank zero-dim ones unless those are of a higher kind.
#include <gtest/gtest.h>

#include "ir/dtype.h"
#include "ir/meta/meta.h"

namespace kiln {
namespace {

constexpr DType B = DType::Bool, I32 = DType::I32, I64 = DType::I64, F16 = DType::F16, BF16 = DType::BF16,
                F32 = DType::F32, F64 = DType::F64;

TEST(TypePromotion, PromoteTypesTable) {
  // torch.promote_types(row, column), rows and columns in the order of `all`.
  const DType all[] = {B, I32, I64, F16, BF16, F32, F64};
  const DType table[7][7] = {
      /* bool */ {B, I32, I64, F16, BF16, F32, F64},
      /* i32  */ {I32, I32, I64, F16, BF16, F32, F64},
      /* i64  */ {I64, I64, I64, F16, BF16, F32, F64},
      /* f16  */ {F16, F16, F16, F16, F32, F32, F64},
      /* bf16 */ {BF16, BF16, BF16, F32, BF16, F32, F64},
      /* f32  */ {F32, F32, F32, F32, F32, F32, F64},
      /* f64  */ {F64, F64, F64, F64, F64, F64, F64},
  };
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 7; ++c)
      EXPECT_EQ(promote_types(all[r], all[c]), table[r][c]) << dtype_name(all[r]) << " + " << dtype_name(all[c]);
}

// result_type of (dtype, rank) operands.
DType result(std::initializer_list<std::pair<DType, int>> ops) {
  std::vector<TensorMeta> metas;
  for (auto [dt, rank] : ops) metas.emplace_back(dt, Shape(static_cast<size_t>(rank), 2));
  return meta::result_type(metas);
}

TEST(TypePromotion, ResultTypeZeroDimRule) {
  EXPECT_EQ(result({{F16, 1}, {BF16, 1}}), F32);
  EXPECT_EQ(result({{I32, 1}, {F16, 1}}), F16);
  EXPECT_EQ(result({{B, 1}, {I32, 1}}), I32);
  EXPECT_EQ(result({{F32, 2}, {F64, 0}}), F32);   // zero-dim f64 does not widen a dimensioned f32
  EXPECT_EQ(result({{I64, 1}, {F32, 0}}), F32);   // ...but a zero-dim float lifts an int tensor
  EXPECT_EQ(result({{I32, 1}, {I64, 0}}), I32);   // same kind: the dimensioned type wins
  EXPECT_EQ(result({{B, 1}, {I64, 0}}), I64);     // int outranks bool
  EXPECT_EQ(result({{I32, 1}, {B, 0}}), I32);
  EXPECT_EQ(result({{F16, 1}, {F64, 0}}), F16);
  EXPECT_EQ(result({{BF16, 1}, {F16, 0}}), BF16);
  EXPECT_EQ(result({{F16, 0}, {I64, 0}}), F16);   // all zero-dim: plain promotion
  EXPECT_EQ(result({{F16, 0}, {BF16, 0}}), F32);
  EXPECT_EQ(result({{I32, 0}, {I64, 0}}), I64);
  EXPECT_EQ(result({{I32, 1}, {F64, 0}, {I64, 3}}), F64);  // dimensioned i64, zero-dim f64 of a higher kind
  EXPECT_EQ(result({{I32, 1}, {F16, 0}, {F32, 0}}), F32);  // zero-dim operands promote among themselves first
  EXPECT_EQ(result({{F32, 1}}), F32);
  EXPECT_EQ(result({{B, 0}}), B);
}

}  // namespace
}  // namespace kiln
