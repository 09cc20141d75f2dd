// The sort routines of each target's prelude (codegen/sort.h): a row's (value, index) pairs put
// in order, NaN above every number, equal values by index, the first k written out.
#include <string>

#include "codegen/sort.h"

namespace kiln::codegen {

namespace {

// Storage type S, the type K values compare in (f16/bf16 as float, narrow integers as int64),
// and the order itself.
constexpr std::string_view kCommon = R"PRELUDE(
// ---- sort and topk (codegen/sort_prelude.cpp)
template <int DT> struct kiln_sort_type;
template <> struct kiln_sort_type<0> { typedef float S; typedef float K; KILN_SORT_MEMBER K key(S v) { return v; } };
template <> struct kiln_sort_type<1> { typedef double S; typedef double K; KILN_SORT_MEMBER K key(S v) { return v; } };
template <> struct kiln_sort_type<2> { typedef uint16_t S; typedef float K; KILN_SORT_MEMBER K key(S v) { return kiln_h2f(v); } };
template <> struct kiln_sort_type<3> { typedef uint16_t S; typedef float K; KILN_SORT_MEMBER K key(S v) { return kiln_bf2f(v); } };
template <> struct kiln_sort_type<4> { typedef int64_t S; typedef int64_t K; KILN_SORT_MEMBER K key(S v) { return v; } };
template <> struct kiln_sort_type<5> { typedef int32_t S; typedef int64_t K; KILN_SORT_MEMBER K key(S v) { return v; } };
template <> struct kiln_sort_type<6> { typedef uint8_t S; typedef int64_t K; KILN_SORT_MEMBER K key(S v) { return v != 0; } };

// Whether (a, ia) comes before (b, ib): by value (descending: the larger first), a NaN above
// every number (x != x: the preludes compile without fast-math), equal values by index.
template <class K> KILN_FN bool kiln_sort_before(K a, int64_t ia, K b, int64_t ib, bool descending) {
  const bool na = a != a, nb = b != b;
  if (na || nb) return na && nb ? ia < ib : descending ? na : nb;
  if (a == b) return ia < ib;
  return descending ? a > b : a < b;
}
)PRELUDE";

// CUDA: a block per row (block-stride over the rows). The pairs are sorted by a bitonic network
// in which every comparator puts the earlier pair at the lower position (the first step of each
// merge compares mirrored positions, the later ones a stride apart): a comparator whose upper
// position is past the row's end is skipped, which is what it would do with padding that comes
// last, so a row of any length sorts without its padding being stored.
constexpr std::string_view kCuda = R"PRELUDE(
extern __shared__ __align__(16) unsigned char kiln_sort_smem[];

// The network over n pairs at ks[j * step], is[j * step]; the block's threads share it.
template <int DT, class I>
__device__ void kiln_sort_network(typename kiln_sort_type<DT>::S* ks, I* is, int64_t step, int64_t n, bool descending) {
  typedef kiln_sort_type<DT> T;
  int64_t P = 1;
  while (P < n) P <<= 1;
  for (int64_t size = 2; size <= P; size <<= 1)
    for (int64_t stride = size / 2; stride >= 1; stride >>= 1) {
      const bool mirrored = stride == size / 2;
      for (int64_t p = threadIdx.x; p < P / 2; p += blockDim.x) {
        const int64_t q = p % stride, lo = p / stride * 2 * stride + q;
        const int64_t hi = mirrored ? lo - q + 2 * stride - 1 - q : lo + stride;
        if (hi >= n) continue;
        const typename T::S a = ks[lo * step], b = ks[hi * step];
        const I ia = is[lo * step], ib = is[hi * step];
        if (kiln_sort_before(T::key(b), (int64_t)ib, T::key(a), (int64_t)ia, descending)) {
          ks[lo * step] = b;
          ks[hi * step] = a;
          is[lo * step] = ib;
          is[hi * step] = ia;
        }
      }
      __syncthreads();
    }
}

// Rows (o, i) of x: element j at (o * n + j) * inner + i; their first k pairs to vals and idx
// in the same layout with k for n. `shared`: each row in shared memory (n values, then n int
// indices); else in scratch (sv, si: n a row, a row after another) or, with no scratch (k == n),
// in the outputs themselves.
template <int DT>
__device__ void kiln_sort_rows(const typename kiln_sort_type<DT>::S* __restrict__ x, typename kiln_sort_type<DT>::S* vals,
                               int64_t* idx, typename kiln_sort_type<DT>::S* sv, int64_t* si, int64_t outer, int64_t n,
                               int64_t inner, int64_t k, bool descending, bool shared) {
  typedef typename kiln_sort_type<DT>::S S;
  const int64_t rows = outer * inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r / inner, i = r % inner;
    const S* xr = x + o * n * inner + i;
    S* vr = vals + o * k * inner + i;
    int64_t* ir = idx + o * k * inner + i;
    if (shared) {
      S* ks = (S*)kiln_sort_smem;
      int* is = (int*)(kiln_sort_smem + (n * (int64_t)sizeof(S) + 15) / 16 * 16);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        ks[j] = xr[j * inner];
        is[j] = (int)j;
      }
      __syncthreads();
      kiln_sort_network<DT>(ks, is, 1, n, descending);
      for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
        vr[j * inner] = ks[j];
        ir[j * inner] = is[j];
      }
      __syncthreads();  // the next row overwrites the shared pairs
      continue;
    }
    S* ks = sv ? sv + r * n : vr;
    int64_t* is = sv ? si + r * n : ir;
    const int64_t step = sv ? 1 : inner;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      ks[j * step] = xr[j * inner];
      is[j * step] = j;
    }
    __syncthreads();
    kiln_sort_network<DT>(ks, is, step, n, descending);
    if (sv)
      for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
        vr[j * inner] = ks[j];
        ir[j * inner] = is[j];
      }
  }
}
)PRELUDE";

// CPU: in the outputs, a heap of the row's first k pairs whose root is the one that comes last;
// each later pair that comes before the root replaces it; then the heap is sorted (heapsort:
// for sort, k == n, the whole row). O(n log k) a row, no memory of its own; rows on the pool.
constexpr std::string_view kCpu = R"PRELUDE(
template <int DT>
static inline void kiln_sort_sift(typename kiln_sort_type<DT>::S* v, int64_t* ix, int64_t step, int64_t at, int64_t size,
                                  bool descending) {
  typedef kiln_sort_type<DT> T;
  for (;;) {
    int64_t last = at;
    const int64_t l = 2 * at + 1, r = l + 1;
    if (l < size && kiln_sort_before(T::key(v[last * step]), ix[last * step], T::key(v[l * step]), ix[l * step], descending)) last = l;
    if (r < size && kiln_sort_before(T::key(v[last * step]), ix[last * step], T::key(v[r * step]), ix[r * step], descending)) last = r;
    if (last == at) return;
    const typename T::S tv = v[at * step];
    const int64_t ti = ix[at * step];
    v[at * step] = v[last * step];
    ix[at * step] = ix[last * step];
    v[last * step] = tv;
    ix[last * step] = ti;
    at = last;
  }
}

template <int DT>
static void kiln_sort_cpu(const typename kiln_sort_type<DT>::S* x, typename kiln_sort_type<DT>::S* vals, int64_t* idx,
                          int64_t outer, int64_t n, int64_t inner, int64_t k, bool descending, int64_t grain) {
  typedef kiln_sort_type<DT> T;
  kiln_parallel(outer * inner, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const typename T::S* xr = x + o * n * inner + i;
      typename T::S* v = vals + o * k * inner + i;
      int64_t* ix = idx + o * k * inner + i;
      if (k == 0) continue;
      for (int64_t j = 0; j < k; ++j) {
        v[j * inner] = xr[j * inner];
        ix[j * inner] = j;
      }
      for (int64_t at = k / 2; at-- > 0;) kiln_sort_sift<DT>(v, ix, inner, at, k, descending);
      for (int64_t j = k; j < n; ++j)
        if (kiln_sort_before(T::key(xr[j * inner]), j, T::key(v[0]), ix[0], descending)) {
          v[0] = xr[j * inner];
          ix[0] = j;
          kiln_sort_sift<DT>(v, ix, inner, 0, k, descending);
        }
      for (int64_t size = k; size-- > 1;) {
        const typename T::S tv = v[0];
        const int64_t ti = ix[0];
        v[0] = v[size * inner];
        ix[0] = ix[size * inner];
        v[size * inner] = tv;
        ix[size * inner] = ti;
        kiln_sort_sift<DT>(v, ix, inner, 0, size, descending);
      }
    }
  });
}
)PRELUDE";

}  // namespace

std::string_view cuda_sort_prelude() {
  static const std::string text = "\n#define KILN_SORT_MEMBER static __device__ __forceinline__" + std::string(kCommon) + std::string(kCuda);
  return text;
}

std::string_view cpp_sort_prelude() {
  static const std::string text = "\n#define KILN_SORT_MEMBER static inline" + std::string(kCommon) + std::string(kCpu);
  return text;
}

}  // namespace kiln::codegen
