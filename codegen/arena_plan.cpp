#include "codegen/arena_plan.h"

#include <fmt/format.h>

#include <vector>

#include "ir/bytes.h"
#include "passes/memory_plan.h"

namespace kiln::codegen {

ArenaPlan plan_arena(LoweredGraph& lg, int64_t alignment) {
  std::vector<bool> is_output(lg.buffers.size(), false);
  for (int o : lg.outputs) is_output[static_cast<size_t>(o)] = true;
  std::vector<BufferInterval> intervals;
  std::vector<size_t> which;
  for (size_t i = 0; i < lg.buffers.size(); ++i) {
    const GraphBuffer& b = lg.buffers[i];
    if (b.kind != GraphBuffer::Kind::Arena || is_output[i]) continue;
    intervals.push_back({b.nbytes(), b.first_step, b.last_step});
    which.push_back(i);
  }
  MemoryPlan mp = plan_memory(intervals, alignment);
  for (size_t j = 0; j < which.size(); ++j) lg.buffers[which[j]].offset = mp.offsets[j];
  return ArenaPlan{static_cast<int>(which.size()), mp.peak_bytes, mp.naive_bytes};
}

std::string ArenaPlan::report() const {
  return fmt::format("memory: {} buffer{}, {} unplanned -> {} planned peak", buffers, buffers == 1 ? "" : "s",
                     format_bytes(naive_bytes), format_bytes(arena_bytes));
}

}  // namespace kiln::codegen
