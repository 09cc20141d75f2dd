#include "runtime/cpu/blas.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/half.h"
#include "runtime/cpu/dnnl_gemm.h"
#include "runtime/cpu/thread_pool.h"

#if KILN_HAVE_BLAS
#include <cblas.h>
#endif

namespace kiln::runtime::cpu {
namespace {

// A product is split into blocks of at least this many multiply-adds: a block packs its own panel
// of the other operand (k*n or k*m elements), a few percent of the block's work at this size.
constexpr int64_t kBlockWork = 64 * 64 * 256;
// Blocks per thread: more balance a thread the scheduler runs late, fewer repack less (a GEMM
// [512,768]x[768,3072] on 2 cores: 7.6, 7.9 and 8.8 ms quiet for 1, 2 and 4 blocks a thread; 16.4,
// 16.1 and 17.3 ms beside two busy processes; bench/NOTES.md).
constexpr int64_t kBlocksPerThread = 2;

#if KILN_HAVE_BLAS
// kiln's pool owns the cores (docs/threads.md): OpenBLAS runs every call on the thread that makes
// it, and gemm() below spreads a large product over the pool in blocks of rows or columns. Two
// sets of threads would oversubscribe the machine (OpenBLAS's spin after each call while kiln's
// workers start the next loop), and OpenBLAS splits a product statically over its threads, so a
// product waits for whichever of them the scheduler runs last, where the pool's blocks go to the
// threads that are running.
// Also says, once, when OpenBLAS chose its generic kernels on a CPU with wide vectors: its CPU
// detection does not know every model (a cloud VM's "Intel(R) Xeon(R) Processor" gets
// "Prescott", SSE3), and its matmuls then run 2-3x slower. Only the environment can fix that,
// before the library loads: OPENBLAS_CORETYPE.
void match_blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] {
    openblas_set_num_threads(1);
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

#endif

// One product over kiln's pool: C's rows (or its columns, when it has fewer rows than columns)
// in blocks of at least kBlockWork multiply-adds, each block one single-threaded call of
// `one(ta, tb, m, n, k, a, lda, b, ldb, c, ldc)` (OpenBLAS's, or oneDNN's for 16-bit elements E).
template <typename E, typename One>
void pooled(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const E* a, int64_t lda, const E* b, int64_t ldb, E* c,
            int64_t ldc, const One& one) {
  const int64_t work = m * n * std::max<int64_t>(k, 1);
  if (work < 2 * kBlockWork || num_threads() == 1 || in_parallel_region()) {
    one(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
  const int64_t blocks = kBlocksPerThread * num_threads();
  if (m >= n) {
    // Rows i of op(A): A's row i, or A's column i when transposed.
    const int64_t grain = std::max(kBlockWork / (n * std::max<int64_t>(k, 1)), m / blocks);
    parallel_for(m, grain, [&](int64_t i0, int64_t i1) {
      one(ta, tb, i1 - i0, n, k, ta ? a + i0 : a + i0 * lda, lda, b, ldb, c + i0 * ldc, ldc);
    });
  } else {
    // Columns j of op(B): B's column j, or B's row j when transposed.
    const int64_t grain = std::max(kBlockWork / (m * std::max<int64_t>(k, 1)), n / blocks);
    parallel_for(n, grain, [&](int64_t j0, int64_t j1) {
      one(ta, tb, m, j1 - j0, k, a, lda, tb ? b + j0 * ldb : b + j0, ldb, c + j0, ldc);
    });
  }
}

#if KILN_HAVE_BLAS
template <typename T>
void pooled_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  pooled(ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
         [&](bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, const T* a_, int64_t lda_, const T* b_, int64_t ldb_, T* c_,
             int64_t ldc_) { blas_gemm(ta_, tb_, m_, n_, k_, alpha, a_, lda_, b_, ldb_, beta, c_, ldc_); });
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
template <typename T>
void pooled_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T beta, T* c, int64_t ldc) {
  blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
  pooled_gemm(ta, tb, m, n, k, static_cast<float>(alpha), a32.data(), ta ? m : k, b32.data(), tb ? k : n,
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
      pooled_gemm(trans_a, trans_b, m, n, k, static_cast<float>(alpha), static_cast<const float*>(a), lda,
                  static_cast<const float*>(b), ldb, static_cast<float>(beta), static_cast<float*>(c), ldc);
      return;
    case DType::F64:
      pooled_gemm(trans_a, trans_b, m, n, k, alpha, static_cast<const double*>(a), lda, static_cast<const double*>(b),
                  ldb, beta, static_cast<double*>(c), ldc);
      return;
    case DType::F16:
    case DType::BF16: {
      auto widening = dtype == DType::F16 ? gemm_16bit<half_bits_to_float, float_to_half_bits>
                                          : gemm_16bit<bf16_bits_to_float, float_to_bf16_bits>;
      if (!dnnl_multiplies(dtype)) return widening(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      // oneDNN's 16-bit units, a block of C per call on kiln's pool (runtime/cpu/dnnl_gemm.h).
      pooled(trans_a, trans_b, m, n, k, static_cast<const uint16_t*>(a), lda, static_cast<const uint16_t*>(b), ldb,
             static_cast<uint16_t*>(c), ldc,
             [&](bool ta, bool tb, int64_t m_, int64_t n_, int64_t k_, const uint16_t* a_, int64_t lda_, const uint16_t* b_,
                 int64_t ldb_, uint16_t* c_, int64_t ldc_) {
               if (!dnnl_gemm_16bit(dtype, ta, tb, m_, n_, k_, static_cast<float>(alpha), a_, lda_, b_, ldb_,
                                    static_cast<float>(beta), c_, ldc_))
                 widening(ta, tb, m_, n_, k_, alpha, a_, lda_, b_, ldb_, beta, c_, ldc_);
             });
      return;
    }
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
  if (batch > 1 && m * n * k < 2 * kBlockWork) {
    match_blas_threads();
    parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace kiln::runtime::cpu
