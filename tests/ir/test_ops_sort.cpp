// sort and topk (ir/ops.def): shape rules and their errors, the reference kernels against
// hand-sorted rows (ties in index order, NaN above every number, either direction, any dim), and
// the round trip. Compiled: tests/backend/test_backend_sort.cpp; gradients:
// tests/autograd/test_rules_linalg.cpp; PyTorch's values: tools/torch_check/cases/sort_topk.kir.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/meta/meta.h"
#include "ir/reference/reference.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::I;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::vals;

HostTensor f32(const Shape& s, std::vector<double> v) { return make(DType::F32, s, std::move(v)); }

std::vector<HostTensor> run(Op op, const HostTensor& x, const Attrs& a) { return run_reference(op, std::vector<HostTensor>{x}, a); }

TEST(OpsSort, ShapeRules) {
  std::vector<TensorMeta> s = meta::meta_sort(std::vector<TensorMeta>{F({3, 5})}, Attrs{{"dim", int64_t{-1}}});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], F({3, 5}));
  EXPECT_EQ(s[1], I({3, 5}));
  std::vector<TensorMeta> t = meta::meta_topk(std::vector<TensorMeta>{TensorMeta(DType::BF16, {3, 5, 2})}, Attrs{{"k", int64_t{2}}, {"dim", int64_t{1}}});
  EXPECT_EQ(t[0], TensorMeta(DType::BF16, {3, 2, 2}));
  EXPECT_EQ(t[1], I({3, 2, 2}));
  EXPECT_EQ(testing::meta(Op::Topk, {F({})}, {{"k", int64_t{1}}}), F({}));
  EXPECT_TRUE(meta_fails(Op::Topk, {F({3, 5})}, {{"k", int64_t{6}}}, "k 6 is out of range for dim 1 of size 5"));
  EXPECT_TRUE(meta_fails(Op::Topk, {F({3, 5})}, {{"k", int64_t{-1}}}, "k -1 is out of range"));
  EXPECT_TRUE(meta_fails(Op::Sort, {F({3, 5})}, {{"dim", int64_t{2}}}, "dim"));
}

TEST(OpsSort, ReferenceOrdersByValueThenIndex) {
  const double nan = std::nan("");
  HostTensor x = f32({2, 5}, {3, 1, 3, nan, -1, 2, 2, -INFINITY, 2, 0});
  std::vector<HostTensor> up = run(Op::Sort, x, {});
  std::vector<double> v = vals(up[0]);
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 4), (std::vector<double>{-1, 1, 3, 3}));
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(std::vector<double>(v.begin() + 5, v.end()), (std::vector<double>{-INFINITY, 0, 2, 2, 2}));
  EXPECT_EQ(vals(up[1]), (std::vector<double>{4, 1, 0, 2, 3, 2, 4, 0, 1, 3}));
  // Descending: NaN first, equal values still in index order.
  std::vector<HostTensor> down = run(Op::Sort, x, {{"descending", true}});
  EXPECT_EQ(vals(down[1]), (std::vector<double>{3, 0, 2, 1, 4, 0, 1, 3, 4, 2}));
  // topk: the first k of the descending (largest) or ascending order.
  std::vector<HostTensor> top = run(Op::Topk, x, {{"k", int64_t{2}}});
  EXPECT_EQ(vals(top[1]), (std::vector<double>{3, 0, 0, 1}));
  std::vector<HostTensor> low = run(Op::Topk, x, {{"k", int64_t{3}}, {"largest", false}});
  EXPECT_EQ(vals(low[0]), (std::vector<double>{-1, 1, 3, -INFINITY, 0, 2}));
  EXPECT_EQ(vals(low[1]), (std::vector<double>{4, 1, 0, 2, 4, 0}));
  // Along dim 0 (strided rows), on integers with ties.
  HostTensor n = make(DType::I64, {3, 2}, {5, 1, 5, 0, 2, 1});
  std::vector<HostTensor> cols = run(Op::Sort, n, {{"dim", int64_t{0}}, {"descending", true}});
  EXPECT_EQ(vals(cols[0]), (std::vector<double>{5, 1, 5, 1, 2, 0}));
  EXPECT_EQ(vals(cols[1]), (std::vector<double>{0, 0, 1, 2, 2, 1}));
  // Empty rows and a 0-d tensor.
  EXPECT_EQ(run(Op::Sort, f32({0, 3}, {}), {})[0].numel(), 0);
  std::vector<HostTensor> scalar = run(Op::Sort, f32({}, {7}), {});
  EXPECT_EQ(vals(scalar[0]), (std::vector<double>{7}));
  EXPECT_EQ(vals(scalar[1]), (std::vector<double>{0}));
}

TEST(OpsSort, RoundTrip) {
  EXPECT_EQ(one_node_round_trip(Op::Sort, {F({4, 5})}, {{"descending", true}}),
            "%y, %y_1 = sort(%x0, descending=true) : f32[4,5], i64[4,5]");
  EXPECT_EQ(one_node_round_trip(Op::Topk, {F({4, 5})}, {{"k", int64_t{3}}, {"dim", int64_t{0}}}),
            "%y, %y_1 = topk(%x0, k=3, dim=0) : f32[3,5], i64[3,5]");
}

}  // namespace
}  // namespace kiln
