#pragma once
// scatter_add by sorted index, on a GPU: what an embedding's gradient needs.
//
// The plain scatter kernel (codegen/lower.cpp) is parallel over the dims an index element
// cannot change and runs along the scatter dim in order, one thread per column: an embedding
// gradient of 8192 tokens into [32000, 2048] is 2048 threads, each adding 8192 rows one after
// another (4 ms on an H200, 80 GB/s). When the index is the same across the other dims (the
// gradient's index is the token ids, expanded over the features), the lowering instead
// (1) copies the index's column, checked and wrapped, (2) sorts it with its positions (equal
// indices keep their order: codegen/sort.h), and (3) runs this routine: one thread per sorted
// position and column, of which the first of each run of equal indices adds the run's source
// rows to its destination row, in index order. Every destination row has one owner per
// column, so there are no atomics, the sums are the ordered kernel's bit for bit, and two runs
// give the same bits.
#include <string_view>

#include "codegen/kernel_ir.h"
#include "codegen/target.h"

namespace kiln::codegen {

// Sets the launch (a grid-stride loop over positions x columns) and the schedule record.
void schedule_sorted_scatter(Kernel& k, const Target& t);

// The routine's text in the CUDA prelude (after the sort prelude, whose types it uses).
std::string_view cuda_sorted_scatter_prelude();

}  // namespace kiln::codegen
