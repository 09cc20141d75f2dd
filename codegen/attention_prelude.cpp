// The attention routines of the preludes (codegen/attention.h): FlashAttention's forward and
// its two backward passes, written once per target as templates that an attention kernel
// calls with the sizes and tiles its schedule chose. The algorithm (Dao et al., FlashAttention-2)
// never holds a query's [S] weights in memory: a tile of queries walks the key tiles keeping a
// running max m, a running sum l of exp(s - m) and an output rescaled whenever m grows; the
// forward saves lse = m + log(l) per query, and the backward recomputes each weight as
// exp(s - lse). Every output element is computed by one thread (one task on the CPU) in a fixed
// order: results are deterministic, and nothing is accumulated with atomics (dQ has a pass of
// its own instead of FlashAttention-2's atomic adds).
//
// A query that attends to no key (S = 0) has l = 0: its output is 0 and its lse -inf.
#include "codegen/attention.h"

namespace kiln::codegen {

namespace {

// Storage and compute types by kiln's dtype code (AttentionKernel::dtype_code): f32, f64,
// f16, bf16; 16-bit floats are computed in f32.
constexpr std::string_view kCommon = R"PRELUDE(
// ---- attention (codegen/attention_prelude.cpp)
template <int DT> struct kiln_attn_type;
template <> struct kiln_attn_type<0> {
  typedef float S; typedef float A;
  KILN_ATTN_MEMBER A ld(const S* p, int64_t i) { return p[i]; }
  KILN_ATTN_MEMBER void st(S* p, int64_t i, A v) { p[i] = v; }
};
template <> struct kiln_attn_type<1> {
  typedef double S; typedef double A;
  KILN_ATTN_MEMBER A ld(const S* p, int64_t i) { return p[i]; }
  KILN_ATTN_MEMBER void st(S* p, int64_t i, A v) { p[i] = v; }
};
template <> struct kiln_attn_type<2> {
  typedef uint16_t S; typedef float A;
  KILN_ATTN_MEMBER A ld(const S* p, int64_t i) { return kiln_h2f(p[i]); }
  KILN_ATTN_MEMBER void st(S* p, int64_t i, A v) { p[i] = kiln_f2h(v); }
};
template <> struct kiln_attn_type<3> {
  typedef uint16_t S; typedef float A;
  KILN_ATTN_MEMBER A ld(const S* p, int64_t i) { return kiln_bf2f(p[i]); }
  KILN_ATTN_MEMBER void st(S* p, int64_t i, A v) { p[i] = kiln_f2bf(v); }
};
)PRELUDE";

// CUDA: a block of 128 threads (16 x 8) per tile. Tiles of q, k, v (and dO) sit in dynamic
// shared memory in the compute type, rows padded by 16 bytes (KILN_ATTN_W elements) so that a
// thread reads 16 bytes of a row at once and a quarter-warp's 8 rows hit 8 bank quads; each thread computes an (rows x 16-strided columns)
// micro-tile of a score tile with FFMA, and a row's max and sum combine over its 16 threads by
// shuffles (a fixed tree: the same bits every run).
constexpr std::string_view kCuda = R"PRELUDE(
extern __shared__ __align__(16) unsigned char kiln_attn_smem[];
#define KILN_ATTN_THREADS 128

// Rows of the tiles (and of P) are padded by 16 bytes' worth of elements (KILN_ATTN_W: 4 floats,
// 2 doubles): each row stays 16-byte aligned, so a thread reads W elements of a row in one
// 16-byte load, and the 8 rows a quarter-warp reads fall in 8 different bank quads.
template <class A> struct kiln_attn_vec;
template <> struct kiln_attn_vec<float> {
  static __device__ __forceinline__ void ld(float (&o)[4], const float* p) {
    const float4 v = *(const float4*)p;
    o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
  }
};
template <> struct kiln_attn_vec<double> {
  static __device__ __forceinline__ void ld(double (&o)[2], const double* p) {
    const double2 v = *(const double2*)p;
    o[0] = v.x, o[1] = v.y;
  }
};
#define KILN_ATTN_W(A) ((int)(16 / sizeof(A)))

// rows [r0, r0 + R) of a [n, cols] matrix into T[R][D + W] (zero past n rows or cols columns).
template <int DT, int R, int D>
__device__ __forceinline__ void kiln_attn_tile(typename kiln_attn_type<DT>::A* t, const typename kiln_attn_type<DT>::S* m,
                                               int64_t r0, int64_t n, int64_t cols) {
  typedef kiln_attn_type<DT> T;
  constexpr int DS = D + KILN_ATTN_W(typename T::A);
  for (int i = threadIdx.x; i < R * D; i += KILN_ATTN_THREADS) {
    int r = i / D, c = i % D;
    t[r * DS + c] = (r0 + r < n && c < cols) ? T::ld(m, (r0 + r) * cols + c) : (typename T::A)0;
  }
}

// The same by cp.async (sm_80 and later) where the storage type is the compute type (f32, f64):
// every copy of the tile is in flight at once, where the plain loop above keeps a few loads in
// flight and waits on each batch before its shared stores. 16 bytes a copy where the rows are
// 16-byte aligned, else one element a copy; zero-filled past n rows or cols columns. The caller
// commits the copies (kiln_attn_commit) and waits for them (kiln_attn_wait); elsewhere (16-bit
// storage, older GPUs) this is the plain loop and the commits and waits do nothing.
template <int DT, int R, int D>
__device__ __forceinline__ void kiln_attn_tile_async(typename kiln_attn_type<DT>::A* t, const typename kiln_attn_type<DT>::S* m,
                                                     int64_t r0, int64_t n, int64_t cols) {
  typedef kiln_attn_type<DT> T;
  typedef typename T::A A;
#if __CUDA_ARCH__ >= 800
  if constexpr (sizeof(typename T::S) == sizeof(A)) {
    constexpr int W = KILN_ATTN_W(A), DS = D + W;
    if (cols % W == 0 && ((unsigned long long)m & 15) == 0) {
      for (int i = threadIdx.x; i < R * D / W; i += KILN_ATTN_THREADS) {
        const int r = i / (D / W), c = i % (D / W) * W;
        const bool in = r0 + r < n && c < cols;
        const uint32_t dst = (uint32_t)__cvta_generic_to_shared(t + r * DS + c);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(in ? m + (r0 + r) * cols + c : m), "r"(in ? 16 : 0));
      }
    } else {
      for (int i = threadIdx.x; i < R * D; i += KILN_ATTN_THREADS) {
        const int r = i / D, c = i % D;
        const bool in = r0 + r < n && c < cols;
        const uint32_t dst = (uint32_t)__cvta_generic_to_shared(t + r * DS + c);
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(in ? m + (r0 + r) * cols + c : m), "n"((int)sizeof(A)),
                     "r"(in ? (int)sizeof(A) : 0));
      }
    }
    return;
  }
#endif
  kiln_attn_tile<DT, R, D>(t, m, r0, n, cols);
}
__device__ __forceinline__ void kiln_attn_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;");
#endif
}
// Until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void kiln_attn_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

// a * b + c rounded once: the kernels compile with -fmad=false (no contraction anywhere else), so
// the tiles' products say so themselves; a multiply and an add would take two instructions.
__device__ __forceinline__ float kiln_attn_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double kiln_attn_fma(double a, double b, double c) { return __fma_rn(a, b, c); }

// acc[i][j] = sum_e X[ty * RM + i][e] * Y[tx + 16 j][e] over the tiles' padded rows, e in order.
template <class A, int RM, int CN, int D>
__device__ __forceinline__ void kiln_attn_dots(A (&acc)[RM][CN], const A* X, const A* Y) {
  constexpr int W = KILN_ATTN_W(A), DS = D + W;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < CN; ++j) acc[i][j] = 0;
#pragma unroll 2
  for (int e = 0; e < D; e += W) {
    A x[RM][W], y[CN][W];
#pragma unroll
    for (int i = 0; i < RM; ++i) kiln_attn_vec<A>::ld(x[i], X + (ty * RM + i) * DS + e);
#pragma unroll
    for (int j = 0; j < CN; ++j) kiln_attn_vec<A>::ld(y[j], Y + (tx + 16 * j) * DS + e);
#pragma unroll
    for (int w = 0; w < W; ++w)
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) acc[i][j] = kiln_attn_fma(x[i][w], y[j][w], acc[i][j]);
  }
}

// Over the 16 threads of a row group (consecutive lanes), in a fixed tree.
template <class A> __device__ __forceinline__ A kiln_attn_row_max(A v) {
  for (int o = 8; o > 0; o >>= 1) v = kiln_max_step(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <class A> __device__ __forceinline__ A kiln_attn_row_sum(A v) {
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[i][d] += sum_j P[ty * RM + i][j] T[j][tx + 16 d] over a tile's BN rows, j in order: the
// weights times v (the forward), dS times k (the dQ pass). P's rows are read W at a time.
template <class A, int RM, int DN, int BN, int D>
__device__ __forceinline__ void kiln_attn_rows_times_tile(A (&acc)[RM][DN], const A* P, const A* T) {
  constexpr int W = KILN_ATTN_W(A), DS = D + W, PS = BN + W;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int j0 = 0; j0 < BN; j0 += W) {
    A pr[RM][W];
#pragma unroll
    for (int i = 0; i < RM; ++i) kiln_attn_vec<A>::ld(pr[i], P + (ty * RM + i) * PS + j0);
#pragma unroll
    for (int w = 0; w < W; ++w) {
      A t[DN];
#pragma unroll
      for (int d = 0; d < DN; ++d) t[d] = T[(j0 + w) * DS + tx + 16 * d];
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int d = 0; d < DN; ++d) acc[i][d] = kiln_attn_fma(pr[i][w], t[d], acc[i][d]);
    }
  }
}

// A query tile's weights for one key tile (the forward): s holds its scores; each row's running
// max m and sum l and its output o are updated, and the weights go to P. MASK: the tile crosses
// the causal diagonal or the keys' end (tiles inside both skip the comparisons).
template <class A, int RM, int CN, int DN, int PS, bool CAUSAL, bool MASK>
__device__ __forceinline__ void kiln_attn_online_softmax(A (&s)[RM][CN], A (&m)[RM], A (&l)[RM], A (&o)[RM][DN], A* Ps, int64_t q0,
                                                         int64_t k0, int64_t S, A scale) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t qi = q0 + ty * RM + i;
    A mx = m[i];
#pragma unroll
    for (int j = 0; j < CN; ++j) {
      const int64_t kj = k0 + tx + 16 * j;
      s[i][j] = MASK && (kj >= S || (CAUSAL && kj > qi)) ? -(A)KILN_INF : s[i][j] * scale;
      mx = kiln_max_step(mx, s[i][j]);
    }
    mx = kiln_attn_row_max(mx);
    // Nothing attended yet (mx = -inf): weights 0 and no rescale.
    const A base = mx == -(A)KILN_INF ? (A)0 : mx;
    const A corr = kiln_exp(m[i] - base);
    A sum = 0;
#pragma unroll
    for (int j = 0; j < CN; ++j) {
      A p = kiln_exp(s[i][j] - base);
      sum += p;
      Ps[(ty * RM + i) * PS + tx + 16 * j] = p;
    }
    l[i] = l[i] * corr + kiln_attn_row_sum(sum);
    m[i] = mx;
#pragma unroll
    for (int d = 0; d < DN; ++d) o[i][d] *= corr;
  }
}

// Forward: block (b, query tile) of BM rows; D: the head dims E and Ev padded to 16. The k and v
// tiles share one buffer each and are copied a half-step ahead: the next k tile's copy runs
// while this tile's weights and weights-times-v are computed, the next v tile's while the next
// scores are (copy groups in order: q and k0, v0, k1, v1, ...).
template <int DT, int BM, int BN, int D, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_fwd(const typename kiln_attn_type<DT>::S* __restrict__ q,
                                              const typename kiln_attn_type<DT>::S* __restrict__ k,
                                              const typename kiln_attn_type<DT>::S* __restrict__ v,
                                              typename kiln_attn_type<DT>::S* __restrict__ out, typename kiln_attn_type<DT>::A* __restrict__ lse,
                                              int64_t L, int64_t S, int64_t E, int64_t Ev, double scale_) {
  typedef kiln_attn_type<DT> T;
  typedef typename T::A A;
  constexpr int RM = BM / 8, CN = BN / 16, DN = D / 16, W = KILN_ATTN_W(A), DS = D + W, PS = BN + W;
  const A scale = (A)scale_;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = (L + BM - 1) / BM, b = blockIdx.x / tiles, q0 = (blockIdx.x % tiles) * BM;
  A* Qs = (A*)kiln_attn_smem;
  A* Ks = Qs + BM * DS;
  A* Vs = Ks + BN * DS;
  A* Ps = Vs + BN * DS;  // [BM][PS]
  const typename T::S* kb = k + b * S * E;
  const typename T::S* vb = v + b * S * Ev;
  A o[RM][DN], m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -(A)KILN_INF;
    l[i] = 0;
#pragma unroll
    for (int d = 0; d < DN; ++d) o[i][d] = 0;
  }
  // Causal: key tiles past the tile's last query hold only masked keys.
  const int64_t key_end = CAUSAL ? (q0 + BM < S ? q0 + BM : S) : S;
  kiln_attn_tile_async<DT, BM, D>(Qs, q + b * L * E, q0, L, E);
  if (key_end > 0) kiln_attn_tile_async<DT, BN, D>(Ks, kb, 0, S, E);
  kiln_attn_commit();
  if (key_end > 0) kiln_attn_tile_async<DT, BN, D>(Vs, vb, 0, S, Ev);
  kiln_attn_commit();
  for (int64_t k0 = 0; k0 < key_end; k0 += BN) {
    kiln_attn_wait<1>();  // q and this k tile (this v tile may still be in flight)
    __syncthreads();
    A s[RM][CN];
    kiln_attn_dots<A, RM, CN, D>(s, Qs, Ks);
    __syncthreads();  // every reader of this k tile is done
    if (k0 + BN < key_end) kiln_attn_tile_async<DT, BN, D>(Ks, kb, k0 + BN, S, E);
    kiln_attn_commit();
    // Tiles inside the keys and (causal) wholly at or below the tile's first query need no mask.
    if (k0 + BN > S || (CAUSAL && k0 + BN - 1 > q0))
      kiln_attn_online_softmax<A, RM, CN, DN, PS, CAUSAL, true>(s, m, l, o, Ps, q0, k0, S, scale);
    else
      kiln_attn_online_softmax<A, RM, CN, DN, PS, CAUSAL, false>(s, m, l, o, Ps, q0, k0, S, scale);
    kiln_attn_wait<1>();  // this v tile (the next k tile may still be in flight)
    __syncthreads();
    kiln_attn_rows_times_tile<A, RM, DN, BN, D>(o, Ps, Vs);
    __syncthreads();  // every reader of this v tile and of P is done
    if (k0 + BN < key_end) kiln_attn_tile_async<DT, BN, D>(Vs, vb, k0 + BN, S, Ev);
    kiln_attn_commit();
  }
  kiln_attn_wait<0>();
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t qi = q0 + ty * RM + i;
    if (qi >= L) continue;
    const A inv = l[i] > 0 ? (A)1 / l[i] : (A)0;
#pragma unroll
    for (int d = 0; d < DN; ++d)
      if (tx + 16 * d < Ev) T::st(out, (b * L + qi) * Ev + tx + 16 * d, o[i][d] * inv);
    if (tx == 0) lse[b * L + qi] = l[i] > 0 ? m[i] + kiln_log(l[i]) : -(A)KILN_INF;
  }
}

// The weights and their gradient for a (query tile, key tile) pair, into P (as dS) in shared
// memory: P = exp(s * scale - lse), dS = P * (dO vᵀ - delta), 0 where masked.
template <class A, int BM, int BN, int D, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_ds(A* Ps, const A* Qs, const A* Ks, const A* Vs, const A* dOs, const A* Ls, const A* Ds,
                                             int64_t q0, int64_t k0, int64_t L, int64_t S, A scale) {
  constexpr int RM = BM / 8, CN = BN / 16, PS = BN + KILN_ATTN_W(A);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  A s[RM][CN], dp[RM][CN];
  kiln_attn_dots<A, RM, CN, D>(s, Qs, Ks);
  kiln_attn_dots<A, RM, CN, D>(dp, dOs, Vs);
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = ty * RM + i;
    const int64_t qi = q0 + r;
#pragma unroll
    for (int j = 0; j < CN; ++j) {
      const int64_t kj = k0 + tx + 16 * j;
      const bool live = qi < L && kj < S && !(CAUSAL && kj > qi) && Ls[r] != -(A)KILN_INF;
      const A p = live ? kiln_exp(s[i][j] * scale - Ls[r]) : (A)0;
      Ps[r * PS + tx + 16 * j] = p;
      // Exactly 0 where not live: a row that attends to nothing may hold NaN (its delta, its dO).
      Ps[BM * PS + r * PS + tx + 16 * j] = live ? p * (dp[i][j] - Ds[r]) : (A)0;
    }
  }
}

// The rows of lse and delta of query tile q0 into Ls, Ds.
template <class A, int BM>
__device__ __forceinline__ void kiln_attn_rows(A* Ls, A* Ds, const A* lse, const A* delta, int64_t base, int64_t q0, int64_t L) {
  for (int r = threadIdx.x; r < BM; r += KILN_ATTN_THREADS) {
    Ls[r] = q0 + r < L ? lse[base + q0 + r] : -(A)KILN_INF;
    Ds[r] = q0 + r < L ? delta[base + q0 + r] : (A)0;
  }
}

// Backward, dK and dV: block (b, key tile) of BN keys walks the query tiles.
template <int DT, int BM, int BN, int D, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_bwd_kv(const typename kiln_attn_type<DT>::S* __restrict__ dout,
                                                 const typename kiln_attn_type<DT>::S* __restrict__ q,
                                                 const typename kiln_attn_type<DT>::S* __restrict__ k,
                                                 const typename kiln_attn_type<DT>::S* __restrict__ v,
                                                 const typename kiln_attn_type<DT>::A* __restrict__ lse, const typename kiln_attn_type<DT>::A* __restrict__ delta,
                                                 typename kiln_attn_type<DT>::S* __restrict__ dk,
                                                 typename kiln_attn_type<DT>::S* __restrict__ dv, int64_t L, int64_t S, int64_t E,
                                                 int64_t Ev, double scale_) {
  typedef kiln_attn_type<DT> T;
  typedef typename T::A A;
  constexpr int KN = BN / 8, DN = D / 16, W = KILN_ATTN_W(A), DS = D + W, PS = BN + W;
  const A scale = (A)scale_;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = (S + BN - 1) / BN, b = blockIdx.x / tiles, k0 = (blockIdx.x % tiles) * BN;
  A* Ks = (A*)kiln_attn_smem;
  A* Vs = Ks + BN * DS;
  A* Qs = Vs + BN * DS;
  A* dOs = Qs + BM * DS;
  A* Ps = dOs + BM * DS;  // P, then dS: [2][BM][PS]
  A* Ls = Ps + 2 * BM * PS;
  A* Ds = Ls + BM;
  kiln_attn_tile_async<DT, BN, D>(Ks, k + b * S * E, k0, S, E);
  kiln_attn_tile_async<DT, BN, D>(Vs, v + b * S * Ev, k0, S, Ev);
  A gk[KN][DN], gv[KN][DN];
#pragma unroll
  for (int i = 0; i < KN; ++i)
#pragma unroll
    for (int d = 0; d < DN; ++d) gk[i][d] = gv[i][d] = 0;
  // Causal: query tiles before the first key of this tile see none of its keys.
  const int64_t first = CAUSAL ? k0 / BM * BM : 0;
  for (int64_t q0 = first; q0 < L; q0 += BM) {
    __syncthreads();
    kiln_attn_tile_async<DT, BM, D>(Qs, q + b * L * E, q0, L, E);
    kiln_attn_tile_async<DT, BM, D>(dOs, dout + b * L * Ev, q0, L, Ev);
    kiln_attn_commit();
    kiln_attn_rows<A, BM>(Ls, Ds, lse, delta, b * L, q0, L);
    kiln_attn_wait<0>();
    __syncthreads();
    kiln_attn_ds<A, BM, BN, D, CAUSAL>(Ps, Qs, Ks, Vs, dOs, Ls, Ds, q0, k0, L, S, scale);
    __syncthreads();
    // dV[key][d] += P[r][key] dO[r][d]; dK[key][d] += dS[r][key] q[r][d].
    const A* dSs = Ps + BM * PS;
#pragma unroll 2
    for (int r = 0; r < BM; ++r) {
      // A row that attends to nothing (lse -inf: past L, or NaN queries) adds nothing, as in the
      // reference: its zero weights must not meet its q or dO (0 * NaN).
      if (Ls[r] == -(A)KILN_INF) continue;
      A go[DN], qq[DN];
#pragma unroll
      for (int d = 0; d < DN; ++d) {
        go[d] = dOs[r * DS + tx + 16 * d];
        qq[d] = Qs[r * DS + tx + 16 * d];
      }
      A pr[KN], sr[KN];  // this thread's keys' P and dS of row r, W at a time where KN allows
#pragma unroll
      for (int i = 0; i < KN; i += (KN % W == 0 ? W : 1)) {
        if (KN % W == 0) {
          kiln_attn_vec<A>::ld(*(A(*)[W])(pr + i), Ps + r * PS + ty * KN + i);
          kiln_attn_vec<A>::ld(*(A(*)[W])(sr + i), dSs + r * PS + ty * KN + i);
        } else {
          pr[i] = Ps[r * PS + ty * KN + i];
          sr[i] = dSs[r * PS + ty * KN + i];
        }
      }
#pragma unroll
      for (int i = 0; i < KN; ++i) {
        const A p = pr[i], ds = sr[i];
#pragma unroll
        for (int d = 0; d < DN; ++d) {
          gv[i][d] = kiln_attn_fma(p, go[d], gv[i][d]);
          gk[i][d] = kiln_attn_fma(ds, qq[d], gk[i][d]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < KN; ++i) {
    const int64_t kj = k0 + ty * KN + i;
    if (kj >= S) continue;
#pragma unroll
    for (int d = 0; d < DN; ++d) {
      const int c = tx + 16 * d;
      if (c < E) T::st(dk, (b * S + kj) * E + c, gk[i][d] * scale);
      if (c < Ev) T::st(dv, (b * S + kj) * Ev + c, gv[i][d]);
    }
  }
}

// Backward, dQ: block (b, query tile) of BM rows walks the key tiles.
template <int DT, int BM, int BN, int D, bool CAUSAL>
__device__ __forceinline__ void kiln_attn_bwd_q(const typename kiln_attn_type<DT>::S* __restrict__ dout,
                                                const typename kiln_attn_type<DT>::S* __restrict__ q,
                                                const typename kiln_attn_type<DT>::S* __restrict__ k,
                                                const typename kiln_attn_type<DT>::S* __restrict__ v,
                                                const typename kiln_attn_type<DT>::A* __restrict__ lse, const typename kiln_attn_type<DT>::A* __restrict__ delta,
                                                typename kiln_attn_type<DT>::S* __restrict__ dq, int64_t L, int64_t S, int64_t E,
                                                int64_t Ev, double scale_) {
  typedef kiln_attn_type<DT> T;
  typedef typename T::A A;
  constexpr int RM = BM / 8, DN = D / 16, W = KILN_ATTN_W(A), DS = D + W, PS = BN + W;
  const A scale = (A)scale_;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = (L + BM - 1) / BM, b = blockIdx.x / tiles, q0 = (blockIdx.x % tiles) * BM;
  A* Qs = (A*)kiln_attn_smem;
  A* dOs = Qs + BM * DS;
  A* Ks = dOs + BM * DS;
  A* Vs = Ks + BN * DS;
  A* Ps = Vs + BN * DS;
  A* Ls = Ps + 2 * BM * PS;
  A* Ds = Ls + BM;
  kiln_attn_tile_async<DT, BM, D>(Qs, q + b * L * E, q0, L, E);
  kiln_attn_tile_async<DT, BM, D>(dOs, dout + b * L * Ev, q0, L, Ev);
  kiln_attn_commit();
  kiln_attn_rows<A, BM>(Ls, Ds, lse, delta, b * L, q0, L);
  A g[RM][DN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int d = 0; d < DN; ++d) g[i][d] = 0;
  const int64_t key_end = CAUSAL ? (q0 + BM < S ? q0 + BM : S) : S;
  for (int64_t k0 = 0; k0 < key_end; k0 += BN) {
    __syncthreads();
    kiln_attn_tile_async<DT, BN, D>(Ks, k + b * S * E, k0, S, E);
    kiln_attn_tile_async<DT, BN, D>(Vs, v + b * S * Ev, k0, S, Ev);
    kiln_attn_commit();
    kiln_attn_wait<0>();
    __syncthreads();
    kiln_attn_ds<A, BM, BN, D, CAUSAL>(Ps, Qs, Ks, Vs, dOs, Ls, Ds, q0, k0, L, S, scale);
    __syncthreads();
    kiln_attn_rows_times_tile<A, RM, DN, BN, D>(g, Ps + BM * PS, Ks);  // dQ += dS k
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t qi = q0 + ty * RM + i;
    if (qi >= L) continue;
#pragma unroll
    for (int d = 0; d < DN; ++d)
      if (tx + 16 * d < E) T::st(dq, (b * L + qi) * E + tx + 16 * d, g[i][d] * scale);
  }
}
)PRELUDE";

// CPU: one task of the pool per (batch, tile); a task works in buffers on its stack, in the
// compute type, and its loops are plain ones for clang's vectorizer. BM = BN = 32 and heads of
// at most 256 (codegen/attention.h). A tile's scores (and dO vᵀ) are computed a query row at a
// time against the other tile transposed, the inner loop along its 32 rows: broadcast-FMAs into
// a vector of 32 scores, where a dot product per (query, key) pair ended in a horizontal sum
// each; the row's exps are then one loop of their own, which vectorizes (f32), where one exp
// per pair inside the loop that accumulates the output did not ([1,12,1024,64] causal on 2
// cores: forward 60 -> 35 ms, forward and backward 215 -> 142).
constexpr std::string_view kCpu = R"PRELUDE(
#define KILN_ATTN_T 32
#define KILN_ATTN_HEAD 256

template <int DT>
static void kiln_attn_tile_cpu(typename kiln_attn_type<DT>::A* t, const typename kiln_attn_type<DT>::S* m, int64_t r0, int64_t n,
                               int64_t cols) {
  for (int64_t r = 0; r < KILN_ATTN_T; ++r)
    for (int64_t c = 0; c < cols; ++c) t[r * KILN_ATTN_HEAD + c] = r0 + r < n ? kiln_attn_type<DT>::ld(m, (r0 + r) * cols + c) : 0;
}

// rows [r0, r0 + T) of a [n, cols] matrix transposed into t[c * T + r] (zero past n rows).
template <int DT>
static void kiln_attn_tile_t_cpu(typename kiln_attn_type<DT>::A* t, const typename kiln_attn_type<DT>::S* m, int64_t r0, int64_t n,
                                 int64_t cols) {
  for (int64_t r = 0; r < KILN_ATTN_T; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * KILN_ATTN_T + r] = r0 + r < n ? kiln_attn_type<DT>::ld(m, (r0 + r) * cols + c) : 0;
}

// out[j] = sum_e x[e] * yt[e * T + j] for the T rows j of a transposed tile, e in order.
template <class A>
static inline void kiln_attn_row_dots_cpu(A* out, const A* x, const A* yt, int64_t n) {
  for (int64_t j = 0; j < KILN_ATTN_T; ++j) out[j] = 0;
  for (int64_t e = 0; e < n; ++e) {
    const A xe = x[e];
    const A* y = yt + e * KILN_ATTN_T;
    for (int64_t j = 0; j < KILN_ATTN_T; ++j) out[j] += xe * y[j];
  }
}

template <int DT, bool CAUSAL>
static void kiln_attn_fwd_cpu(const typename kiln_attn_type<DT>::S* q, const typename kiln_attn_type<DT>::S* k,
                              const typename kiln_attn_type<DT>::S* v, typename kiln_attn_type<DT>::S* out, typename kiln_attn_type<DT>::A* lse, int64_t batch,
                              int64_t L, int64_t S, int64_t E, int64_t Ev, double scale_, int64_t grain) {
  typedef typename kiln_attn_type<DT>::A A;
  const int64_t tiles = (L + KILN_ATTN_T - 1) / KILN_ATTN_T;
  kiln_parallel(batch * tiles, grain, [&](int64_t begin, int64_t end) {
    A Qs[KILN_ATTN_T * KILN_ATTN_HEAD], Kt[KILN_ATTN_HEAD * KILN_ATTN_T], Vs[KILN_ATTN_T * KILN_ATTN_HEAD];
    A o[KILN_ATTN_T * KILN_ATTN_HEAD], m[KILN_ATTN_T], l[KILN_ATTN_T], s[KILN_ATTN_T];
    const A scale = (A)scale_;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / tiles, q0 = task % tiles * KILN_ATTN_T;
      kiln_attn_tile_cpu<DT>(Qs, q + b * L * E, q0, L, E);
      for (int64_t i = 0; i < KILN_ATTN_T; ++i) {
        m[i] = -(A)KILN_INF;
        l[i] = 0;
        for (int64_t d = 0; d < Ev; ++d) o[i * KILN_ATTN_HEAD + d] = 0;
      }
      const int64_t key_end = CAUSAL ? (q0 + KILN_ATTN_T < S ? q0 + KILN_ATTN_T : S) : S;
      for (int64_t k0 = 0; k0 < key_end; k0 += KILN_ATTN_T) {
        kiln_attn_tile_t_cpu<DT>(Kt, k + b * S * E, k0, S, E);
        kiln_attn_tile_cpu<DT>(Vs, v + b * S * Ev, k0, S, Ev);
        for (int64_t i = 0; i < KILN_ATTN_T && q0 + i < L; ++i) {
          A mx = m[i];
          kiln_attn_row_dots_cpu(s, Qs + i * KILN_ATTN_HEAD, Kt, E);
          for (int64_t j = 0; j < KILN_ATTN_T; ++j) {
            const int64_t kj = k0 + j;
            s[j] = (kj >= S || (CAUSAL && kj > q0 + i)) ? -(A)KILN_INF : s[j] * scale;
            mx = kiln_max_step(mx, s[j]);
          }
          const A base = mx == -(A)KILN_INF ? (A)0 : mx;
          const A corr = kiln_exp(m[i] - base);
          A sum = 0;
          A* oi = o + i * KILN_ATTN_HEAD;
          for (int64_t d = 0; d < Ev; ++d) oi[d] *= corr;
          for (int64_t j = 0; j < KILN_ATTN_T; ++j) s[j] = kiln_exp(s[j] - base);  // the weights, a vector loop
          for (int64_t j = 0; j < KILN_ATTN_T; ++j) {
            const A p = s[j];
            sum += p;
            if (p != 0)
              for (int64_t d = 0; d < Ev; ++d) oi[d] += p * Vs[j * KILN_ATTN_HEAD + d];
          }
          l[i] = l[i] * corr + sum;
          m[i] = mx;
        }
      }
      for (int64_t i = 0; i < KILN_ATTN_T && q0 + i < L; ++i) {
        const A inv = l[i] > 0 ? (A)1 / l[i] : (A)0;
        for (int64_t d = 0; d < Ev; ++d) kiln_attn_type<DT>::st(out, (b * L + q0 + i) * Ev + d, o[i * KILN_ATTN_HEAD + d] * inv);
        lse[b * L + q0 + i] = l[i] > 0 ? m[i] + kiln_log(l[i]) : -(A)KILN_INF;
      }
    }
  });
}

// Backward. KV (dk, dv non-null): a task per (batch, key tile) walks the queries; Q (dq
// non-null): a task per (batch, query tile) walks the keys. Both recompute P and dS.
template <int DT, bool CAUSAL>
static void kiln_attn_bwd_cpu(const typename kiln_attn_type<DT>::S* dout, const typename kiln_attn_type<DT>::S* q,
                              const typename kiln_attn_type<DT>::S* k, const typename kiln_attn_type<DT>::S* v,
                              const typename kiln_attn_type<DT>::A* lse, const typename kiln_attn_type<DT>::A* delta, typename kiln_attn_type<DT>::S* dq, typename kiln_attn_type<DT>::S* dk,
                              typename kiln_attn_type<DT>::S* dv, int64_t batch, int64_t L, int64_t S, int64_t E, int64_t Ev,
                              double scale_, int64_t grain) {
  typedef typename kiln_attn_type<DT>::A A;
  const bool kv = dk != 0;
  const int64_t tiles = ((kv ? S : L) + KILN_ATTN_T - 1) / KILN_ATTN_T;
  kiln_parallel(batch * tiles, grain, [&](int64_t begin, int64_t end) {
    A Qs[KILN_ATTN_T * KILN_ATTN_HEAD], dOs[KILN_ATTN_T * KILN_ATTN_HEAD], Ks[KILN_ATTN_T * KILN_ATTN_HEAD];
    A Kt[KILN_ATTN_HEAD * KILN_ATTN_T], Vt[KILN_ATTN_HEAD * KILN_ATTN_T], s[KILN_ATTN_T], dp[KILN_ATTN_T];
    A g1[KILN_ATTN_T * KILN_ATTN_HEAD], g2[KILN_ATTN_T * KILN_ATTN_HEAD];
    const A scale = (A)scale_;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / tiles, t0 = task % tiles * KILN_ATTN_T;
      for (int64_t x = 0; x < KILN_ATTN_T * KILN_ATTN_HEAD; ++x) g1[x] = g2[x] = 0;
      // The other side's tiles: all queries (causal: from the tile's first key) or all keys
      // (causal: up to the tile's last query).
      const int64_t o0 = kv && CAUSAL ? t0 : 0;
      const int64_t o_end = kv ? L : (CAUSAL ? (t0 + KILN_ATTN_T < S ? t0 + KILN_ATTN_T : S) : S);
      if (kv) {
        kiln_attn_tile_t_cpu<DT>(Kt, k + b * S * E, t0, S, E);
        kiln_attn_tile_t_cpu<DT>(Vt, v + b * S * Ev, t0, S, Ev);
      } else {
        kiln_attn_tile_cpu<DT>(Qs, q + b * L * E, t0, L, E);
        kiln_attn_tile_cpu<DT>(dOs, dout + b * L * Ev, t0, L, Ev);
      }
      for (int64_t u0 = o0; u0 < o_end; u0 += KILN_ATTN_T) {
        if (kv) {
          kiln_attn_tile_cpu<DT>(Qs, q + b * L * E, u0, L, E);
          kiln_attn_tile_cpu<DT>(dOs, dout + b * L * Ev, u0, L, Ev);
        } else {
          kiln_attn_tile_cpu<DT>(Ks, k + b * S * E, u0, S, E);
          kiln_attn_tile_t_cpu<DT>(Kt, k + b * S * E, u0, S, E);
          kiln_attn_tile_t_cpu<DT>(Vt, v + b * S * Ev, u0, S, Ev);
        }
        const int64_t qb = kv ? u0 : t0, kb = kv ? t0 : u0;
        for (int64_t i = 0; i < KILN_ATTN_T && qb + i < L; ++i) {
          const A li = lse[b * L + qb + i], di = delta[b * L + qb + i];
          if (li == -(A)KILN_INF) continue;
          kiln_attn_row_dots_cpu(s, Qs + i * KILN_ATTN_HEAD, Kt, E);
          kiln_attn_row_dots_cpu(dp, dOs + i * KILN_ATTN_HEAD, Vt, Ev);
          // The weights and their gradients, vector loops: 0 where masked.
          for (int64_t j = 0; j < KILN_ATTN_T; ++j) {
            const bool live = kb + j < S && !(CAUSAL && kb + j > qb + i);
            s[j] = live ? kiln_exp(s[j] * scale - li) : (A)0;
          }
          for (int64_t j = 0; j < KILN_ATTN_T; ++j) dp[j] = s[j] * (dp[j] - di);
          for (int64_t j = 0; j < KILN_ATTN_T && kb + j < S; ++j) {
            if (CAUSAL && kb + j > qb + i) continue;
            const A p = s[j];
            const A ds = dp[j];
            if (kv) {
              for (int64_t d = 0; d < Ev; ++d) g2[j * KILN_ATTN_HEAD + d] += p * dOs[i * KILN_ATTN_HEAD + d];
              for (int64_t e = 0; e < E; ++e) g1[j * KILN_ATTN_HEAD + e] += ds * Qs[i * KILN_ATTN_HEAD + e];
            } else {
              for (int64_t e = 0; e < E; ++e) g1[i * KILN_ATTN_HEAD + e] += ds * Ks[j * KILN_ATTN_HEAD + e];
            }
          }
        }
      }
      const int64_t n = kv ? S : L;
      for (int64_t r = 0; r < KILN_ATTN_T && t0 + r < n; ++r) {
        for (int64_t e = 0; e < E; ++e)
          kiln_attn_type<DT>::st(kv ? dk : dq, (b * n + t0 + r) * E + e, g1[r * KILN_ATTN_HEAD + e] * scale);
        if (kv)
          for (int64_t d = 0; d < Ev; ++d) kiln_attn_type<DT>::st(dv, (b * S + t0 + r) * Ev + d, g2[r * KILN_ATTN_HEAD + d]);
      }
    }
  });
}
)PRELUDE";

}  // namespace

std::string_view cuda_attention_prelude() {
  static const std::string text =
      "\n#define KILN_ATTN_MEMBER static __device__ __forceinline__" + std::string(kCommon) + std::string(kCuda) +
      std::string(cuda_attention_mma_prelude());
  return text;
}

std::string_view cpp_attention_prelude() {
  static const std::string text = "\n#define KILN_ATTN_MEMBER static inline" + std::string(kCommon) + std::string(kCpu);
  return text;
}

}  // namespace kiln::codegen
