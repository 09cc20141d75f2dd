#pragma once
// The kernels of custom ops that bring their own (frontend/custom_op.h: "opaque" ops): a C++
// function for the CPU backend, CUDA C compiled by NVRTC with a launch rule for the CUDA
// backend. Fusion treats such an op as a boundary; the lowering makes it a call on contiguous
// buffers (codegen::OpaqueCall); each backend looks its kernel up here by Op.
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/attr.h"
#include "ir/host_tensor.h"
#include "ir/op_registry.h"

namespace kiln::backend {

// Reads the inputs and writes every element of the outputs: contiguous tensors over kiln's
// own memory (the outputs are not zero-filled), valid for the call only.
using CpuOpaqueKernel = std::function<void(std::span<const HostTensor> inputs, std::span<HostTensor> outputs, const Attrs& attrs)>;

struct CudaLaunch {
  int64_t grid = 1, block = 256;  // 1-D
  unsigned shared_bytes = 0;      // dynamic shared memory
  std::vector<long long> args;    // passed after the attributes (sizes the kernel needs)
};
// The launch of one call, from the shapes (static in a compiled graph) and the attributes.
using CudaLaunchRule =
    std::function<CudaLaunch(std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs, const Attrs& attrs)>;

// CUDA C with one `extern "C" __global__` entry point taking, in order: a pointer per input
// (const T*), a pointer per output (T*), the element count of the first output (long long),
// each numeric attribute of the schema, in schema order, as a double, then the launch rule's
// `args` (long long each). No headers are needed (NVRTC); it is compiled for the device's
// architecture and cached like kiln's kernels.
struct CudaOpaqueKernel {
  std::string source;
  std::string entry;
  CudaLaunchRule launch;  // empty: a grid-stride launch of 256 threads a block over that count
};

// Registers the kernels of an opaque op (either may be empty: that backend then refuses to
// compile it, naming the op). kiln::Error if the op has some already.
void register_opaque_kernels(Op op, CpuOpaqueKernel cpu, CudaOpaqueKernel cuda);
const CpuOpaqueKernel* find_cpu_opaque_kernel(Op op);   // nullptr: none
const CudaOpaqueKernel* find_cuda_opaque_kernel(Op op);  // nullptr: none

// The launch of one call: the op's rule, or the default grid-stride launch over `n` elements.
CudaLaunch cuda_launch_of(const CudaOpaqueKernel& k, std::span<const TensorMeta> inputs,
                          std::span<const TensorMeta> outputs, const Attrs& attrs);

}  // namespace kiln::backend
