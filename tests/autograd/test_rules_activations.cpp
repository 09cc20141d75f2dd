// Gradchecks (float64, every element) of the activations' derivative rules, with inputs spread
// over both sides of each kink (none falls within the finite difference's step of one), and
// every attribute away from its default.
#include <gtest/gtest.h>

#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::gradcheck_values;

namespace {

// Values over [-6, 6]: both sides of 0 and of +-3 (hardsigmoid's and hardswish's kinks).
HostTensor spread(const Shape& s, uint64_t seed) {
  HostTensor r = random_tensor(TensorMeta(DType::F64, s), seed);
  HostTensor out = HostTensor::empty(TensorMeta(DType::F64, s));
  for (int64_t i = 0; i < r.numel(); ++i) out.set(i, 6.0 * std::tanh(2.0 * r.get(i)));
  return out;
}

TEST(ActivationRules, EveryActivationMatchesFiniteDifferences) {
  for (Op op : {Op::Hardsigmoid, Op::Hardswish, Op::LeakyRelu, Op::Elu, Op::Selu, Op::Softplus, Op::Mish})
    for (uint64_t seed : {1, 2, 3}) EXPECT_TRUE(gradcheck_values(op, {spread({4, 7}, seed)})) << op_name(op) << " seed " << seed;
}

TEST(ActivationRules, AttributesAwayFromTheirDefaults) {
  EXPECT_TRUE(gradcheck_values(Op::LeakyRelu, {spread({3, 5}, 4)}, {{"negative_slope", 0.3}}));
  EXPECT_TRUE(gradcheck_values(Op::Elu, {spread({3, 5}, 5)}, {{"alpha", 0.5}, {"scale", 1.5}, {"input_scale", 2.0}}));
  // A threshold inside the inputs' range: both branches are taken.
  EXPECT_TRUE(gradcheck_values(Op::Softplus, {spread({3, 5}, 6)}, {{"beta", 2.0}, {"threshold", 3.0}}));
  EXPECT_TRUE(gradcheck_values(Op::Softplus, {spread({3, 5}, 7)}, {{"beta", 0.5}}));
}

TEST(ActivationRules, LogsumexpAndNanToNum) {
  HostTensor x = kiln::random_tensor(TensorMeta(DType::F64, {3, 4, 5}), 8);
  for (const Attrs& a : {Attrs{{"dim", IntList{1}}}, Attrs{{"dim", IntList{0, 2}}, {"keepdim", true}}, Attrs{}})
    EXPECT_TRUE(gradcheck_values(Op::Logsumexp, {x}, a));
  // nan_to_num of finite values is the identity (its replaced values are constants).
  EXPECT_TRUE(gradcheck_values(Op::NanToNum, {spread({3, 5}, 9)}));
}

}  // namespace
