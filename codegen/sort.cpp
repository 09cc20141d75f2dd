// The schedule of sort and topk kernels (codegen/sort.h).
#include "codegen/sort.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace kiln::codegen {

int sort_dtype_code(DType dt) {
  switch (dt) {
    case DType::F32: return 0;
    case DType::F64: return 1;
    case DType::F16: return 2;
    case DType::BF16: return 3;
    case DType::I64: return 4;
    case DType::I32: return 5;
    case DType::Bool: return 6;
  }
  fail("sort has no kernel for {}", dtype_name(dt));
}

int64_t sort_shared_bytes(DType dtype, int64_t n) {
  // The values in their storage type, 16-byte aligned, then an int index each.
  return (n * dtype_size(dtype) + 15) / 16 * 16 + n * 4;
}

bool sort_row_fits_on_chip(DType dtype, int64_t n, const Target& t) {
  return t.is_gpu() && n <= INT32_MAX && sort_shared_bytes(dtype, n) <= t.shared_memory_optin;
}

void schedule_sort(Kernel& k, const Target& t) {
  KILN_INTERNAL_ASSERT(k.sort.has_value(), "schedule_sort is given a sort kernel");
  SortKernel& s = *k.sort;
  const int64_t rows = s.rows();
  ScheduleRecord rec;
  k.index_bits = 64;
  if (!t.is_gpu()) {
    // A row costs about n log k comparisons: rows enough for a task's parallel_work.
    const int64_t per_row = std::max<int64_t>(s.n, 1);
    s.grain = std::max<int64_t>(1, t.parallel_work / per_row);
    rec.mapping = s.grain >= rows ? "serial" : "thread pool";
    rec.why = fmt::format("a heap of the {} kept in the outputs, {} row{} a task", s.k, s.grain, s.grain == 1 ? "" : "s");
    k.schedule = rec;
    return;
  }
  s.in_shared = sort_row_fits_on_chip(s.dtype, s.n, t);
  // One block per row, as many threads as the network's pairs (a warp at least, 1024 at most).
  int64_t pairs = 1;
  while (2 * pairs < s.n) pairs <<= 1;
  k.launch.block = std::clamp<int64_t>((pairs + 31) / 32 * 32, 32, 1024);
  k.launch.dynamic_shared_bytes = s.in_shared ? sort_shared_bytes(s.dtype, s.n) : 0;
  // As many blocks as the SMs hold at once (2048 threads an SM, and their shared memory).
  int64_t per_sm = 2048 / k.launch.block;
  if (s.in_shared) per_sm = std::min<int64_t>(per_sm, t.shared_memory_optin / std::max<int64_t>(k.launch.dynamic_shared_bytes, 1));
  k.launch.grid = std::max<int64_t>(1, std::min<int64_t>(rows, t.num_sms * std::max<int64_t>(per_sm, 1)));
  k.launch.persistent = true;  // the blocks stride over the rows
  rec.mapping = "block per sorted row";
  rec.rows_per_block = 1;
  rec.threads_per_row = k.launch.block;
  rec.why = s.in_shared ? fmt::format("a bitonic network over the row's {} pairs in shared memory ({} B)", s.n, k.launch.dynamic_shared_bytes)
            : s.scratch ? fmt::format("a bitonic network over the row's {} pairs in scratch (too long for shared memory), the first {} copied out", s.n, s.k)
                        : fmt::format("a bitonic network over the row's {} pairs in the outputs (too long for shared memory)", s.n);
  k.schedule = rec;
}

}  // namespace kiln::codegen
