// The tensor-core attention routines of the CUDA prelude (f16 and bf16 on sm_80 and later):
// FlashAttention-2's forward and its two backward passes (codegen/attention_prelude.cpp has the
// algorithm and the FFMA routines every other dtype runs). What makes them fast, as in
// FlashAttention-2's kernels:
// - fragments come from shared memory by ldmatrix (x4: four 8x8 matrices a load; .trans for the
//   operands read down a tile's columns); rows padded by 8 elements put the eight 16-byte rows
//   of each phase in eight different bank quads, at every head width;
// - tiles come from global memory by cp.async into two buffers: the next tile's copy runs
//   while this tile's products do;
// - scores live in base 2: s·scale·log2(e) once, then exp2 by the MUFU's ex2.approx (relative
//   error ~2^-22, far below the 16-bit rounding P and dS take before their next product);
// - masks cost only on the tiles that cross the causal diagonal or a tail; the others run
//   without a comparison.
#include "codegen/attention.h"

namespace kiln::codegen {

namespace {

constexpr std::string_view kMma = R"PRELUDE(
// ---- attention on tensor cores (codegen/attention_prelude_mma.cpp)
// (Helpers are templates, some with an unused parameter, so that a program that calls none of
// them neither warns of them nor hands their sm_80 instructions to an older arch.)
// mma.sync m16n8k16 with f32 accumulators. Fragment layouts (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"): lane = 4 g + t holds A's rows g and g + 8 at columns 2t, 2t + 1 (and + 8),
// B's column g at rows 2t, 2t + 1 (and + 8), and C's rows g and g + 8 at columns 2t, 2t + 1.
template <int DT> __device__ __forceinline__ void kiln_mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if (DT == 3)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <int DT> __device__ __forceinline__ uint16_t kiln_to16(float x) { return DT == 3 ? kiln_f2bf(x) : kiln_f2h(x); }
// Two floats rounded to 16 bits in one cvt, lo in the low half (the order of a fragment's pair).
template <int DT> __device__ __forceinline__ uint32_t kiln_pack2(float lo, float hi) {
  uint32_t r;
  if (DT == 3)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// max that propagates NaN (sm_80's max.NaN: one instruction where kiln_max_step takes three).
template <int = 0> __device__ __forceinline__ float kiln_max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
template <int = 0> __device__ __forceinline__ float kiln_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// The A fragment of columns [16 kc, 16 kc + 16) of a 16-row product held as C fragments (8
// columns each): what P (or dS) feeds its next matmul, rounded to 16 bits.
template <int DT, int N> __device__ __forceinline__ void kiln_c2a(uint32_t (&a)[4], const float (&c)[N][4], int kc) {
  a[0] = kiln_pack2<DT>(c[2 * kc][0], c[2 * kc][1]);
  a[1] = kiln_pack2<DT>(c[2 * kc][2], c[2 * kc][3]);
  a[2] = kiln_pack2<DT>(c[2 * kc + 1][0], c[2 * kc + 1][1]);
  a[3] = kiln_pack2<DT>(c[2 * kc + 1][2], c[2 * kc + 1][3]);
}

// Four 8x8 u16 matrices from shared memory, lane l giving the address of row l % 8 of matrix l / 8.
template <bool TRANS> __device__ __forceinline__ void kiln_ldsm4(uint32_t (&r)[4], const uint16_t* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
// The A fragment of rows [r, r + 16) and columns [c, c + 16) of a u16 tile T[.][stride].
template <int = 0> __device__ __forceinline__ void kiln_afrag(uint32_t (&a)[4], const uint16_t* t, int stride, int r, int c) {
  const int l = threadIdx.x % 32;
  kiln_ldsm4<false>(a, t + (r + (l & 15)) * stride + c + (l >> 4) * 8);
}
// B fragments of two 8-column blocks where B[k][n] = T[n0 + n][c + k] (a row of T per column:
// q kᵀ's k): b[0], b[1] for columns n0..n0+7, b[2], b[3] for n0+8..n0+15.
template <int = 0> __device__ __forceinline__ void kiln_bfrag_rows2(uint32_t (&b)[4], const uint16_t* t, int stride, int n0, int c) {
  const int l = threadIdx.x % 32;
  kiln_ldsm4<false>(b, t + (n0 + (l >> 4) * 8 + (l & 7)) * stride + c + ((l >> 3) & 1) * 8);
}
// B fragments of two 8-column blocks where B[k][n] = T[k0 + k][n0 + n] (a column of T per
// column: P v's v), by ldmatrix's transpose.
template <int = 0> __device__ __forceinline__ void kiln_bfrag_cols2(uint32_t (&b)[4], const uint16_t* t, int stride, int k0, int n0) {
  const int l = threadIdx.x % 32;
  kiln_ldsm4<true>(b, t + (k0 + (l & 15)) * stride + n0 + (l >> 4) * 8);
}

// Two products of a warp's 16 rows with a tile's NT x 8 rows, over KC chunks of 16 columns:
// x = X[row..] Bxᵀ and y = Y[row..] Byᵀ (the backward's scores and dO vᵀ, side by side).
template <int DT, int KC, int NT>
__device__ __forceinline__ void kiln_mma_pair(float (&x)[NT][4], float (&y)[NT][4], const uint16_t* X, const uint16_t* Y,
                                              const uint16_t* Bx, const uint16_t* By, int stride, int row) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[j][e] = y[j][e] = 0.f;
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    uint32_t xa[4], ya[4];
    kiln_afrag(xa, X, stride, row, kc * 16);
    kiln_afrag(ya, Y, stride, row, kc * 16);
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      uint32_t bb[4];
      kiln_bfrag_rows2(bb, Bx, stride, j * 8, kc * 16);
      kiln_mma16816<DT>(x[j], xa, bb[0], bb[1]);
      kiln_mma16816<DT>(x[j + 1], xa, bb[2], bb[3]);
      kiln_bfrag_rows2(bb, By, stride, j * 8, kc * 16);
      kiln_mma16816<DT>(y[j], ya, bb[0], bb[1]);
      kiln_mma16816<DT>(y[j + 1], ya, bb[2], bb[3]);
    }
  }
}
// acc += C T for MT blocks of a warp's 16 rows: each held as C fragments c (N blocks of 8 columns,
// rounded to 16 bits as A fragments) times the tile T's rows [0, 8 N), DT8 blocks of 8 columns;
// each B fragment read once for the MT blocks.
template <int DT, int MT, int N, int DT8>
__device__ __forceinline__ void kiln_mma_ct(float (&acc)[MT][DT8][4], const float (&c)[MT][N][4], const uint16_t* t, int stride) {
#pragma unroll
  for (int kc = 0; kc < N / 2; ++kc) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) kiln_c2a<DT>(a[mt], c[mt], kc);
#pragma unroll
    for (int d = 0; d < DT8; d += 2) {
      uint32_t bb[4];
      kiln_bfrag_cols2(bb, t, stride, kc * 16, d * 8);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        kiln_mma16816<DT>(acc[mt][d], a[mt], bb[0], bb[1]);
        kiln_mma16816<DT>(acc[mt][d + 1], a[mt], bb[2], bb[3]);
      }
    }
  }
}

// The same for one block of 16 rows.
template <int DT, int N, int DT8>
__device__ __forceinline__ void kiln_mma_ct1(float (&acc)[DT8][4], const float (&c)[N][4], const uint16_t* t, int stride) {
  kiln_mma_ct<DT, 1, N, DT8>(reinterpret_cast<float(&)[1][DT8][4]>(acc), reinterpret_cast<const float(&)[1][N][4]>(c), t, stride);
}

// rows [r0, r0 + R) of a [n, cols] u16 matrix into T[R][D + 8] (zero past n rows or cols
// columns): by cp.async, 16 bytes a copy (zero-filled past the ends), when the rows are 16-byte
// aligned; else by plain loads. The caller commits the copies and waits for them.
template <int R, int D>
__device__ __forceinline__ void kiln_attn_tile16(uint16_t* t, const uint16_t* m, int64_t r0, int64_t n, int64_t cols) {
  if (cols % 8 == 0 && ((unsigned long long)m & 15) == 0) {
    for (int i = threadIdx.x; i < R * D / 8; i += KILN_ATTN_THREADS) {
      const int r = i / (D / 8), c = i % (D / 8) * 8;
      const bool in = r0 + r < n && c < cols;
      const uint32_t dst = (uint32_t)__cvta_generic_to_shared(t + r * (D + 8) + c);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(in ? m + (r0 + r) * cols + c : m), "r"(in ? 16 : 0));
    }
    return;
  }
  for (int i = threadIdx.x; i < R * D; i += KILN_ATTN_THREADS) {
    const int r = i / D, c = i % D;
    t[r * (D + 8) + c] = (r0 + r < n && c < cols) ? m[(r0 + r) * cols + c] : (uint16_t)0;
  }
}
template <int = 0> __device__ __forceinline__ void kiln_cp_commit() { asm volatile("cp.async.commit_group;"); }
// Until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void kiln_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// A walk over key tiles whose k and v tiles sit in two buffers [k | v] (2 BN (D + 8) u16s each) at `bufs`
// (the forward, the dQ pass). kiln_kv_tile issues the copies of the tile at key k0 into a buffer;
// kiln_kv_step, at tile it of n, issues tile it + 1's copy into the other buffer (it was last
// read before the previous step's closing barrier) and waits for tile it's; the caller then
// synchronizes the block.
template <int BN, int D>
__device__ __forceinline__ void kiln_kv_tile(uint16_t* buf, const uint16_t* kb, const uint16_t* vb, int64_t k0, int64_t S, int64_t E,
                                             int64_t Ev) {
  kiln_attn_tile16<BN, D>(buf, kb, k0, S, E);
  kiln_attn_tile16<BN, D>(buf + BN * (D + 8), vb, k0, S, Ev);
}
template <int BN, int D>
__device__ __forceinline__ const uint16_t* kiln_kv_step(uint16_t* bufs, const uint16_t* kb, const uint16_t* vb, int it, int n_tiles, int64_t S,
                                                        int64_t E, int64_t Ev) {
  constexpr int BUF = 2 * BN * (D + 8);
  const uint16_t* now = bufs + (it & 1) * BUF;
  if (it + 1 < n_tiles) {
    kiln_kv_tile<BN, D>(bufs + ((it + 1) & 1) * BUF, kb, vb, (int64_t)it * BN + BN, S, E, Ev);
    kiln_cp_commit();
    kiln_cp_wait<1>();
  } else {
    kiln_cp_wait<0>();
  }
  return now;
}

// A 16-row block's results, rows r_lo and r_lo + 8 of a [rows, cols] u16 matrix: pairs of
// columns in one 32-bit store where cols is even (then every pair is aligned).
template <int DT, int DT8>
__device__ __forceinline__ void kiln_store_rows(uint16_t* m, const float (&acc)[DT8][4], int64_t r_lo, int64_t rows, int64_t cols, float mul0,
                                                float mul1) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = r_lo + 8 * h;
    if (r >= rows) continue;
    const float mul = h ? mul1 : mul0;
#pragma unroll
    for (int d = 0; d < DT8; ++d) {
      const int c = d * 8 + 2 * t;
      if (c >= cols) continue;
      const float lo = acc[d][2 * h] * mul, hi = acc[d][2 * h + 1] * mul;
      if (cols % 2 == 0)
        *(uint32_t*)(m + r * cols + c) = kiln_pack2<DT>(lo, hi);
      else {
        m[r * cols + c] = kiln_to16<DT>(lo);
        if (c + 1 < cols) m[r * cols + c + 1] = kiln_to16<DT>(hi);
      }
    }
  }
}

#define KILN_LOG2E 1.4426950408889634f

// Forward: block (b, tile of 64 MT queries), 4 warps of 16 MT query rows: each k and v fragment
// read from shared memory feeds MT products (FlashAttention-2's 128-row tiles at MT = 2). q's
// fragments stay in registers for the whole walk where QREG (narrow heads), else they are read
// from q's tile in shared memory; tiles of BN keys and values in two buffers [k | v]. Blocks take
// the query tiles from the last: under a causal mask the longest walks start first.
template <int DT, int D, int BN, int MT, bool QREG, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_fwd_mma(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                                  const uint16_t* __restrict__ v, uint16_t* __restrict__ out, float* __restrict__ lse,
                                                  int64_t L, int64_t S, int64_t E, int64_t Ev, double scale_) {
  constexpr int BM = 64 * MT, KC = D / 16, NT = BN / 8, DT8 = D / 8, ST = D + 8;
  static_assert(!QREG || BM <= 4 * BN, "q's tile passes through the key buffers");
  const float sl2 = (float)scale_ * KILN_LOG2E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const int64_t tiles = (L + BM - 1) / BM, nb = gridDim.x / tiles;
  const int64_t b = blockIdx.x % nb, q0 = (tiles - 1 - blockIdx.x / nb) * BM;
  uint16_t* Qs = (uint16_t*)kiln_attn_smem;
  uint16_t* buf = QREG ? Qs : Qs + BM * ST;
  const uint16_t *kb = k + b * S * E, *vb = v + b * S * Ev;
  const int wr = warp * 16 * MT;  // this warp's first row in the tile
  kiln_attn_tile16<BM, D>(Qs, q + b * L * E, q0, L, E);
  uint32_t qa[QREG ? MT : 1][QREG ? KC : 1][4];
  if (QREG) {
    kiln_cp_commit();
    kiln_cp_wait<0>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < (QREG ? MT : 1); ++mt)
#pragma unroll
      for (int kc = 0; kc < (QREG ? KC : 1); ++kc) kiln_afrag(qa[mt][kc], Qs, ST, wr + mt * 16, kc * 16);
    __syncthreads();
  }
  const int64_t r_lo = q0 + wr + lane / 4;  // block mt's rows: r_lo + 16 mt and + 8
  float o[MT][DT8][4], m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m[mt][0] = m[mt][1] = -KILN_INFF;
    l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
    for (int d = 0; d < DT8; ++d) o[mt][d][0] = o[mt][d][1] = o[mt][d][2] = o[mt][d][3] = 0.f;
  }
  const int64_t key_end = CAUSAL ? (q0 + BM < S ? q0 + BM : S) : S;
  const int n_tiles = (int)((key_end + BN - 1) / BN);
  if (n_tiles > 0) kiln_kv_tile<BN, D>(buf, kb, vb, 0, S, E, Ev);
  kiln_cp_commit();  // (with q's tile where it is not in registers)
  for (int it = 0; it < n_tiles; ++it) {
    const int64_t k0 = (int64_t)it * BN;
    const uint16_t* Ks = kiln_kv_step<BN, D>(buf, kb, vb, it, n_tiles, S, E, Ev);
    const uint16_t* Vs = Ks + BN * ST;
    __syncthreads();
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      uint32_t qf[MT][4];
      if (!QREG)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) kiln_afrag(qf[mt], Qs, ST, wr + mt * 16, kc * 16);
#pragma unroll
      for (int j = 0; j < NT; j += 2) {
        uint32_t bb[4];
        kiln_bfrag_rows2(bb, Ks, ST, j * 8, kc * 16);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint32_t(&a)[4] = QREG ? qa[QREG ? mt : 0][QREG ? kc : 0] : qf[mt];
          kiln_mma16816<DT>(s[mt][j], a, bb[0], bb[1]);
          kiln_mma16816<DT>(s[mt][j + 1], a, bb[2], bb[3]);
        }
      }
    }
    // Scores to base 2 and the rows' max. A positive scale (the usual one; a literal here, so
    // this branch folds) keeps the order: the max is taken over the raw scores and scaled once,
    // and each weight is exp2 of one FFMA (the kernels compile without FMA contraction).
    // Masked only where this warp's rows meet the diagonal or the keys' end.
    const bool scale_first = !(sl2 > 0.f);
    if (scale_first)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][j][e] *= sl2;
    if (k0 + BN > S || (CAUSAL && k0 + BN - 1 > q0 + wr))
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t kj = k0 + j * 8 + 2 * t + (e & 1), qi = r_lo + 16 * mt + (e < 2 ? 0 : 8);
            if (kj >= S || (CAUSAL && kj > qi)) s[mt][j][e] = -KILN_INFF;
          }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      // The rows' running max over the 4 lanes of a row, the sum of their weights.
      float mx[2] = {-KILN_INFF, -KILN_INFF};
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) mx[e >> 1] = kiln_max_nan(mx[e >> 1], s[mt][j][e]);
      float base[2], corr[2], sum[2] = {0.f, 0.f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = kiln_max_nan(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = kiln_max_nan(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        mx[h] = kiln_max_nan(m[mt][h], scale_first ? mx[h] : mx[h] * sl2);
        base[h] = mx[h] == -KILN_INFF ? 0.f : mx[h];
        corr[h] = kiln_ex2(m[mt][h] - base[h]);
        m[mt][h] = mx[h];
      }
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = s[mt][j][e], nb = -base[e >> 1];
          s[mt][j][e] = kiln_ex2(scale_first ? x + nb : fmaf(x, sl2, nb));
          sum[e >> 1] += s[mt][j][e];
        }
      for (int h = 0; h < 2; ++h) {
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
        l[mt][h] = fmaf(l[mt][h], corr[h], sum[h]);
      }
      // Rescaled only when a row's max grew somewhere in the warp (after the first tiles, rarely):
      // multiplying by 1 would change no bit.
      if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f))
#pragma unroll
        for (int d = 0; d < DT8; ++d) {
          o[mt][d][0] *= corr[0];
          o[mt][d][1] *= corr[0];
          o[mt][d][2] *= corr[1];
          o[mt][d][3] *= corr[1];
        }
    }
    kiln_mma_ct<DT, MT, NT, DT8>(o, s, Vs, ST);  // O += P V
    __syncthreads();                             // before the next copy overwrites these buffers
  }
  if (n_tiles == 0) kiln_cp_wait<0>();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int64_t lo = r_lo + 16 * mt;
    kiln_store_rows<DT, DT8>(out + b * L * Ev, o[mt], lo, L, Ev, l[mt][0] > 0.f ? 1.f / l[mt][0] : 0.f,
                             l[mt][1] > 0.f ? 1.f / l[mt][1] : 0.f);
    if (t == 0)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t qi = lo + 8 * h;
        // lse = (m + log2 l) ln 2, m in base 2
        if (qi < L) lse[b * L + qi] = l[mt][h] > 0.f ? m[mt][h] * 0.6931471805599453f + kiln_log(l[mt][h]) : -KILN_INFF;
      }
  }
}

// Backward on tensor cores, dK and dV: block (b, tile of 64 keys), 4 warps of 16 keys; k and v
// in shared memory, the query tiles (BM rows of q and dO, their lse and delta) in two buffers;
// per warp Pᵀ = exp2(k qᵀ·scale·log2 e - lse·log2 e), dPᵀ = v dOᵀ, dSᵀ = Pᵀ (dPᵀ - delta), then
// dV += Pᵀ dO and dK += dSᵀ q, the 16-bit Pᵀ and dSᵀ from the accumulators (as
// FlashAttention-2's backward). Wide heads walk 32-query tiles, so that dK and dV (2 x head/2
// floats a thread) and the scores fit in registers.
template <int DT, int D, int BM, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_bwd_kv_mma(const uint16_t* __restrict__ dout, const uint16_t* __restrict__ q,
                                                     const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                                                     const float* __restrict__ lse, const float* __restrict__ delta,
                                                     uint16_t* __restrict__ dk, uint16_t* __restrict__ dv, int64_t L, int64_t S,
                                                     int64_t E, int64_t Ev, double scale_) {
  constexpr int BN = 64, KC = D / 16, NT = BM / 8, DT8 = D / 8, ST = D + 8;
  constexpr int BUF = 2 * BM * ST + 4 * BM;  // u16s of a buffer: q, dO, then lse and delta as floats
  const float sl2 = (float)scale_ * KILN_LOG2E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const int64_t tiles = (S + BN - 1) / BN, b = blockIdx.x / tiles, k0 = (blockIdx.x % tiles) * BN;
  uint16_t* Ks = (uint16_t*)kiln_attn_smem;
  uint16_t* Vs = Ks + BN * ST;
  uint16_t* bufs = Vs + BN * ST;
  const uint16_t *qb = q + b * L * E, *ob = dout + b * L * Ev;
  kiln_kv_tile<BN, D>(Ks, k + b * S * E, v + b * S * Ev, k0, S, E, Ev);
  const int64_t first = CAUSAL ? k0 / BM * BM : 0;
  const int n_tiles = L > first ? (int)((L - first + BM - 1) / BM) : 0;
  // Query tile it into its buffer; says whether a row of it attends to nothing (lse -inf).
  auto load = [&](int it) {
    uint16_t* Qs = bufs + (it & 1) * BUF;
    uint16_t* Os = Qs + BM * ST;
    float* Ls = (float*)(Os + BM * ST);
    float* Ds = Ls + BM;
    const int64_t q0 = first + (int64_t)it * BM;
    kiln_attn_tile16<BM, D>(Qs, qb, q0, L, E);
    kiln_attn_tile16<BM, D>(Os, ob, q0, L, Ev);
    int dead = 0;
    for (int r = threadIdx.x; r < BM; r += KILN_ATTN_THREADS) {
      const bool in = q0 + r < L;
      const float x = in ? lse[b * L + q0 + r] : -KILN_INFF;
      Ls[r] = x * KILN_LOG2E;
      Ds[r] = in ? delta[b * L + q0 + r] : 0.f;
      dead |= in && x == -KILN_INFF;
    }
    return dead;
  };
  int dead_next = n_tiles > 0 ? load(0) : 0;
  kiln_cp_commit();
  float gk[DT8][4], gv[DT8][4];
#pragma unroll
  for (int d = 0; d < DT8; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) gk[d][e] = gv[d][e] = 0.f;
  const int64_t key_lo = k0 + warp * 16 + lane / 4, key_hi = key_lo + 8;
  for (int it = 0; it < n_tiles; ++it) {
    const int64_t q0 = first + (int64_t)it * BM;
    uint16_t* Qs = bufs + (it & 1) * BUF;
    uint16_t* Os = Qs + BM * ST;
    const float* Ls = (const float*)(Os + BM * ST);
    const float* Ds = Ls + BM;
    const int dead_now = dead_next;
    if (it + 1 < n_tiles) {
      dead_next = load(it + 1);
      kiln_cp_commit();
      kiln_cp_wait<1>();
    } else {
      kiln_cp_wait<0>();
    }
    const bool dead = __syncthreads_or(dead_now);
    if (dead) {
      // Rows that attend to nothing (lse -inf: NaN queries) add nothing, as in the reference:
      // their q and dO rows are zeroed, so that their zero weights do not meet a NaN.
      for (int i = threadIdx.x; i < BM * ST; i += KILN_ATTN_THREADS)
        if (Ls[i / ST] == -KILN_INFF) Qs[i] = Os[i] = 0;
      __syncthreads();
    }
    float p[NT][4], dp[NT][4];
    kiln_mma_pair<DT, KC, NT>(p, dp, Ks, Vs, Qs, Os, ST, warp * 16);
    // Pᵀ and dSᵀ: rows are keys (key_lo, key_hi), columns queries. Keys past S need no mask:
    // their rows of dK and dV are never stored.
    if (dead || q0 + BM > L || (CAUSAL && k0 + warp * 16 + 15 > q0)) {
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = j * 8 + 2 * t + (e & 1);
          const int64_t qi = q0 + c, kj = e < 2 ? key_lo : key_hi;
          const bool live = qi < L && !(CAUSAL && kj > qi) && Ls[c] != -KILN_INFF;
          const float pe = live ? kiln_ex2(fmaf(p[j][e], sl2, -Ls[c])) : 0.f;
          p[j][e] = pe;
          dp[j][e] = live ? pe * (dp[j][e] - Ds[c]) : 0.f;
        }
    } else {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float2 ls = *(const float2*)(Ls + j * 8 + 2 * t), ds = *(const float2*)(Ds + j * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pe = kiln_ex2(fmaf(p[j][e], sl2, -(e & 1 ? ls.y : ls.x)));
          p[j][e] = pe;
          dp[j][e] = pe * (dp[j][e] - (e & 1 ? ds.y : ds.x));
        }
      }
    }
    kiln_mma_ct1<DT, NT, DT8>(gv, p, Os, ST);   // dV += Pᵀ dO
    kiln_mma_ct1<DT, NT, DT8>(gk, dp, Qs, ST);  // dK += dSᵀ q
    __syncthreads();                           // before the next copy overwrites this buffer
  }
  if (n_tiles == 0) kiln_cp_wait<0>();
  kiln_store_rows<DT, DT8>(dk + b * S * E, gk, key_lo, S, E, (float)scale_, (float)scale_);
  kiln_store_rows<DT, DT8>(dv + b * S * Ev, gv, key_lo, S, Ev, 1.f, 1.f);
}

// Backward on tensor cores, dQ: block (b, tile of 64 queries), 4 warps of 16 queries; q and dO
// in shared memory, tiles of BN keys and values in two buffers; per warp P = exp2(q kᵀ·scale·log2 e
// - lse·log2 e), dP = dO vᵀ, dS = P (dP - delta), dQ += dS k.
template <int DT, int D, int BN, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_bwd_q_mma(const uint16_t* __restrict__ dout, const uint16_t* __restrict__ q,
                                                    const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                                                    const float* __restrict__ lse, const float* __restrict__ delta,
                                                    uint16_t* __restrict__ dq, int64_t L, int64_t S, int64_t E, int64_t Ev,
                                                    double scale_) {
  constexpr int BM = 64, KC = D / 16, NT = BN / 8, DT8 = D / 8, ST = D + 8;
  const float sl2 = (float)scale_ * KILN_LOG2E;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4;
  const int64_t tiles = (L + BM - 1) / BM, b = blockIdx.x / tiles, q0 = (blockIdx.x % tiles) * BM;
  uint16_t* Qs = (uint16_t*)kiln_attn_smem;
  uint16_t* Os = Qs + BM * ST;
  uint16_t* bufs = Os + BM * ST;
  const uint16_t *kb = k + b * S * E, *vb = v + b * S * Ev;
  kiln_attn_tile16<BM, D>(Qs, q + b * L * E, q0, L, E);
  kiln_attn_tile16<BM, D>(Os, dout + b * L * Ev, q0, L, Ev);
  const int64_t r_lo = q0 + warp * 16 + lane / 4, r_hi = r_lo + 8;
  const float l_lo = r_lo < L ? lse[b * L + r_lo] * KILN_LOG2E : -KILN_INFF, l_hi = r_hi < L ? lse[b * L + r_hi] * KILN_LOG2E : -KILN_INFF;
  const float d_lo = r_lo < L ? delta[b * L + r_lo] : 0.f, d_hi = r_hi < L ? delta[b * L + r_hi] : 0.f;
  const bool dead_rows = l_lo == -KILN_INFF || l_hi == -KILN_INFF;  // past L, or attending to nothing
  float gq[DT8][4];
#pragma unroll
  for (int d = 0; d < DT8; ++d) gq[d][0] = gq[d][1] = gq[d][2] = gq[d][3] = 0.f;
  const int64_t key_end = CAUSAL ? (q0 + BM < S ? q0 + BM : S) : S;
  const int n_tiles = (int)((key_end + BN - 1) / BN);
  if (n_tiles > 0) kiln_kv_tile<BN, D>(bufs, kb, vb, 0, S, E, Ev);
  kiln_cp_commit();
  for (int it = 0; it < n_tiles; ++it) {
    const int64_t k0 = (int64_t)it * BN;
    const uint16_t* Ks = kiln_kv_step<BN, D>(bufs, kb, vb, it, n_tiles, S, E, Ev);
    const uint16_t* Vs = Ks + BN * ST;
    __syncthreads();
    float p[NT][4], dp[NT][4];
    kiln_mma_pair<DT, KC, NT>(p, dp, Qs, Os, Ks, Vs, ST, warp * 16);
    if (dead_rows || k0 + BN > S || (CAUSAL && k0 + BN - 1 > q0 + warp * 16)) {
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t kj = k0 + j * 8 + 2 * t + (e & 1), qi = e < 2 ? r_lo : r_hi;
          const float l = e < 2 ? l_lo : l_hi;
          const bool live = qi < L && kj < S && !(CAUSAL && kj > qi) && l != -KILN_INFF;
          const float pe = live ? kiln_ex2(fmaf(p[j][e], sl2, -l)) : 0.f;
          dp[j][e] = live ? pe * (dp[j][e] - (e < 2 ? d_lo : d_hi)) : 0.f;
        }
    } else {
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pe = kiln_ex2(fmaf(p[j][e], sl2, -(e < 2 ? l_lo : l_hi)));
          dp[j][e] = pe * (dp[j][e] - (e < 2 ? d_lo : d_hi));
        }
    }
    kiln_mma_ct1<DT, NT, DT8>(gq, dp, Ks, ST);  // dQ += dS k
    __syncthreads();                           // before the next copy overwrites these buffers
  }
  if (n_tiles == 0) kiln_cp_wait<0>();
  kiln_store_rows<DT, DT8>(dq + b * L * E, gq, r_lo, L, E, (float)scale_, (float)scale_);
}
)PRELUDE";

}  // namespace

std::string_view cuda_attention_mma_prelude() { return kMma; }

}  // namespace kiln::codegen
