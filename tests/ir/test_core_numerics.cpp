// Known-answer tests of the numeric building blocks: Philox, f16/bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/half.h"
#include "ir/random.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  using A = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (A{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}), (A{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformAndNormalAreInRangeAndDependOnlyOnSeedAndIndex) {
  double sum = 0, sumsq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    float u = random_uniform(7, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    double z = random_normal(7, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sumsq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sumsq / n, 1.0, 0.05);
  EXPECT_EQ(random_bits(7, 123), random_bits(7, 123));
  EXPECT_NE(random_bits(7, 123), random_bits(8, 123));
}

TEST(Half, RoundsToNearestEvenLikeIEEE) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);    // largest finite half
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);    // rounds up to inf
  EXPECT_EQ(float_to_half_bits(6.1035156e-05f), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half_bits(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half_bits(-2.5f), 0xc100);
  EXPECT_EQ(float_to_half_bits(1e-8f), 0x0000);
  EXPECT_EQ(float_to_half_bits(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  EXPECT_EQ(half_bits_to_float(0x0001), 5.9604645e-08f);
  EXPECT_EQ(half_bits_to_float(0xfc00), -INFINITY);
  for (uint32_t b = 0; b < 0x7c00; ++b)  // every finite positive half survives a round trip
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(b))), b);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(0.1f), 0x3dcd);
  EXPECT_EQ(float_to_bf16_bits(-2.5f), 0xc020);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  EXPECT_EQ(float_to_bf16_bits(INFINITY), 0x7f80);
}

// tests/support's tensors_close, which every edge-case test leans on: NaN matches only NaN,
// an infinity only the same infinity (an infinite expected value makes atol + rtol * |e|
// infinite, which once let any finite value or the other infinity through).
TEST(TestSupport, TensorsCloseMatchesNaNAndInfinityByPosition) {
  using testing::make;
  using testing::tensors_close;
  const double inf = INFINITY, nan = NAN;
  HostTensor want = make(DType::F32, {4}, {nan, inf, -inf, 1});
  EXPECT_TRUE(tensors_close(make(DType::F32, {4}, {nan, inf, -inf, 1 + 1e-7}), want));
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {0, inf, -inf, 1}), want));      // NaN expected
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {nan, 3e38, -inf, 1}), want));   // inf expected, finite got
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {nan, -inf, -inf, 1}), want));   // the other infinity
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {nan, inf, nan, 1}), want));     // NaN for -inf
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {nan, inf, -inf, inf}), want));  // inf for a finite value
  EXPECT_FALSE(tensors_close(make(DType::F32, {4}, {nan, inf, -inf, nan}), want));  // NaN for a finite value
  EXPECT_TRUE(tensors_close(make(DType::F32, {1}, {-0.0}), make(DType::F32, {1}, {0.0}), 0, 0));
}

}  // namespace
}  // namespace kiln
