// gemm against a naive loop in double: odd sizes, transposes, padding, beta, batches, 16-bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ir/error.h"
#include "ir/half.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/dnnl_gemm.h"

namespace kiln::runtime::cpu {
namespace {

std::vector<double> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// C = alpha op(A) op(B) + beta C over stored matrices, in double.
void naive_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const std::vector<double>& a,
                int64_t lda, const std::vector<double>& b, int64_t ldb, double beta, std::vector<double>& c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * sum + (beta == 0 ? 0 : beta * c[i * ldc + j]);
    }
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : {1, 7, 33})
        for (int64_t n : {1, 7, 33})
          for (int64_t k : {1, 7, 33}) out.push_back({ta, tb, m, n, k});
  return out;
}

// Products large enough that gemm() splits them over kiln's pool: by rows (m >= n), by
// columns, and square, each with every transpose.
std::vector<Case> pooled_cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Case c : {Case{false, false, 1000, 33, 150}, Case{false, false, 33, 1000, 150}, Case{false, false, 301, 299, 64}})
        out.push_back({ta, tb, c.m, c.n, c.k});
  return out;
}

template <typename T>
void check_gemm(DType dtype, double tolerance, const std::vector<Case>& all = cases()) {
  uint32_t seed = 1;
  for (const Case& c : all) {
    // Leading dimensions padded by 3 so that strides and sizes differ.
    int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 3, ldc = c.n + 3;
    auto a = random_values((c.ta ? c.k : c.m) * lda, seed++);
    auto b = random_values((c.tb ? c.n : c.k) * ldb, seed++);
    auto c0 = random_values(c.m * ldc, seed++);
    for (double beta : {0.0, 0.5}) {
      std::vector<double> expected = c0;
      naive_gemm(c.ta, c.tb, c.m, c.n, c.k, 1.5, a, lda, b, ldb, beta, expected, ldc);
      std::vector<T> ta = cast<T>(a), tb = cast<T>(b), tc = cast<T>(c0);
      if (beta == 0) std::fill(tc.begin(), tc.end(), std::numeric_limits<T>::quiet_NaN());  // must not be read
      gemm(dtype, c.ta, c.tb, c.m, c.n, c.k, 1.5, ta.data(), lda, tb.data(), ldb, beta, tc.data(), ldc);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j)
          ASSERT_NEAR(tc[i * ldc + j], expected[i * ldc + j], tolerance)
              << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m << " n=" << c.n << " k=" << c.k << " beta=" << beta
              << " at " << i << "," << j;
    }
  }
}

TEST(Blas, F32) { check_gemm<float>(DType::F32, 2e-5); }
TEST(Blas, F64) { check_gemm<double>(DType::F64, 1e-12); }
TEST(Blas, SplitOverThePoolF32) { check_gemm<float>(DType::F32, 1e-4, pooled_cases()); }
TEST(Blas, SplitOverThePoolF64) { check_gemm<double>(DType::F64, 1e-11, pooled_cases()); }

// 16-bit: the reference multiplies the rounded inputs in double and rounds once, as the f32
// route does up to f32 accumulation; results may differ by one 16-bit rounding step.
template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void check_16bit(DType dtype, double ulp) {
  const int64_t m = 7, n = 33, k = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      auto a = random_values(m * k, 11), b = random_values(k * n, 12);
      std::vector<uint16_t> a16(a.size()), b16(b.size()), c16(m * n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = widen(a16[i] = narrow(static_cast<float>(a[i])));
      for (size_t i = 0; i < b.size(); ++i) b[i] = widen(b16[i] = narrow(static_cast<float>(b[i])));
      std::vector<double> expected(m * n);
      naive_gemm(ta, tb, m, n, k, 1.0, a, ta ? m : k, b, tb ? k : n, 0.0, expected, n);
      gemm(dtype, ta, tb, m, n, k, 1.0, a16.data(), ta ? m : k, b16.data(), tb ? k : n, 0.0, c16.data(), n);
      for (int64_t i = 0; i < m * n; ++i)
        ASSERT_NEAR(widen(c16[i]), expected[i], ulp * std::max(1.0, std::abs(expected[i]))) << "at " << i;
    }
  }
}

TEST(Blas, F16) { check_16bit<half_bits_to_float, float_to_half_bits>(DType::F16, 1.0 / 1024); }
TEST(Blas, BF16) { check_16bit<bf16_bits_to_float, float_to_bf16_bits>(DType::BF16, 1.0 / 128); }

// 16-bit products large enough to be split over the pool, with padded leading dimensions,
// alpha and beta, every transpose: on oneDNN's 16-bit units where this build and CPU have them
// (runtime/cpu/dnnl_gemm.h), else widened for OpenBLAS. The reference multiplies the rounded
// inputs in double; C is rounded once (C's own rounding before beta adds half a step more).
template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void check_16bit_large(DType dtype, double ulp) {
  SCOPED_TRACE(std::string("oneDNN: ") + (dnnl_multiplies(dtype) ? dnnl_implementation(dtype) : "no (widened to f32)"));
  uint32_t seed = 31;
  for (const Case& c : pooled_cases()) {
    int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 5, ldc = c.n + 2;
    auto a = random_values((c.ta ? c.k : c.m) * lda, seed++), b = random_values((c.tb ? c.n : c.k) * ldb, seed++);
    auto c0 = random_values(c.m * ldc, seed++);
    std::vector<uint16_t> a16(a.size()), b16(b.size()), c16(c0.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = widen(a16[i] = narrow(static_cast<float>(a[i])));
    for (size_t i = 0; i < b.size(); ++i) b[i] = widen(b16[i] = narrow(static_cast<float>(b[i])));
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = widen(c16[i] = narrow(static_cast<float>(c0[i])));
    for (double beta : {0.0, 0.5}) {
      std::vector<double> expected = c0;
      naive_gemm(c.ta, c.tb, c.m, c.n, c.k, 1.5, a, lda, b, ldb, beta, expected, ldc);
      std::vector<uint16_t> out = c16;
      if (beta == 0) std::fill(out.begin(), out.end(), narrow(std::numeric_limits<float>::quiet_NaN()));  // must not be read
      gemm(dtype, c.ta, c.tb, c.m, c.n, c.k, 1.5, a16.data(), lda, b16.data(), ldb, beta, out.data(), ldc);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          const double want = expected[i * ldc + j], scale = std::sqrt(static_cast<double>(c.k));
          ASSERT_NEAR(widen(out[i * ldc + j]), want, ulp * std::max(scale, std::abs(want)))
              << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m << " n=" << c.n << " k=" << c.k << " beta=" << beta << " at " << i
              << "," << j;
        }
    }
  }
}

TEST(Blas, F16SplitOverThePool) { check_16bit_large<half_bits_to_float, float_to_half_bits>(DType::F16, 1.0 / 1024); }
TEST(Blas, BF16SplitOverThePool) { check_16bit_large<bf16_bits_to_float, float_to_bf16_bits>(DType::BF16, 1.0 / 128); }

void check_batched(int64_t batch, int64_t m, int64_t n, int64_t k, bool broadcast_b) {
  int64_t stride_a = m * k + 5, stride_b = broadcast_b ? 0 : k * n + 2, stride_c = m * n + 1;
  auto a = random_values(batch * stride_a, 21);
  auto b = random_values(broadcast_b ? k * n : batch * stride_b, 22);
  std::vector<double> expected(batch * stride_c, 0.0);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<double> ai(a.begin() + i * stride_a, a.begin() + i * stride_a + m * k);
    std::vector<double> bi(b.begin() + i * stride_b, b.begin() + i * stride_b + k * n);
    std::vector<double> ci(m * n);
    naive_gemm(false, true, m, n, k, 1.0, ai, k, bi, k, 0.0, ci, n);
    std::copy(ci.begin(), ci.end(), expected.begin() + i * stride_c);
  }
  std::vector<float> fa = cast<float>(a), fb = cast<float>(b), fc(batch * stride_c, 0.0f);
  gemm_strided_batched(DType::F32, false, true, m, n, k, 1.0, fa.data(), k, stride_a, fb.data(), k, stride_b, 0.0,
                       fc.data(), n, stride_c, batch);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < m * n; ++j)
      ASSERT_NEAR(fc[i * stride_c + j], expected[i * stride_c + j], 1e-4) << "batch " << i << " element " << j;
}

TEST(Blas, BatchedSmallRunsOverTheBatch) { check_batched(9, 7, 33, 7, false); }
TEST(Blas, BatchedLargeOneAfterAnother) { check_batched(2, 65, 70, 66, false); }
TEST(Blas, BatchedBroadcastB) { check_batched(5, 33, 1, 7, true); }

TEST(Blas, Errors) {
  std::vector<int32_t> x(4);
  EXPECT_THROW(gemm(DType::I32, false, false, 2, 2, 2, 1.0, x.data(), 2, x.data(), 2, 0.0, x.data(), 2), kiln::Error);
  std::vector<float> f(4);
  EXPECT_THROW(gemm(DType::F32, false, false, 2, 2, 2, 1.0, f.data(), 1, f.data(), 2, 0.0, f.data(), 2), kiln::Error);
}

}  // namespace
}  // namespace kiln::runtime::cpu
