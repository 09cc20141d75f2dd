#pragma once
// The GPU engine of the process group: NCCL, loaded at run time (dlopen of libnccl.so.2, as the
// driver is), so that every build compiles this path and a machine without NCCL says so when a
// collective first runs. One communicator per group, made on the first collective (rank 0's
// unique id travels through the group's store); collectives are enqueued on the caller's stream.
#include <cuda.h>

#include <string>

#include "runtime/cuda/stream.h"
#include "runtime/dist/process_group.h"

namespace kiln::runtime::cuda {

// Enqueues one collective on `stream` (the caller's device context current). kiln::Error
// naming the collective when NCCL is missing or refuses it.
void run_nccl(dist::ProcessGroup& g, const dist::CollectiveArgs& c, int device, Stream& stream);

// Waits for `stream`, whose work includes NCCL collectives, at most the group's timeout. On a
// timeout or an error NCCL reports (a peer gone), aborts the communicator, so that no kernel
// waits forever, and raises kiln::Error naming the ranks at fault (ProcessGroup::diagnose).
void wait_for_collectives(dist::ProcessGroup& g, Stream& stream, const std::string& what);

}  // namespace kiln::runtime::cuda
