#include "frontend/distributed.h"

#include "runtime/dist/process_group.h"

namespace kiln::dist {

void init_process_group() { runtime::dist::init_process_group(runtime::dist::GroupOptions::from_environment()); }
bool is_initialized() { return runtime::dist::default_group() != nullptr; }
int rank() { return is_initialized() ? runtime::dist::default_group()->rank() : 0; }
int world_size() { return is_initialized() ? runtime::dist::default_group()->world_size() : 1; }
int local_rank() { return is_initialized() ? runtime::dist::default_group()->options().local_rank : 0; }
void destroy_process_group() { runtime::dist::destroy_process_group(); }

void broadcast_parameters(const TrainStep& ts, TrainState& state, const Executor& executor, int64_t src) {
  if (world_size() == 1) return;
  Graph g = parameter_broadcast(ts, world_size(), src);
  std::vector<HostTensor> out = (executor ? executor : compiled_executor())(g, state.params);
  state.params = std::move(out);
}

}  // namespace kiln::dist
