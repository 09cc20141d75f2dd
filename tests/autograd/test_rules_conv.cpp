// Gradchecks (float64, every element) of convolution (plain, strided, dilated, grouped, with
// bias, transposed with output_padding), of max_pool and avg_pool, and of rms_norm and
// group_norm, differentiated through their decompositions' parts.
#include <gtest/gtest.h>

#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::gradcheck_values;

namespace {

HostTensor rnd(const Shape& s, uint64_t seed) { return random_tensor(TensorMeta(DType::F64, s), seed); }

Attrs conv_attrs(IntList stride, IntList padding, IntList dilation, int64_t groups, bool transposed = false, IntList output_padding = {0}) {
  return Attrs{{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}, {"transposed", transposed},
               {"output_padding", output_padding}};
}

TEST(ConvRules, ConvolutionMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck_values(Op::Convolution, {rnd({2, 3, 7}, 1), rnd({4, 3, 3}, 2), rnd({4}, 3)}, conv_attrs({2}, {1}, {1}, 1)));
  EXPECT_TRUE(gradcheck_values(Op::Convolution, {rnd({1, 4, 5, 6}, 4), rnd({4, 2, 3, 2}, 5)}, conv_attrs({1, 2}, {1, 0}, {2, 1}, 2)));
  EXPECT_TRUE(gradcheck_values(Op::Convolution, {rnd({1, 2, 3, 4, 3}, 6), rnd({2, 2, 2, 2, 2}, 7), rnd({2}, 8)}, conv_attrs({1}, {1}, {1}, 1)));
}

TEST(ConvRules, TransposedConvolutionMatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck_values(Op::Convolution, {rnd({2, 3, 4}, 9), rnd({3, 2, 3}, 10), rnd({2}, 11)}, conv_attrs({2}, {1}, {1}, 1, true, {1})));
  EXPECT_TRUE(gradcheck_values(Op::Convolution, {rnd({1, 4, 3, 3}, 12), rnd({4, 1, 2, 3}, 13)}, conv_attrs({2, 1}, {0, 1}, {1, 2}, 2, true)));
}

TEST(ConvRules, PoolsMatchFiniteDifferences) {
  // Random inputs: no two elements of a window tie, so max_pool's derivative is defined.
  EXPECT_TRUE(gradcheck_values(Op::MaxPool, {rnd({2, 3, 9}, 14)}, Attrs{{"kernel_size", IntList{3}}, {"stride", IntList{2}}, {"padding", IntList{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::MaxPool, {rnd({1, 2, 5, 6}, 15)},
                               Attrs{{"kernel_size", IntList{2, 3}}, {"ceil_mode", true}, {"dilation", IntList{1, 2}}}));
  EXPECT_TRUE(gradcheck_values(Op::AvgPool, {rnd({1, 2, 5, 6}, 16)}, Attrs{{"kernel_size", IntList{3, 3}}, {"stride", IntList{2}}, {"padding", IntList{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::AvgPool, {rnd({2, 7}, 17)},
                               Attrs{{"kernel_size", IntList{3}}, {"stride", IntList{2}}, {"ceil_mode", true}, {"count_include_pad", false}}));
}

TEST(NormRules, RmsNormAndGroupNormMatchFiniteDifferences) {
  EXPECT_TRUE(gradcheck_values(Op::RmsNorm, {rnd({3, 4, 5}, 18), rnd({4, 5}, 19)}, Attrs{{"normalized_shape", IntList{4, 5}}}));
  EXPECT_TRUE(gradcheck_values(Op::RmsNorm, {rnd({3, 5}, 20)}, Attrs{{"normalized_shape", IntList{5}}, {"eps", 1e-2}}));
  EXPECT_TRUE(gradcheck_values(Op::GroupNorm, {rnd({2, 6, 3, 2}, 21), rnd({6}, 22), rnd({6}, 23)}, Attrs{{"num_groups", int64_t{2}}}));
  EXPECT_TRUE(gradcheck_values(Op::GroupNorm, {rnd({2, 4, 5}, 24)}, Attrs{{"num_groups", int64_t{4}}, {"eps", 1e-3}}));
}

}  // namespace
