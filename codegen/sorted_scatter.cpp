// scatter_add by sorted index (codegen/sorted_scatter.h): the schedule and the CUDA routine.
#include "codegen/sorted_scatter.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace kiln::codegen {

void schedule_sorted_scatter(Kernel& k, const Target& t) {
  KILN_INTERNAL_ASSERT(k.sorted_scatter.has_value() && t.is_gpu(), "schedule_sorted_scatter is given a GPU's sorted scatter");
  const SortedScatterKernel& s = *k.sorted_scatter;
  const int64_t threads = s.n * s.outer * s.inner;
  k.index_bits = 64;
  k.launch.block = 256;
  // Consecutive threads take consecutive columns of one position: the run's source rows and
  // its destination row are read and written coalesced.
  k.launch.grid = std::max<int64_t>(1, std::min<int64_t>((threads + k.launch.block - 1) / k.launch.block, t.num_sms * 8));
  k.launch.persistent = true;  // grid-stride
  ScheduleRecord rec;
  rec.mapping = "thread per sorted position and column";
  rec.why = fmt::format("the first thread of each run of equal indices adds the run's rows in order ({} positions x {} columns)", s.n,
                        s.outer * s.inner);
  k.schedule = rec;
}

namespace {

// kiln_sort_type<DT> (the sort prelude) gives the storage type S and the value type K (f16 and
// bf16 as float) of each dtype code.
constexpr std::string_view kCuda = R"PRELUDE(
// ---- scatter_add by sorted index (codegen/sorted_scatter.cpp)
// keys: the n destination rows sorted, pos: each one's source row (equal keys in source order).
// Thread (p, q) for sorted position p and column q = o * inner + i: the first of each run of
// equal keys adds the run's source elements to acc's, in order.
template <int SRC, int ACC>
__device__ void kiln_sorted_scatter_add(typename kiln_sort_type<ACC>::S* __restrict__ acc, const int64_t* __restrict__ keys,
                                        const int64_t* __restrict__ pos, const typename kiln_sort_type<SRC>::S* __restrict__ src,
                                        int64_t outer, int64_t n, int64_t rows, int64_t inner) {
  typedef typename kiln_sort_type<ACC>::S A;
  const int64_t cols = outer * inner, total = n * cols;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = t / cols, q = t % cols;
    const int64_t key = keys[p];
    if (p > 0 && keys[p - 1] == key) continue;  // not the first of its run
    const int64_t o = q / inner, i = q % inner;
    A* dst = acc + (o * rows + key) * inner + i;
    A sum = *dst;
    for (int64_t m = p; m < n && keys[m] == key; ++m) sum = sum + (A)kiln_sort_type<SRC>::key(src[(o * n + pos[m]) * inner + i]);
    *dst = sum;
  }
}
)PRELUDE";

}  // namespace

std::string_view cuda_sorted_scatter_prelude() { return kCuda; }

}  // namespace kiln::codegen
