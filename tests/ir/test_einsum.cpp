// einsum: the equation's parsing (ir/einsum.h: implicit results, ellipses, broadcasting, every
// error), the shape rule, the reference kernel against hand-computed sums of products, and the
// print/parse round trip. Compiled einsum: tests/backend/test_backend_ops.cpp; its gradients:
// tests/autograd/test_rules_linalg.cpp; PyTorch's values: tools/torch_check/cases/einsum.kir.
#include <gtest/gtest.h>

#include "ir/einsum.h"
#include "ir/error.h"
#include "ir/meta/meta.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::vals;

HostTensor f32(const Shape& s, std::vector<double> v) { return make(DType::F32, s, std::move(v)); }
HostTensor i64(const Shape& s, std::vector<double> v) { return make(DType::I64, s, std::move(v)); }
Attrs eq(const std::string& e) { return {{"equation", e}}; }
Shape shape_of(const std::string& e, std::vector<TensorMeta> ins) { return meta::meta_einsum(ins, eq(e)).at(0).shape; }

// The result's subscripts as letters ("..." dims as '.').
std::string result_of(const std::string& e, const std::vector<int64_t>& ranks) {
  EinsumSpec s = parse_einsum(e, ranks);
  std::string out;
  for (int l : s.output) out += s.names[static_cast<size_t>(l)].size() == 1 ? s.names[static_cast<size_t>(l)] : ".";
  return out;
}

TEST(Einsum, ImplicitResultsAreTheLettersSeenOnceSortedAfterTheEllipsis) {
  EXPECT_EQ(result_of("ij,jk", {2, 2}), "ik");
  EXPECT_EQ(result_of("ii", {2}), "");           // a trace
  EXPECT_EQ(result_of("ba", {2}), "ab");         // a transpose
  EXPECT_EQ(result_of("Ba,aA", {2, 2}), "AB");   // upper case first
  EXPECT_EQ(result_of("...ij,jk", {4, 2}), "..ik");
  EXPECT_EQ(result_of(" i j , j k -> k i ", {2, 2}), "ki");  // spaces
  EXPECT_EQ(result_of("ij->", {2}), "");
}

TEST(Einsum, ShapesBroadcastAndEllipsesAlignFromTheRight) {
  EXPECT_EQ(shape_of("ij,jk->ik", {F({2, 3}), F({3, 4})}), (Shape{2, 4}));
  EXPECT_EQ(shape_of("ii->i", {F({3, 3})}), (Shape{3}));
  EXPECT_EQ(shape_of("...ij,...jk->...ik", {F({5, 1, 2, 3}), F({4, 3, 6})}), (Shape{5, 4, 2, 6}));
  EXPECT_EQ(shape_of("bij,bkj->bik", {F({7, 2, 3}), F({1, 4, 3})}), (Shape{7, 2, 4}));  // b broadcast from 1
  EXPECT_EQ(shape_of("i,j,k->kji", {F({2}), F({3}), F({4})}), (Shape{4, 3, 2}));
  EXPECT_EQ(shape_of("...->...", {F({})}), (Shape{}));
  EXPECT_EQ(shape_of("ij,jk->ik", {F({0, 3}), F({3, 4})}), (Shape{0, 4}));
}

TEST(Einsum, ErrorsSayWhatIsWrong) {
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3}), F({3, 4})}, eq("ij,jk->il"), "'l' is not one of the operands'"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij->ii"), "repeats subscript 'i'"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij,jk"), "subscripts for 2 operands, 1 given"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ijk"), "operand 0 has 3 subscripts for its 2 dims"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2}), F({3})}, eq("i,i"), "subscript 'i' has size 3 in operand 1 and 2"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ii"), "repeated in operand 0 with sizes 2 and 3"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("i1"), "'1' in operand 0 is not a subscript"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij->..."), "no operand has one"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("i...j..."), "more than one ellipsis"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2}), TensorMeta(DType::F64, {2})}, eq("i,i"), "einsum"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {TensorMeta(DType::Bool, {2})}, eq("i"), "bool"));
}

TEST(Einsum, ReferenceSumsProducts) {
  HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(vals(run1(Op::Einsum, {a, b}, eq("ij,jk->ik"))), (std::vector<double>{4, 5, 10, 11}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->ji"))), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->"))), (std::vector<double>{21}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->j"))), (std::vector<double>{5, 7, 9}));
  HostTensor sq = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(vals(run1(Op::Einsum, {sq}, eq("ii"))), (std::vector<double>{15}));
  EXPECT_EQ(vals(run1(Op::Einsum, {sq}, eq("ii->i"))), (std::vector<double>{1, 5, 9}));
  // an outer product, a broadcast size-1 operand, three operands
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({2}, {1, 2}), f32({3}, {1, 10, 100})}, eq("i,j->ij"))),
            (std::vector<double>{1, 10, 100, 2, 20, 200}));
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({1}, {3}), f32({3}, {1, 2, 3})}, eq("i,i->i"))), (std::vector<double>{3, 6, 9}));
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({2}, {1, 2}), f32({2, 2}, {1, 2, 3, 4}), f32({2}, {1, 1})}, eq("i,ij,j->"))),
            (std::vector<double>{1 * (1 + 2) + 2 * (3 + 4)}));
  // integers exactly, and an empty sum
  int64_t big = int64_t{1} << 31;
  HostTensor ib = i64({2}, {0, 0});
  ib.set_int(0, big);
  ib.set_int(1, 1);
  EXPECT_EQ(run1(Op::Einsum, {ib, ib}, eq("i,i->")).get_int(0), big * big + 1);
  HostTensor empty = run1(Op::Einsum, {f32({2, 0}, {}), f32({0, 3}, {})}, eq("ij,jk->ik"));
  EXPECT_EQ(empty.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(empty), (std::vector<double>(6, 0.0)));
}

TEST(Einsum, RoundTrips) {
  EXPECT_EQ(one_node_round_trip(Op::Einsum, {F({2, 3}), F({3, 4})}, eq("ij,jk->ik")),
            "%y = einsum(%x0, %x1, equation=\"ij,jk->ik\") : f32[2,4]");
  EXPECT_EQ(one_node_round_trip(Op::Einsum, {F({4, 2, 3})}, eq("...ij->...ji")),
            "%y = einsum(%x0, equation=\"...ij->...ji\") : f32[4,3,2]");
}

}  // namespace
}  // namespace kiln
