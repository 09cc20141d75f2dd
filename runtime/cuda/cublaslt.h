#pragma once
// Matrix multiply on the GPU through cuBLASLt, with the semantics of the CPU's
// runtime/cpu/blas.h: row-major, C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T,
// op(A) m x k, op(B) k x n, leading dimensions in elements; `batch` independent products,
// matrix i at a + i * stride_a (strides in elements, 0 broadcasts). With beta == 0, C is not read.
//
// cuBLASLt is column-major. A row-major matrix is the column-major view of its transpose, so
// row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T: B's memory is
// passed as cuBLASLt's first operand (with B's transpose flag), A's as the second, and C is an
// n x m column-major matrix with ld = ldc. Nothing is copied.
//
// Types: f32 computes in f32 with TF32 off (CUBLAS_COMPUTE_32F, as PyTorch's default for
// matmul precision "highest"); allow_tf32 uses CUBLAS_COMPUTE_32F_FAST_TF32. f64 computes in
// f64. f16 and bf16 inputs and outputs accumulate in f32 (scale type f32). Integer and bool
// types are a kiln::Error.
//
// Epilogues run on the output before it is stored. The bias is a vector of n elements (one per
// output column of the row-major C) of C's dtype: after the swap it is one per row of the
// column-major C^T, which is what cuBLASLt's BIAS epilogue adds ("bias vector length must match
// matrix D rows"), the same vector for every batch entry. GELU is cuBLASLt's, the tanh
// approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
//
// One cublasLtHandle per device, created at first use, with a 32 MB workspace from the caching
// allocator. Descriptors and the heuristic's algorithm are cached per (dtype, shapes, strides,
// flags, pointer alignments), so a repeated call does not run the heuristic again.
#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "runtime/cuda/stream.h"
#include "runtime/tuning.h"

namespace kiln::runtime::cuda {

enum class Epilogue { None, Bias, Relu, BiasRelu, Gelu, BiasGelu };

struct GemmOptions {
  bool allow_tf32 = false;  // f32 only
  Epilogue epilogue = Epilogue::None;
  const void* bias = nullptr;  // device pointer, n elements of the dtype; for the Bias* epilogues
  // Tuning (issue 28 point 4): the heuristic's first few algorithms for this problem are each
  // run on the operands given (C is overwritten: call it on scratch, or on the real operands
  // before the real call) and timed; the fastest becomes the problem's plan for the process,
  // and is stored in the kernel cache under the problem, the device and cuBLASLt's version, so
  // a later process takes it without timing. Not while the stream is being captured (a CUDA
  // graph): then the plan stays the heuristic's first. `tuned`, when given, receives what
  // happened ("algorithm 3 of 8, 0.0123 ms (the heuristic's first 0.0150 ms)", "... from the
  // cache", or why nothing was timed), whether it came from the cache and left the first.
  bool autotune = false;
  TuningOutcome* tuned = nullptr;
};

// Queued on `stream` (on its device). m, n or batch 0: nothing. k == 0: C = beta * C, then the
// epilogue (so with beta == 0 and a bias: C = bias in every row).
void gemm_strided_batched(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                          double beta, void* c, int64_t ldc, int64_t stride_c, int64_t batch, Stream& stream,
                          const GemmOptions& options = {});

// A single product (batch 1).
void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, Stream& stream,
          const GemmOptions& options = {});

}  // namespace kiln::runtime::cuda
