#pragma once
// What the compile driver's memory plan makes of a fused graph, for the fusion and memory-plan
// tests: the graph lowered for the CPU target and its arena planned (codegen/arena_plan.h); each
// intermediate value with its bytes, lifetime in schedule steps and offset (the kernels' own
// scratch, a column reduction's accumulators, is in `plan` but not in `buffers`).
#include <string>
#include <vector>

#include "codegen/arena_plan.h"
#include "codegen/lower.h"
#include "codegen/target.h"
#include "ir/graph.h"
#include "passes/fusion/fusion.h"

namespace kiln::testing {

struct ArenaBuffer {
  std::string value;   // the value it holds, without the '%'
  int64_t bytes = 0;
  int first_step = 0, last_step = 0;
  int64_t offset = 0;
};

struct Arena {
  std::vector<ArenaBuffer> buffers;  // in buffer order
  codegen::ArenaPlan plan;
  std::vector<int> step_of_group;    // the (last) schedule step of each fusion group; -1 for none
  const ArenaBuffer* find(const std::string& value) const {
    for (const ArenaBuffer& b : buffers)
      if (b.value == value) return &b;
    return nullptr;
  }
};

inline Arena arena_of(const Graph& g, const fusion::FusionPlan& plan) {
  codegen::LoweredGraph lg = codegen::lower(g, plan, codegen::cpu_target());
  Arena a;
  a.plan = codegen::plan_arena(lg, 64);
  for (const codegen::GraphBuffer& b : lg.buffers) {
    const bool value = b.what.size() > 1 && b.what[0] == '%' && g.find(b.what.substr(1));
    if (b.kind == codegen::GraphBuffer::Kind::Arena && b.offset >= 0 && value)
      a.buffers.push_back({b.what.substr(1), b.nbytes(), b.first_step, b.last_step, b.offset});
  }
  a.step_of_group.assign(plan.groups.size(), -1);
  for (size_t s = 0; s < lg.steps.size(); ++s)
    if (lg.steps[s].group >= 0) a.step_of_group[static_cast<size_t>(lg.steps[s].group)] = static_cast<int>(s);
  return a;
}

}  // namespace kiln::testing
