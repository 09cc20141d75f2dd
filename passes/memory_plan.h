#pragma once
// Memory planning: intermediate buffers whose lifetimes do not overlap share memory in one
// arena (greedy by size with best fit, as TFLite's and Inductor's planners do).
//
// A lifetime is counted in fusion groups (their execution order): a buffer is live from the
// group that writes it to the last group that reads it, readers through an alias (a view
// group reading the buffer) included, since they index into the same memory.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/fusion.h"

namespace kiln {

struct BufferInterval {
  int64_t bytes = 0;
  int first = 0;  // first group that uses it (its writer)
  int last = 0;   // last group that uses it (inclusive)
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

struct PlannedBuffer {
  Value value;         // the group output that lives in the arena
  int64_t bytes = 0;   // its size (unaligned)
  int64_t offset = 0;  // where it lives in the arena
  int first = 0;       // writer group
  int last = 0;        // last reader group (through aliases too)
};

struct BufferPlan {
  std::vector<PlannedBuffer> buffers;  // in writer order
  int64_t arena_bytes = 0;             // the planned peak
  int64_t naive_bytes = 0;             // the unplanned sum (each buffer aligned)
  // "memory: 12 buffers, 3.1 MB unplanned -> 1.2 MB planned peak"
  std::string report() const;
};

// The materialized intermediates of a fused graph (group outputs that are neither graph
// inputs, graph outputs nor aliases) and their place in one arena. Graph outputs, and the
// bases of returned aliases, get their own memory: they go back to the caller.
BufferPlan plan_buffers(const Graph& g, const fusion::FusionPlan& plan, int64_t alignment = 64);

}  // namespace kiln
