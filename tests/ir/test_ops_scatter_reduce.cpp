// scatter_reduce and scatter_fold: the shape rule and its errors, the reference kernel against
// PyTorch 1.13's own results (torch.Tensor.scatter_reduce, written down below), NaN, integer
// wrap-around, and the print/parse round trip.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/meta/meta.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::I;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::vals;

HostTensor i64(const Shape& s, std::vector<double> v) { return make(DType::I64, s, std::move(v)); }
HostTensor f32(const Shape& s, std::vector<double> v) { return make(DType::F32, s, std::move(v)); }

Attrs reduce_attrs(const std::string& reduce, bool include_self) {
  return {{"dim", int64_t{0}}, {"reduce", reduce}, {"include_self", include_self}};
}

// self [10, 20, 30, 40], index [0, 0, 2, 2, 2], src [1, 2, 3, 4, -7]: what PyTorch 1.13 returns
// (`s.scatter_reduce(0, i, src, r, include_self=inc)`).
TEST(OpsScatterReduce, EveryReductionAsPyTorchComputesIt) {
  HostTensor self = i64({4}, {10, 20, 30, 40}), index = i64({5}, {0, 0, 2, 2, 2}), src = i64({5}, {1, 2, 3, 4, -7});
  struct Want {
    const char* reduce;
    bool include_self;
    std::vector<double> ints;
  };
  for (const Want& w : {Want{"sum", true, {13, 20, 30, 40}}, Want{"sum", false, {3, 20, 0, 40}},
                        Want{"prod", true, {20, 20, -2520, 40}}, Want{"prod", false, {2, 20, -84, 40}},
                        Want{"amax", true, {10, 20, 30, 40}}, Want{"amax", false, {2, 20, 4, 40}},
                        Want{"amin", true, {1, 20, -7, 40}}, Want{"amin", false, {1, 20, -7, 40}}}) {
    SCOPED_TRACE(fmt::format("{} include_self={}", w.reduce, w.include_self));
    EXPECT_EQ(vals(run1(Op::ScatterReduce, {self, index, src}, reduce_attrs(w.reduce, w.include_self))), w.ints);
    // The same in f32.
    HostTensor f = run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})},
                        reduce_attrs(w.reduce, w.include_self));
    EXPECT_EQ(vals(f), w.ints);
  }
  // mean of floats: 10 + 1 + 2 over 3 and 30 + 3 + 4 - 7 over 4 with self, 1.5 and 0 without; an element nothing reaches
  // keeps self's.
  EXPECT_EQ(vals(run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})}, reduce_attrs("mean", true))),
            (std::vector<double>{static_cast<float>(13.0 / 3), 20, 7.5, 40}));
  EXPECT_EQ(vals(run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})}, reduce_attrs("mean", false))),
            (std::vector<double>{1.5, 20, 0, 40}));
}

TEST(OpsScatterReduce, NanPropagatesThroughAmaxAndAmin) {
  // PyTorch: self [1, nan, 3, 4] amax 5, 2 into 1 stays nan; amin of nan and 2 into 0 without self is nan.
  std::vector<double> a = vals(run1(Op::ScatterReduce, {f32({4}, {1, NAN, 3, 4}), i64({2}, {1, 1}), f32({2}, {5, 2})},
                                    reduce_attrs("amax", true)));
  EXPECT_TRUE(std::isnan(a[1]));
  std::vector<double> b = vals(run1(Op::ScatterReduce, {f32({4}, {1, NAN, 3, 4}), i64({2}, {0, 0}), f32({2}, {NAN, 2})},
                                    reduce_attrs("amin", false)));
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[2], 3);
}

TEST(OpsScatterReduce, ScatterFoldAlongADimAndIntegerProductsWrap) {
  // dim 1 of [2, 3]: row 0's src goes to columns 2, 2; row 1's to 0, 1.
  HostTensor out = run1(Op::ScatterFold, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2, 2}, {2, 2, 0, 1}), f32({2, 2}, {10, 0.5, -1, 7})},
                        {{"dim", int64_t{1}}, {"reduce", std::string("prod")}});
  EXPECT_EQ(vals(out), (std::vector<double>{1, 2, 15, -4, 35, 6}));
  HostTensor big = run1(Op::ScatterFold, {i64({1}, {4611686018427387904.0}), i64({1}, {0}), i64({1}, {4})},
                        {{"dim", int64_t{0}}, {"reduce", std::string("prod")}});
  EXPECT_EQ(vals(big), (std::vector<double>{0})) << "2^62 * 4 wraps to 0, as two's complement";
}

TEST(OpsScatterReduce, ShapeRuleAndErrors) {
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {F({4}), I({2}), F({2})}, reduce_attrs("max", true), "reduce must be one of sum, prod, mean, amax, amin; got 'max'"));
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {I({4}), I({2}), I({2})}, reduce_attrs("mean", true), "reduce='mean' of i64 is not supported"));
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {F({2, 3}), I({2, 2}), F({1, 2})}, {{"dim", int64_t{1}}, {"reduce", std::string("sum")}},
                         "larger than src"));
  EXPECT_TRUE(meta_fails(Op::ScatterFold, {F({4}), I({2}), F({2})}, {{"dim", int64_t{0}}, {"reduce", std::string("sum")}},
                         "(sum is scatter_add)"));
  EXPECT_EQ(one_node_round_trip(Op::ScatterReduce, {F({4, 5}), I({4, 1}), F({4, 1})}, reduce_attrs("amax", false)),
            "%y = scatter_reduce(%x0, %x1, %x2, dim=0, reduce=\"amax\", include_self=false) : f32[4,5]");
  EXPECT_EQ(one_node_round_trip(Op::ScatterFold, {F({4, 5}), I({4, 1}), F({4, 1})}, {{"dim", int64_t{0}}, {"reduce", std::string("prod")}}),
            "%y = scatter_fold(%x0, %x1, %x2, dim=0, reduce=\"prod\") : f32[4,5]");
}

}  // namespace
}  // namespace kiln
