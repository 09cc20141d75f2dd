#pragma once
// Collectives as early as they can run, so that their transfers overlap the kernels after them
// (DDP's bucketed all-reduce during the rest of the backward, as PyTorch's reducer launches a
// bucket when its last gradient is ready).
//
// The steps are re-sorted by list scheduling over their buffer dependencies: among the steps
// that can run, first the earliest reducing collective (all_reduce, reduce_scatter, reduce) and
// what it still waits for, then the rest in their lowered order. Gathers and broadcasts, which
// make more than they read, keep their place just before their first reader. A graph without
// a reducing collective keeps its order. The backends launch each collective asynchronously (CUDA: on a stream of its own; the
// CPU: on a thread) and wait for it before the first step that reads its result: its input is
// then in use until that step, and its buffers' lifetimes say so, for the memory plan.
#include <string>
#include <vector>

#include "codegen/lower.h"

namespace kiln::codegen {

// Where a collective runs in the schedule: launched at step `launch`, waited for before step
// `wait` (steps.size(): at the end of the run).
struct CollectiveWindow {
  int launch = 0, wait = 0;
};

// The graph buffers a step reads or writes.
std::vector<int> step_buffers(const Step& s);

// Re-sorts lg.steps as above, recomputes every buffer's lifetime in steps, extends a
// collective's inputs to its wait, and returns each collective step's window in order.
std::vector<CollectiveWindow> schedule_collectives_early(LoweredGraph& lg);

// "%g = all_reduce(...) : f32[136]: launched after step 12 (k12), first read by step 20 (k19): 7 steps run while it travels"
std::string describe_window(const LoweredGraph& lg, const CollectiveWindow& w);

}  // namespace kiln::codegen
