#pragma once
// A fixed pool of worker threads for CPU kernels: KILN_NUM_THREADS threads (default: the
// hardware's), the calling thread being one of them. One parallel loop runs at a time; a loop
// started inside a loop body (nested) runs inline on the thread that meets it.
#include <cstdint>
#include <functional>

namespace kiln::runtime::cpu {

// Threads parallel loops use (callers included); at least 1.
int num_threads();

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` iterations and returns when all
// are done. Inline when n <= grain, with one thread, or when nested. The first exception a
// chunk throws is rethrown here after the others finish.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Whether the calling thread is inside a parallel loop body.
bool in_parallel_region();

}  // namespace kiln::runtime::cpu
