#pragma once
// The memory plan of a lowered graph: its intermediates (arena buffers that are not graph
// outputs) share one arena wherever their lifetimes in schedule steps do not overlap
// (passes/memory_plan.h's plan_memory: greedy by size with best fit). Graph outputs get memory
// of their own at run time: they go back to the caller. Runs after lowering and scheduling
// (lifetimes are in steps, collectives' inputs extended to their first reader), before emit.
#include <cstdint>
#include <string>

#include "codegen/lower.h"

namespace kiln::codegen {

struct ArenaPlan {
  int buffers = 0;          // intermediates placed in the arena
  int64_t arena_bytes = 0;  // the planned peak
  int64_t naive_bytes = 0;  // every intermediate in its own (aligned) memory
  // "memory: 12 buffers, 3.1 MB unplanned -> 1.2 MB planned peak"
  std::string report() const;
};

// Sets every intermediate's GraphBuffer::offset (multiples of `alignment`).
ArenaPlan plan_arena(LoweredGraph& lg, int64_t alignment);

}  // namespace kiln::codegen
