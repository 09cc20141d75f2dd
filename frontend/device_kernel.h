#pragma once
// The Device key's kernel: runs one op eagerly on the device its tensors live on (a GPU, or
// any device with memory of its own whose backend is registered). There is no hand-written
// kernel per op: the op becomes a one-node graph, compiled by the same pipeline as any graph
// (decompose, fuse, lower, emit, the device's compiler) and cached in memory by its printed
// form (op, attributes, input types and strides) and device, so each signature is compiled
// once per process (and its binary comes from the disk kernel cache after the first
// process). Eager device code is for convenience and checking; speed comes from compiling a
// whole graph (a Trainer, backend::compile).
//
// Every tensor of an op must be on one device, as in PyTorch; a 0-d CPU tensor (a scalar) is
// copied over. Results are new contiguous device tensors.
#include <span>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

std::vector<Tensor> device_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

// How many op signatures the Device key has compiled in this process (a test's measure of the
// cache).
int device_kernel_compiles();

}  // namespace kiln
