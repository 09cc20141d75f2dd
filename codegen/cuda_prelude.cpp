// The prelude of every generated CUDA module: the CUDA target's ABI (typedefs, the macros
// codegen/prelude_math.h asks for, f16 through PTX, the device error record), then the math
// shared with the CPU (codegen/prelude_math.cpp), then what only a GPU needs: 16-byte vector
// types and the combines of accumulators across a warp or a block. No #include: NVRTC
// compiles it alone (it provides expf, __shfl_*_sync, atomicCAS, ... with no header), in
// CUDA 11.8 and 13 alike.
#include <string>

#include "codegen/attention.h"
#include "codegen/cuda_emitter.h"
#include "codegen/prelude_math.h"
#include "codegen/sort.h"
#include "codegen/sorted_scatter.h"

namespace kiln::codegen {

namespace {

constexpr std::string_view kAbi = R"PRELUDE(// ---- kiln CUDA prelude (codegen/cuda_prelude.cpp)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

// ---- what codegen/prelude_math.h asks of a target
#define KILN_FN __device__ __forceinline__  // inline, not static: NVRTC warns of unused static functions
#define KILN_F32_AS_U32(x) __float_as_uint(x)
#define KILN_U32_AS_F32(u) __uint_as_float(u)
#define KILN_F64_AS_I64(x) __double_as_longlong(x)
#define KILN_I64_AS_F64(i) __longlong_as_double(i)
// NVRTC has no INFINITY / NAN (no <cmath>): the IEEE bit patterns.
#define KILN_INFF __int_as_float(0x7f800000)
#define KILN_NANF __int_as_float(0x7fc00000)
#define KILN_INF __longlong_as_double(0x7ff0000000000000LL)
#define KILN_NAN __longlong_as_double(0x7ff8000000000000LL)
#define KILN_LIBMF(fn) fn##f
#define KILN_LIBM(fn) fn
// CUDA's expf/logf/log1pf/tanhf are accurate (a few ulp) and fast: no polynomials here.
#define KILN_F32_LIBM_TRANSCENDENTALS 1

// 1/x correctly rounded: the hardware's reciprocal with a Newton step, a few instructions where
// a division takes a dozen and a slow path (Welford's running mean divides per element).
KILN_FN float kiln_rcp(float x) { return __frcp_rn(x); }
KILN_FN double kiln_rcp(double x) { return __drcp_rn(x); }
// 1 / (1 + e) for sigmoid and silu (e = exp(-x) >= 0, inf or NaN) by div.full.f32 (2 ulp over
// the whole range, subnormal quotients kept: Triton's division): the IEEE one is MUFU.RCP, two
// Newton steps and a range check with a slow-path call, ~10 instructions an element where the
// pointwise row [16384,4096] issues ~60 and waits on issue, not memory (ncu, bench/NOTES.md
// stop 40). f64 divides exactly.
KILN_FN float kiln_inv_1p(float e) {
  float r;
  asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(1.0f), "f"(1.0f + e));
  return r;
}
KILN_FN double kiln_inv_1p(double e) { return 1.0 / (1.0 + e); }

// The approximate f32 forms of kernels whose every result is 16-bit (Target::
// approx_math_for_16bit_results), where a bf16 rounding is 2^15 f32 ulps: exp by ex2.approx
// (2 + 1.2|x| ulp); a division as a times the correctly rounded 1/b (1.5 ulp; __frcp_rn, an
// intrinsic NVVM knows is pure), so that a divisor the same for a whole row (softmax's sum) has
// its reciprocal computed once, outside the row's loop, where div.approx took one MUFU.RCP an
// element (the multi-function unit runs at a quarter of the FMA pipe's rate; rcp.approx in asm
// stayed per element too); a reciprocal that is per element (sigmoid's, silu's) by rcp.approx
// (__fdividef: 2 ulp), which returns 0 for a divisor past 2^126: those take the IEEE one.
KILN_FN float kiln_exp_approx(float x) { return __expf(x); }
KILN_FN float kiln_div_approx(float a, float b) { return a * kiln_rcp(b); }
KILN_FN float kiln_rcp_approx(float b) { return fabsf(b) < 0x1p126f ? __fdividef(1.0f, b) : 1.0f / b; }

// ---- f16: the hardware's conversions (round to nearest even, as ir/half.h; a NaN stays a
// NaN, though its payload may differ from the CPU's)
KILN_FN float kiln_h2f(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
KILN_FN uint16_t kiln_f2h(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// bf16 too from sm_80: one cvt where the portable rounding (prelude_math) takes six integer
// instructions, twice per element of a 16-bit result (its rounding, then its store); the same
// bits but a NaN's, which comes out as the canonical quiet NaN.
#if __CUDA_ARCH__ >= 800
#define KILN_HARDWARE_F2BF 1
KILN_FN uint16_t kiln_f2bf(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif

// ---- the device error record (codegen/cuda_emitter.h): the first out-of-range gather or
// scatter index of a launch, read by the host after it synchronizes. Reports go where
// `kiln_error_slot` points: the module's own `kiln_error` until the host points it at a
// slot of one array per compiled graph (so one read after a run checks every kernel).
struct kiln_error_record {
  int flag;        // 1 once an error was recorded
  int site;        // which check (LoweredGraph::index_checks)
  long long index; // the offending index
  long long size;  // the size of the dimension it indexed
};
extern "C" {
__device__ kiln_error_record kiln_error;
__device__ kiln_error_record* kiln_error_slot = &kiln_error;
}
KILN_FN void kiln_report_index_error_at(int64_t index, int64_t size, int64_t site) {
  // Only the first reporter writes (site, index, size); the kernel's end orders them before
  // the host's read.
  kiln_error_record* e = kiln_error_slot;
  if (atomicCAS(&e->flag, 0, 1) == 0) {
    e->site = (int)site;
    e->index = index;
    e->size = size;
  }
}

)PRELUDE";

constexpr std::string_view kGpuTail = R"PRELUDE(
// ---- the GPU's own
// N elements of T as one aligned unit, so a load or store of it is one 8- or 16-byte access
// (the vectorized grid-stride loops of codegen/cuda_emitter.cpp).
template <class T, int N> struct __align__(sizeof(T) * N) kiln_vec { T v[N]; };

// Combine ops of accumulators across threads (the same steps as a thread's accumulate:
// integer sums and products wrap, a NaN wins a max/min).
struct kiln_sum_op {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ double operator()(double a, double b) const { return a + b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return kiln_wrap_add(a, b); }
};
struct kiln_prod_op {
  __device__ float operator()(float a, float b) const { return a * b; }
  __device__ double operator()(double a, double b) const { return a * b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return kiln_wrap_mul(a, b); }
};
struct kiln_max_op {
  template <class T> __device__ T operator()(T a, T b) const { return kiln_max_step(a, b); }
};
struct kiln_min_op {
  template <class T> __device__ T operator()(T a, T b) const { return kiln_min_step(a, b); }
};

// Lane 0 of the warp gets op over the values of lanes [0, n) (n <= 32), through a fixed tree
// (lane i takes lane i + 16, then i + 8, ...): the same grouping every run, so float sums
// are deterministic. Every lane of the warp must call it.
template <class T, class Op> KILN_FN T kiln_warp_tree(T v, Op op, int n) {
  const int lane = threadIdx.x & 31;
  for (int o = 16; o > 0; o >>= 1) {
    T other = __shfl_down_sync(0xffffffffu, v, o);
    if (lane + o < n) v = op(v, other);
  }
  return v;
}
// Every lane gets op over the warp's 32 values (lane 0's result, broadcast).
template <class T, class Op> KILN_FN T kiln_warp_combine(T v, Op op) {
  return __shfl_sync(0xffffffffu, kiln_warp_tree(v, op, 32), 0);
}
// Every thread gets op over the block's values: each warp's tree, the warps' partials in
// shared memory, the first warp's tree over them, broadcast through scratch[32]. `scratch` is
// __shared__ T[33]; blockDim.x is a multiple of 32. Two barriers make a later combine on the
// same scratch safe: a warp writes its partial only after the first warp read the last ones
// (it passed the second barrier), and the first warp writes scratch[32] only after everyone
// read the last one (it passed the next combine's first barrier).
template <class T, class Op> KILN_FN T kiln_block_combine(T v, Op op, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = kiln_warp_tree(v, op, 32);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = kiln_warp_tree(lane < warps ? scratch[lane] : v, op, warps);
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  return scratch[32];
}

// Argmax partials (value, index) over disjoint index sets: the reference's rule, a NaN above
// everything (the first NaN among NaNs), then the larger value, ties to the smaller index.
template <class T> KILN_FN void kiln_argmax_merge(T& v, int64_t& i, T w, int64_t j) {
  const bool wn = w != w, vn = v != v;
  const bool better = wn ? (!vn || j < i) : (!vn && (w > v || (w == v && j < i)));
  if (better) {
    v = w;
    i = j;
  }
}
// Pairs combined by merge(a, b, a2, b2) across a warp or a block, in the same fixed trees as
// kiln_warp_tree / kiln_block_combine (and with the same barriers): argmax's (value, index),
// online softmax's (sum, max). Every lane or thread ends with the combined pair.
template <class A, class B, class Merge> KILN_FN void kiln_warp_pair_tree(A& a, B& b, int n, Merge merge) {
  const int lane = threadIdx.x & 31;
  for (int o = 16; o > 0; o >>= 1) {
    A a2 = __shfl_down_sync(0xffffffffu, a, o);
    B b2 = __shfl_down_sync(0xffffffffu, b, o);
    if (lane + o < n) merge(a, b, a2, b2);
  }
}
template <class A, class B, class Merge> KILN_FN void kiln_warp_pair(A& a, B& b, Merge merge) {
  kiln_warp_pair_tree(a, b, 32, merge);
  a = __shfl_sync(0xffffffffu, a, 0);
  b = __shfl_sync(0xffffffffu, b, 0);
}
// `sa` and `sb` are __shared__ arrays of 33.
template <class A, class B, class Merge> KILN_FN void kiln_block_pair(A& a, B& b, A* sa, B* sb, Merge merge) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  kiln_warp_pair_tree(a, b, 32, merge);
  if (lane == 0) {
    sa[warp] = a;
    sb[warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    if (lane < warps) {
      a = sa[lane];
      b = sb[lane];
    }
    kiln_warp_pair_tree(a, b, warps, merge);
    if (lane == 0) {
      sa[32] = a;
      sb[32] = b;
    }
  }
  __syncthreads();
  a = sa[32];
  b = sb[32];
}
// Triples (a, b, c), as pairs: Welford's (m2, mean, n).
template <class T, class Merge> KILN_FN void kiln_warp_triple_tree(T& a, T& b, T& c, int n, Merge merge) {
  const int lane = threadIdx.x & 31;
  for (int o = 16; o > 0; o >>= 1) {
    T a2 = __shfl_down_sync(0xffffffffu, a, o), b2 = __shfl_down_sync(0xffffffffu, b, o), c2 = __shfl_down_sync(0xffffffffu, c, o);
    if (lane + o < n) merge(a, b, c, a2, b2, c2);
  }
}
template <class T, class Merge> KILN_FN void kiln_warp_triple(T& a, T& b, T& c, Merge merge) {
  kiln_warp_triple_tree(a, b, c, 32, merge);
  a = __shfl_sync(0xffffffffu, a, 0);
  b = __shfl_sync(0xffffffffu, b, 0);
  c = __shfl_sync(0xffffffffu, c, 0);
}
// `sa`, `sb`, `sc` are __shared__ T[33] each.
template <class T, class Merge> KILN_FN void kiln_block_triple(T& a, T& b, T& c, T* sa, T* sb, T* sc, Merge merge) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  kiln_warp_triple_tree(a, b, c, 32, merge);
  if (lane == 0) {
    sa[warp] = a;
    sb[warp] = b;
    sc[warp] = c;
  }
  __syncthreads();
  if (warp == 0) {
    if (lane < warps) {
      a = sa[lane];
      b = sb[lane];
      c = sc[lane];
    }
    kiln_warp_triple_tree(a, b, c, warps, merge);
    if (lane == 0) {
      sa[32] = a;
      sb[32] = b;
      sc[32] = c;
    }
  }
  __syncthreads();
  a = sa[32];
  b = sb[32];
  c = sc[32];
}
struct kiln_welford_merge_op {
  template <class T> __device__ void operator()(T& m2, T& mean, T& n, T m2b, T meanb, T nb) const {
    kiln_welford_merge(m2, mean, n, m2b, meanb, nb);
  }
};
struct kiln_argmax_merge_op {
  template <class T> __device__ void operator()(T& v, int64_t& i, T w, int64_t j) const { kiln_argmax_merge(v, i, w, j); }
};
struct kiln_sumexp_merge_op {
  template <class T> __device__ void operator()(T& s, T& m, T s2, T m2) const { kiln_sumexp_merge(s, m, s2, m2); }
};

// ---- thread-block clusters (sm_90): a row shared by the blocks of a cluster
// (Stmt::cluster). Each block combines its threads as above (the result in scratch[32]); then
// every block reads the cluster's partials from the others' shared memory (distributed shared
// memory: mapa gives the address of the same variable in block `rank`, ld.shared::cluster reads
// it) and folds them in rank order, so that every block ends with the same bits. The second
// cluster barrier keeps a block from overwriting scratch[32] (or exiting) while another still
// reads it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
KILN_FN unsigned kiln_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
KILN_FN void kiln_cluster_sync() { asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory"); }
KILN_FN unsigned kiln_cluster_addr(const void* p, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
  return r;
}
KILN_FN float kiln_cluster_read(const float* p, unsigned rank) {
  unsigned x;
  asm volatile("ld.shared::cluster.b32 %0, [%1];" : "=r"(x) : "r"(kiln_cluster_addr(p, rank)) : "memory");
  return __uint_as_float(x);
}
KILN_FN double kiln_cluster_read(const double* p, unsigned rank) {
  unsigned long long x;
  asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(x) : "r"(kiln_cluster_addr(p, rank)) : "memory");
  return __longlong_as_double((long long)x);
}
KILN_FN int64_t kiln_cluster_read(const int64_t* p, unsigned rank) {
  unsigned long long x;
  asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(x) : "r"(kiln_cluster_addr(p, rank)) : "memory");
  return (int64_t)x;
}
#else
// Never scheduled below sm_90 (codegen/schedule.cpp); these keep the prelude compiling there.
KILN_FN unsigned kiln_cluster_rank() { return 0; }
KILN_FN void kiln_cluster_sync() { __trap(); }
template <class T> KILN_FN T kiln_cluster_read(const T* p, unsigned) { __trap(); return *p; }
#endif
template <class T, class Op> KILN_FN T kiln_cluster_combine(T v, Op op, T* scratch, int blocks) {
  kiln_block_combine(v, op, scratch);
  kiln_cluster_sync();
  T r = kiln_cluster_read(&scratch[32], 0);
  for (int k = 1; k < blocks; ++k) r = op(r, kiln_cluster_read(&scratch[32], (unsigned)k));
  kiln_cluster_sync();
  return r;
}
template <class A, class B, class Merge> KILN_FN void kiln_cluster_pair(A& a, B& b, A* sa, B* sb, Merge merge, int blocks) {
  kiln_block_pair(a, b, sa, sb, merge);
  kiln_cluster_sync();
  a = kiln_cluster_read(&sa[32], 0);
  b = kiln_cluster_read(&sb[32], 0);
  for (int k = 1; k < blocks; ++k) merge(a, b, kiln_cluster_read(&sa[32], (unsigned)k), kiln_cluster_read(&sb[32], (unsigned)k));
  kiln_cluster_sync();
}
template <class T, class Merge> KILN_FN void kiln_cluster_triple(T& a, T& b, T& c, T* sa, T* sb, T* sc, Merge merge, int blocks) {
  kiln_block_triple(a, b, c, sa, sb, sc, merge);
  kiln_cluster_sync();
  a = kiln_cluster_read(&sa[32], 0);
  b = kiln_cluster_read(&sb[32], 0);
  c = kiln_cluster_read(&sc[32], 0);
  for (int k = 1; k < blocks; ++k)
    merge(a, b, c, kiln_cluster_read(&sa[32], (unsigned)k), kiln_cluster_read(&sb[32], (unsigned)k), kiln_cluster_read(&sc[32], (unsigned)k));
  kiln_cluster_sync();
}
)PRELUDE";

}  // namespace

std::string_view cuda_prelude() {
  static const std::string text = std::string(kAbi) + std::string(prelude_math()) + std::string(kGpuTail) +
                                 std::string(cuda_attention_prelude()) + std::string(cuda_sort_prelude()) +
                                 std::string(cuda_sorted_scatter_prelude()) + "\n// ---- end of prelude\n";
  return text;
}

}  // namespace kiln::codegen
