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
// Then (choose_vectors) each loop's vector width, and the rows a row loop reads more than
// once held in registers (read from memory once). Every decision is recorded in
// Kernel::schedule, which kernels.txt and kiln explain print.
//
// Every scheduled kernel passes verify(Kernel).
#include "codegen/lower.h"
#include "codegen/target.h"

namespace kiln::codegen {

void schedule(Kernel& k, const Target& target);
// The CUDA schedule's last step, on a kernel whose loops are mapped and launch set: each
// grid-stride and row-share loop's vector width (Stmt::vector, from codegen/vectorize.h) and
// the rows a row loop holds in registers (Stmt::held; a block per row may grow to
// `max_row_threads` threads for it, 0: hold nothing; each thread holding at most the target's
// held bytes); for a block's row too long for its registers, in the registers of a
// thread-block cluster (sm_90), else in the dynamic shared memory the target allows; recorded
// in Kernel::schedule.
void choose_vectors(Kernel& k, int64_t max_row_threads, const Target& target);
void schedule(LoweredGraph& lg, const Target& target);

}  // namespace kiln::codegen
