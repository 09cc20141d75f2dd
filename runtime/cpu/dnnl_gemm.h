#pragma once
// 16-bit matrix products on oneDNN (Debian's libdnnl-dev), with blas.h's semantics: row-major,
// C = alpha * op(A) * op(B) + beta * C, bf16 or f16 operands multiplied with f32 accumulation
// and C rounded to nearest even once. blas.h's own 16-bit path widens A and B to f32 for sgemm;
// oneDNN multiplies them on the CPU's 16-bit units where it has them (AMX and AVX512-BF16: a
// [512,768] x [768,3072] bf16 product took 2.8 ms on one Sapphire Rapids core, where the f32
// sgemm alone took 18.6). f32 and f64 stay on OpenBLAS: oneDNN has no f64 product, and its f32
// one ran no faster there (bench/NOTES.md, stop 43).
//
// Threads: kiln's pool owns the cores (docs/threads.md). Debian's oneDNN runs its parallel
// regions on OpenMP; every call here runs on its calling thread alone (an OpenMP team of one
// for the call, the thread's setting restored after it), and blas.cpp spreads a large product
// over the pool in blocks, as it does OpenBLAS's. Primitives are made once per problem (dtype,
// sizes, layouts, alpha, beta) and kept for the process.
#include <cstdint>

#include "ir/dtype.h"

namespace kiln::runtime::cpu {

// Whether this build has oneDNN and it multiplies `dtype` (bf16, f16) on this CPU: its
// implementation for a small product is looked up once per dtype. KILN_DNNL=off in the
// environment says no (the widening path, for a comparison).
bool dnnl_multiplies(DType dtype);
// The implementation oneDNN picked for `dtype` ("brg:avx512_core_amx_bf16"), "" if none.
const char* dnnl_implementation(DType dtype);

// One product on the calling thread; false when oneDNN has no implementation for it (the
// caller widens to f32 instead).
bool dnnl_gemm_16bit(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                     int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc);

}  // namespace kiln::runtime::cpu
