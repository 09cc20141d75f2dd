#pragma once
// The CPU key's kernel: runs an op eagerly on host tensors. Small ops run their reference
// kernel (ir/reference, the code the reference interpreter runs); an op with enough work (a
// matmul, linear or convolution of 4096 input elements or more, any other op of 65536) becomes a one-node graph
// compiled by the CPU backend, as the Device key does for GPUs, cached in memory by its printed
// form so that each signature compiles once per process (and comes from the disk kernel cache
// after the first process): eager code then runs at compiled speed. Compiled results agree
// with the reference within the per-dtype tolerances (backend/compile.h), not bit for bit;
// KILN_EAGER_CPU=reference runs every op on its reference kernel (the oracle), as do builds
// without the CPU JIT.
#include <span>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

std::vector<Tensor> cpu_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

// Whether every eager CPU op runs on its reference kernel: KILN_EAGER_CPU=reference, or an
// EagerCpuReference alive.
bool eager_cpu_uses_reference();
// While one lives, eager CPU ops run on their reference kernels (bit for bit what the reference
// interpreter computes: a test of a trace's faithfulness wants that).
struct EagerCpuReference {
  EagerCpuReference();
  ~EagerCpuReference();
  EagerCpuReference(const EagerCpuReference&) = delete;
  EagerCpuReference& operator=(const EagerCpuReference&) = delete;
};
// How many op signatures the CPU key has compiled in this process (a test's measure of the cache).
int cpu_kernel_compiles();

}  // namespace kiln
