#include "runtime/cpu/blas.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/half.h"
#include "runtime/cpu/thread_pool.h"

#if KILN_HAVE_BLAS
#include <cblas.h>
#endif

namespace kiln::runtime::cpu {
namespace {

// Below this many multiply-adds OpenBLAS runs a gemm on one thread (its
// GEMM_MULTITHREAD_THRESHOLD), so a batch of such gemms is spread over kiln's pool instead.
constexpr int64_t kSmallGemm = 64 * 64 * 64;

#if KILN_HAVE_BLAS
// OpenBLAS keeps its own threads; give it as many as kiln's pool so that the two, taking
// turns, never oversubscribe the machine.
// Also says, once, when OpenBLAS chose its generic kernels on a CPU with wide vectors: its CPU
// detection does not know every model (a cloud VM's "Intel(R) Xeon(R) Processor" gets
// "Prescott", SSE3), and its matmuls then run 2-3x slower. Only the environment can fix that,
// before the library loads: OPENBLAS_CORETYPE.
void match_blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] {
    openblas_set_num_threads(num_threads());
    std::string core = openblas_get_corename() ? openblas_get_corename() : "";
    bool generic = core == "Prescott" || core == "Core2" || core == "Katmai" || core == "Coppermine" ||
                   core == "Northwood" || core == "Penryn" || core == "Dunnington" || core == "Atom";
    if (generic && __builtin_cpu_supports("avx2") && !std::getenv("OPENBLAS_CORETYPE")) {
      const char* fit = __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell";
      std::fprintf(stderr,
                   "kiln: OpenBLAS chose its generic '%s' kernels on this CPU, which has AVX2%s: its CPU detection does "
                   "not know the model, and matmuls run 2-3x slower. Set OPENBLAS_CORETYPE=%s before starting.\n",
                   core.c_str(), __builtin_cpu_supports("avx512f") ? " and AVX-512" : "", fit);
    }
  });
}

void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}
#else
void match_blas_threads() {}

// The plain loop of builds without OpenBLAS: rows in parallel, i-p-j order so the inner loop
// runs along rows of B and C.
template <typename T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc) {
  parallel_for(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * k)), [&](int64_t i0, int64_t i1) {
    std::vector<T> row(n);
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(row.begin(), row.end(), T(0));
      for (int64_t p = 0; p < k; ++p) {
        T av = ta ? a[p * lda + i] : a[i * lda + p];
        for (int64_t j = 0; j < n; ++j) row[j] += av * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      }
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = alpha * row[j] + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
    }
  });
}
#endif

// A stored rows x cols matrix of 16-bit floats (leading dimension ld) widened to dense f32.
template <float (*widen)(uint16_t)>
std::vector<float> widened(const void* x, int64_t rows, int64_t cols, int64_t ld) {
  const auto* in = static_cast<const uint16_t*>(x);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t col = 0; col < cols; ++col) out[r * cols + col] = widen(in[r * ld + col]);
  return out;
}

template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void gemm_16bit(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda,
                const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  std::vector<float> a32 = ta ? widened<widen>(a, k, m, lda) : widened<widen>(a, m, k, lda);
  std::vector<float> b32 = tb ? widened<widen>(b, n, k, ldb) : widened<widen>(b, k, n, ldb);
  std::vector<float> c32 = beta == 0 ? std::vector<float>(static_cast<size_t>(m * n)) : widened<widen>(c, m, n, ldc);
  blas_gemm(ta, tb, m, n, k, static_cast<float>(alpha), a32.data(), ta ? m : k, b32.data(), tb ? k : n,
            static_cast<float>(beta), c32.data(), n);
  auto* out = static_cast<uint16_t*>(c);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out[i * ldc + j] = narrow(c32[i * n + j]);
}

void check_shape(DType dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                 int64_t ldc) {
  KILN_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size m={} n={} k={}", m, n, k);
  KILN_CHECK(lda >= std::max<int64_t>(1, ta ? m : k) && ldb >= std::max<int64_t>(1, tb ? k : n) &&
                 ldc >= std::max<int64_t>(1, n),
             "gemm: leading dimensions lda={} ldb={} ldc={} too small for m={} n={} k={} (trans_a={}, trans_b={})",
             lda, ldb, ldc, m, n, k, ta, tb);
  KILN_CHECK(is_floating(dtype), "gemm: dtype {} is not supported (f16, bf16, f32, f64 are)", dtype_name(dtype));
}

}  // namespace

#if KILN_HAVE_BLAS
bool blas_available() { return true; }
#else
bool blas_available() { return false; }
#endif

void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  check_shape(dtype, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  match_blas_threads();
  switch (dtype) {
    case DType::F32:
      blas_gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), static_cast<const float*>(a), lda,
                static_cast<const float*>(b), ldb, static_cast<float>(beta), static_cast<float*>(c), ldc);
      return;
    case DType::F64:
      blas_gemm(trans_a, trans_b, m, n, k, alpha, static_cast<const double*>(a), lda, static_cast<const double*>(b),
                ldb, beta, static_cast<double*>(c), ldc);
      return;
    case DType::F16:
      gemm_16bit<half_bits_to_float, float_to_half_bits>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    case DType::BF16:
      gemm_16bit<bf16_bits_to_float, float_to_bf16_bits>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    default:
      KILN_INTERNAL_ASSERT(false, "check_shape admits floating dtypes only");
  }
}

void gemm_strided_batched(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                          int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  check_shape(dtype, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  KILN_CHECK(batch >= 0, "gemm: negative batch {}", batch);
  int64_t bytes = dtype_size(dtype);
  auto one = [&](int64_t i) {
    gemm(dtype, trans_a, trans_b, m, n, k, alpha, static_cast<const char*>(a) + i * stride_a * bytes, lda,
         static_cast<const char*>(b) + i * stride_b * bytes, ldb, beta, static_cast<char*>(c) + i * stride_c * bytes,
         ldc);
  };
  if (batch > 1 && m * n * k <= kSmallGemm) {
    match_blas_threads();
    parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace kiln::runtime::cpu
