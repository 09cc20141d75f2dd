#pragma once
// Memory planning: buffers whose lifetimes do not overlap share memory in one arena (greedy
// by size with best fit, as TFLite's and Inductor's planners do). A lifetime is an interval of
// positions in the program; codegen/arena_plan.h gives the compiled graph's intermediates
// theirs in schedule steps.
#include <cstdint>
#include <span>
#include <vector>

namespace kiln {

struct BufferInterval {
  int64_t bytes = 0;
  int first = 0;  // the first position that uses it (its writer)
  int last = 0;   // the last position that uses it (inclusive)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per interval, in the arena; multiples of the alignment
  int64_t peak_bytes = 0;        // the arena's size
  int64_t naive_bytes = 0;       // every buffer in its own (aligned) memory
};

// Places each interval at an offset so that intervals live at the same time never overlap.
// Sizes are rounded up to `alignment` (a power of two). kiln::Error on a negative size, a
// lifetime that ends before it starts, or a bad alignment.
MemoryPlan plan_memory(std::span<const BufferInterval> intervals, int64_t alignment = 64);

}  // namespace kiln
