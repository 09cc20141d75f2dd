#pragma once
// Several processes, one program (SPMD): the process group that compiled graphs' collectives
// run in, as torch.distributed's init_process_group. Start the processes with
//   kiln launch -n 2 ./my_program            (or torchrun --nproc-per-node 2 ./my_program)
// which set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; each process calls
// kiln::dist::init_process_group() once, then builds and runs the same graphs. Collectives on
// the CPU go through Gloo, on GPUs through NCCL; KILN_DIST_TIMEOUT (seconds, default 300) bounds
// how long a rank waits for the others before it fails naming the rank it waits for.
#include "frontend/optim.h"

namespace kiln::dist {

// Joins the group the environment describes (every rank blocks until all have joined);
// kiln::Error naming a missing variable, or the ranks that never came. SIGPIPE is ignored from
// then on (unless the program handles it): a peer that dies is an error, not this one's death.
void init_process_group();
bool is_initialized();
int rank();        // 0 without a group
int world_size();  // 1 without a group
int local_rank();  // the GPU this rank uses on its machine
// Leaves the group (a clean exit: the others do not take it for a death).
void destroy_process_group();

// DDP's start: every rank's parameters become rank `src`'s (one broadcast each, compiled for
// `device`'s backend through `executor`).
void broadcast_parameters(const TrainStep& ts, TrainState& state, const Executor& executor, int64_t src = 0);

}  // namespace kiln::dist
