// The activations of torch.nn.functional (hardsigmoid, hardswish, leaky_relu, elu, selu,
// softplus, mish), logsumexp, and the non-finite ops (isnan, isinf, nan_to_num): reference
// kernels against values worked out by hand at each side of every kink, NaN and infinities,
// the shape rules and their errors, and the print/parse round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::vals;
const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

HostTensor f64(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  return make(DType::F64, {n}, std::move(v));
}

void expect_values(const HostTensor& got, const std::vector<double>& want) {
  std::vector<double> g = vals(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(g[i])) << i;
    else if (std::isinf(want[i])) EXPECT_EQ(g[i], want[i]) << i;
    else EXPECT_NEAR(g[i], want[i], 1e-15 * std::max(1.0, std::abs(want[i]))) << i;
  }
}

TEST(OpsActivations, HardsigmoidAndHardswishAtEachSideOfTheirKinks) {
  HostTensor x = f64({-4, -3, 0, 1.5, 3, 4, kNan, -kInf, kInf});
  expect_values(run1(Op::Hardsigmoid, {x}), {0, 0, 0.5, 0.75, 1, 1, kNan, 0, 1});
  expect_values(run1(Op::Hardswish, {x}), {0, 0, 0, 1.125, 3, 4, kNan, kNan, kInf});  // -inf * 0 is nan, as in PyTorch
  expect_values(run1(Op::Hardswish, {f64({-1.5})}), {-0.375});
}

TEST(OpsActivations, LeakyReluEluAndSelu) {
  HostTensor x = f64({-2, 0, 3, kNan});
  expect_values(run1(Op::LeakyRelu, {x}), {-0.02, 0, 3, kNan});
  expect_values(run1(Op::LeakyRelu, {x}, {{"negative_slope", 0.1}}), {-0.2, 0, 3, kNan});
  HostTensor y = f64({-1, 0, 2, -kInf});
  expect_values(run1(Op::Elu, {y}), {-0.6321205588285577, 0, 2, -1});
  expect_values(run1(Op::Elu, {y}, {{"alpha", 2.0}}), {-1.2642411176571153, 0, 2, -2});
  expect_values(run1(Op::Elu, {y}, {{"scale", 2.0}, {"input_scale", 0.5}}), {2 * std::expm1(-0.5), 0, 4, -2});
  expect_values(run1(Op::Selu, {y}), {-1.1113307378125625, 0, 2.101401974710961, -1.7580993408473766});
}

TEST(OpsActivations, SoftplusAndMish) {
  expect_values(run1(Op::Softplus, {f64({0, 30, -kInf, kNan})}), {std::log(2.0), 30, 0, kNan});
  // Above the threshold (x * beta > threshold) softplus is x itself.
  expect_values(run1(Op::Softplus, {f64({1, 11})}, {{"beta", 2.0}, {"threshold", 20.0}}), {1.0634640055214863, 11});
  expect_values(run1(Op::Softplus, {f64({5})}, {{"threshold", 4.0}}), {5});
  expect_values(run1(Op::Mish, {f64({1, -1, 0, 1000, -kInf})}), {0.8650983882673103, -0.30340146137410895, 0, 1000, kNan});
}

TEST(OpsActivations, KeepTheInputsTypeAndRefuseIntegers) {
  for (Op op : {Op::Hardsigmoid, Op::Hardswish, Op::LeakyRelu, Op::Elu, Op::Selu, Op::Softplus, Op::Mish}) {
    for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
      TensorMeta m = testing::meta(op, {TensorMeta(dt, {2, 3})});
      EXPECT_EQ(m.dtype, dt) << op_name(op);
      EXPECT_EQ(m.shape, (Shape{2, 3}));
    }
    EXPECT_TRUE(meta_fails(op, {TensorMeta(DType::I64, {2})}, {}, "needs a floating-point input, got i64")) << op_name(op);
    EXPECT_EQ(one_node_round_trip(op, {F({4, 5})}), fmt::format("%y = {}(%x0) : f32[4,5]", op_name(op)));
  }
  EXPECT_EQ(one_node_round_trip(Op::LeakyRelu, {F({3})}, {{"negative_slope", 0.2}}), "%y = leaky_relu(%x0, negative_slope=0.2) : f32[3]");
  EXPECT_EQ(one_node_round_trip(Op::Softplus, {F({3})}, {{"beta", 2.0}, {"threshold", 10.0}}),
            "%y = softplus(%x0, beta=2.0, threshold=10.0) : f32[3]");
  EXPECT_TRUE(meta_fails(Op::Softplus, {F({2})}, {{"beta", 0.0}}, "beta must not be 0"));
  // f32 rounds once from the double result.
  HostTensor h = run1(Op::Mish, {make(DType::F32, {1}, {1.0})});
  EXPECT_EQ(h.dtype(), DType::F32);
  EXPECT_EQ(vals(h)[0], static_cast<double>(static_cast<float>(0.8650983882673103)));
}

TEST(OpsActivations, LogsumexpOverflowsNeverAndKeepsInfinitiesAndNan) {
  // [ln 1, ln 2, ln 5] -> ln 8; 1000 + ln 2 without overflow; rows of -inf, with +inf, with nan.
  HostTensor x = make(DType::F64, {5, 3},
                      {0, std::log(2.0), std::log(5.0), 1000, 1000, -kInf, -kInf, -kInf, -kInf, 1, kInf, 2, 1, kNan, 2});
  expect_values(run1(Op::Logsumexp, {x}, {{"dim", IntList{1}}}), {std::log(8.0), 1000 + std::log(2.0), -kInf, kInf, kNan});
  HostTensor kept = run1(Op::Logsumexp, {x}, {{"dim", IntList{1}}, {"keepdim", true}});
  EXPECT_EQ(kept.shape(), (Shape{5, 1}));
  expect_values(run1(Op::Logsumexp, {f64({0, 0, 0, 0})}), {std::log(4.0)});  // dim=None: every dim
  // An empty reduction is log(0) = -inf; integers give floats.
  expect_values(run1(Op::Logsumexp, {make(DType::F32, {2, 0}, {})}, {{"dim", IntList{1}}}), {-kInf, -kInf});
  EXPECT_EQ(testing::meta(Op::Logsumexp, {TensorMeta(DType::I64, {3, 4})}, {{"dim", IntList{0}}}),
            TensorMeta(DType::F32, {4}));
  EXPECT_TRUE(meta_fails(Op::Logsumexp, {F({3, 4})}, {{"dim", IntList{2}}}, "out of range"));
}

TEST(OpsActivations, IsnanIsinfAndNanToNum) {
  HostTensor x = f64({1, kNan, kInf, -kInf, -0.5});
  EXPECT_EQ(run1(Op::Isnan, {x}).to_ints(), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(run1(Op::Isinf, {x}).to_ints(), (std::vector<int64_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(run1(Op::Isnan, {testing::ints(DType::I64, {2}, {3, -1})}).to_ints(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(run1(Op::Isnan, {x}).dtype(), DType::Bool);
  expect_values(run1(Op::NanToNum, {x}), {1, 0, 1.7976931348623157e308, -1.7976931348623157e308, -0.5});
  expect_values(run1(Op::NanToNum, {x}, {{"nan", 7.0}, {"posinf", 9.0}, {"neginf", -9.0}}), {1, 7, 9, -9, -0.5});
  // Each dtype's own largest finite value.
  expect_values(run1(Op::NanToNum, {make(DType::F16, {2}, {kInf, -kInf})}), {65504, -65504});
  expect_values(run1(Op::NanToNum, {make(DType::F32, {1}, {kInf})}), {3.4028234663852886e38});
  EXPECT_EQ(run1(Op::NanToNum, {testing::ints(DType::I32, {2}, {5, -7})}).to_ints(), (std::vector<int64_t>{5, -7}));
  EXPECT_EQ(one_node_round_trip(Op::NanToNum, {F({3})}, {{"nan", 1.0}}), "%y = nan_to_num(%x0, nan=1.0) : f32[3]");
}

}  // namespace
}  // namespace kiln
