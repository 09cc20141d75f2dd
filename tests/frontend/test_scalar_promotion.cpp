// Numbers next to tensors follow PyTorch's result_type: the number becomes a 0-d `full`
// whose dtype, together with the zero-dim promotion rule, gives PyTorch's answer.
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "ir/printer.h"

using namespace kiln;

namespace {
// The dtype of the `full` node that `fn` creates for its number, found by tracing it.
DType traced_full_dtype(DType input, const std::function<Tensor(const Tensor&)>& fn) {
  TracedGraph g = trace(fn, zeros({2}, input));
  for (Node* n : g.graph.nodes())
    if (n->op() == Op::Full) return n->meta().dtype;
  ADD_FAILURE() << "no full node in\n" << print_graph(g.graph);
  return DType::Bool;
}
}  // namespace

TEST(ScalarPromotion, HalfPlusFloatStaysHalf) {
  Tensor h = ones({3}, DType::F16);
  Tensor r = h + 2.0;
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_EQ(r.to_doubles(), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(traced_full_dtype(DType::F16, [](const Tensor& t) { return t + 2.0; }), DType::F16);
}

TEST(ScalarPromotion, IntPlusFloatIsDefaultFloat) {
  Tensor i = arange(3);
  Tensor r = i + 2.5;
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(r.to_doubles(), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(traced_full_dtype(DType::I64, [](const Tensor& t) { return t + 2.5; }), DType::F32);
  EXPECT_EQ((2.5 * arange(3)).dtype(), DType::F32);
}

TEST(ScalarPromotion, BoolPlusIntIsI64) {
  Tensor b = arange(3) > 0;
  ASSERT_EQ(b.dtype(), DType::Bool);
  Tensor r = b + 1;
  EXPECT_EQ(r.dtype(), DType::I64);
  EXPECT_EQ(r.to_ints(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(traced_full_dtype(DType::Bool, [](const Tensor& t) { return t + 1; }), DType::I64);
}

TEST(ScalarPromotion, IntNumbersKeepTheTensorsDtype) {
  EXPECT_EQ((ones({2}, DType::I32) + 2).dtype(), DType::I32);
  EXPECT_EQ((ones({2}, DType::I32) * 2.0).dtype(), DType::F32);
  EXPECT_EQ((ones({2}, DType::F16) * 3).dtype(), DType::F16);
  EXPECT_EQ((ones({2}, DType::BF16) - 1).dtype(), DType::BF16);
  EXPECT_EQ((ones({2}, DType::F64) / 2.0).dtype(), DType::F64);
  EXPECT_EQ(traced_full_dtype(DType::I32, [](const Tensor& t) { return t + 2; }), DType::I32);
  EXPECT_EQ(traced_full_dtype(DType::F16, [](const Tensor& t) { return 3 * t; }), DType::F16);
}

TEST(ScalarPromotion, NumberOnTheLeft) {
  Tensor r = 10 - arange(3);
  EXPECT_EQ(r.dtype(), DType::I64);
  EXPECT_EQ(r.to_ints(), (std::vector<int64_t>{10, 9, 8}));
  Tensor q = 1.0 / ones({2}, DType::F16);
  EXPECT_EQ(q.dtype(), DType::F16);
}

TEST(ScalarPromotion, ComparisonsWithNumbersAreBool) {
  EXPECT_EQ((ones({2}, DType::F16) < 2.5).dtype(), DType::Bool);
  EXPECT_EQ((arange(3) == 1).to_doubles(), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ((arange(3) > 0.5).to_doubles(), (std::vector<double>{0, 1, 1}));
}

TEST(ScalarPromotion, IntDivisionIsTrueDivision) {
  Tensor r = arange(3) / 2;  // PyTorch: true division, a float result
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(r.to_doubles(), (std::vector<double>{0, 0.5, 1}));
}
