// The activations of torch.nn.functional (hardsigmoid, hardswish, leaky_relu, elu, selu,
// softplus, mish): reference kernels against values worked out by hand at each side of every
// kink, NaN and infinities, the shape rule and its errors, and the print/parse round trip.
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

}  // namespace
}  // namespace kiln
