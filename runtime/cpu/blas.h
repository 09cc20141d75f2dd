#pragma once
// Matrix multiply for the CPU backend through OpenBLAS (cblas), row-major, as BLAS defines
// it: C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T, op(A) m x k, op(B) k x n,
// leading dimensions in elements. With beta == 0, C is written without being read.
//
// f32 and f64 go to sgemm/dgemm. f16 and bf16 go to oneDNN where it multiplies them on the
// CPU's 16-bit units (runtime/cpu/dnnl_gemm.h); else, having no BLAS routine, A and B are
// widened to f32 and multiplied with sgemm. Either way the accumulation is f32 (as PyTorch's CPU
// matmul) and C is rounded to nearest even once at the end. Integer types are a kiln::Error.
//
// Threads: kiln's pool owns the cores (docs/threads.md). OpenBLAS runs each call on the calling
// thread, and a large product is split into blocks of rows or columns over the pool. Builds without OpenBLAS
// (the GPU test machine) use a plain loop with the same semantics.
#include <cstdint>

#include "ir/dtype.h"

namespace kiln::runtime::cpu {

// Whether OpenBLAS was found at build time (else the plain loop).
bool blas_available();

void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);

// `batch` independent gemms, matrix i at a + i*stride_a (strides in elements, 0 broadcasts).
// Small matrices run in parallel over the batch on kiln's pool; large ones one after another,
// each spread over the pool.
void gemm_strided_batched(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                          int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace kiln::runtime::cpu
