#pragma once
// Eager ops compiled by the pipeline, shared by the CPU key (frontend/cpu_kernel.h) and the
// Device key (frontend/device_kernel.h): one op becomes a graph of its own, compiled for a device
// and cached in memory by its printed form (op, attributes, input types and strides) and the
// device, so each signature is compiled once per process (and its binary comes from the disk
// kernel cache after the first process).
#include <vector>

#include "backend/compile.h"
#include "ir/graph.h"

namespace kiln {

// `op` over inputs x0, x1, ... of `inputs`' types, returning every result. kiln::Error from the
// op's shape rule.
Graph one_op_graph(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs);

// `g` compiled for `device`, once per (device, printed graph) in this process. Compiling under a
// lock keeps two threads from compiling the same signature twice; eager code is not a hot path.
const backend::Executable& eager_executable(const Graph& g, const Device& device);

// How many signatures eager_executable has compiled for devices of `kind` in this process.
int eager_compiles(Device::Kind kind);

}  // namespace kiln
