#pragma once
// The CUDA key's kernel: runs one op eagerly on the GPU its tensors live on. There is no
// hand-written CUDA kernel per op: the op becomes a one-node graph, compiled by the same
// pipeline as any graph (decompose, fuse, lower, CUDA C, NVRTC) and cached in memory by its
// printed form (op, attributes, input types and strides) and device, so each signature is
// compiled once per process (and its CUBIN comes from the disk kernel cache after the first
// process). Eager GPU code is for convenience and checking; speed comes from compiling a whole
// graph (a Trainer, backend::compile).
//
// Every tensor of an op must be on one GPU, as in PyTorch; a 0-d CPU tensor (a scalar) is
// copied over. Results are new contiguous device tensors.
#include <span>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

std::vector<Tensor> cuda_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

// How many op signatures the CUDA key has compiled in this process (a test's measure of the
// cache).
int cuda_kernel_compiles();

}  // namespace kiln
