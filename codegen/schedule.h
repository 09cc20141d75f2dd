#pragma once
// The schedule step: the lowering says what each loop is (parallel, reduction, ordered);
// this step decides how it runs on a Target and writes the decision into the kernel IR
// (Halide's schedules, tinygrad's renderer limits, Inductor's per-device Scheduling):
//
// CPU: the outermost parallel loop goes to the thread pool in chunks (CpuThreads, with a
// grain so each chunk does enough work to pay for the handoff); a flat parallel loop does
// too when it is large, else it stays one contiguous loop; inner parallel loops are
// contiguous loops for clang's vectorizer (CpuVector); reduction and ordered loops are
// plain loops (Serial).
//
// CUDA: a flat parallel loop becomes a grid-stride loop. A parallel loop holding reduction
// loops (a row reduction) maps its rows by row length: a thread per short row, a warp per
// row up to Target::warp_row_max (lanes share the row; combines through shuffles), else a
// block per row (threads share it; combines through shared memory); each reduction loop
// spread over lanes or threads is followed by a CombineAcross of its accumulators. A
// parallel loop holding other parallel leaf loops (column-reduction tiles, full outputs)
// maps to blocks with the leaves on threads; one holding only ordered loops (a scatter) to a
// grid-stride loop, each thread running its ordered loop alone. A kernel with no parallel
// loop runs on one thread. Index arithmetic is 32-bit when every buffer and loop fits.
//
// Every scheduled kernel passes verify(Kernel).
#include "codegen/lower.h"
#include "codegen/target.h"

namespace kiln::codegen {

void schedule(Kernel& k, const Target& target);
void schedule(LoweredGraph& lg, const Target& target);

}  // namespace kiln::codegen
