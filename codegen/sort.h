#pragma once
// sort and topk: a kernel kind of its own (SortKernel in codegen/kernel_ir.h). The lowering
// (codegen/lower_sort.cpp) makes one kernel per node; schedule_sort maps its rows to the
// machine and records why; the emitters print a call of the target's routine, written once in
// its prelude (codegen/sort_prelude.cpp).
//
// Order: by value, NaN above every number, equal values by index, so that every row has one
// order and any correct algorithm finds it (the routines sort (value, index) pairs).
// CUDA: one block per row (block-stride over the rows), a bitonic network over the row's
// pairs: in shared memory when they fit the opt-in limit, else in the value and index outputs
// themselves (sort) or in scratch (topk, whose outputs hold k of the n). The network runs on a
// row of any length: pairs whose upper element lies past the row are skipped (as if padded with
// elements that come last). CPU: a heap per row, in the outputs (heapsort for sort, the k first
// kept in a heap for topk), rows spread over the pool.
#include <string_view>

#include "codegen/kernel_ir.h"
#include "codegen/target.h"

namespace kiln::codegen {

// kiln's dtype as the preludes' routines number it (kiln_sort_type<N>): f32 0, f64 1, f16 2,
// bf16 3, i64 4, i32 5, bool 6.
int sort_dtype_code(DType dt);

// Bytes of shared memory a CUDA block takes to hold a row of n pairs of `dtype`.
int64_t sort_shared_bytes(DType dtype, int64_t n);

// Whether a row of n pairs fits in a CUDA block's shared memory on `t` (false on the CPU).
bool sort_row_fits_on_chip(DType dtype, int64_t n, const Target& t);

// Sets the launch (CUDA) or the grain (CPU) and the schedule record.
void schedule_sort(Kernel& k, const Target& t);

std::string_view cuda_sort_prelude();
std::string_view cpp_sort_prelude();

}  // namespace kiln::codegen
