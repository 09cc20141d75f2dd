#pragma once
// The CUDA emitter: scheduled kernel IR (codegen/schedule.h set every loop's map,
// Kernel::index_bits and Kernel::launch) -> CUDA C for NVRTC. The module is the prelude
// (codegen/cuda_prelude.cpp: no #include at all; NVRTC compiles it alone) followed by one
// kernel per Kernel:
//
//   // <the fusion group>
//   extern "C" __global__ void __launch_bounds__(<launch.block>) k0(float* __restrict__ b0,
//                                                                   const float* __restrict__ b1)
//
// one device pointer per kernel buffer in the kernel's argument order, nothing else. The
// runtime launches it with Kernel::launch (a 1-D grid of 1-D blocks, static shared memory).
//
// Pointers are __restrict__ (inputs `const`, which lets NVVM read them through the read-only
// path, ld.global.nc) except in a kernel that reads back a buffer it writes (an accumulator or
// temp in global memory): there NVVM (NVRTC 11.8 and 13.0 alike) turned `c ? acc[i] : in[0]`
// into one load from a selected pointer and kept `.nc` on it, so the load of the accumulator
// came through the read-only cache and missed the kernel's own stores (a column max read as
// the memory's old contents; kiln fuzz, on an H100). Without __restrict__ NVVM proves nothing
// read-only in that kernel and uses no `.nc` load at all.
//
// What the runtime must guarantee:
//   - every buffer pointer is 16-byte aligned (cudaMalloc gives 256; a view at an element
//     offset that breaks this must be copied first): grid-stride loops over contiguous f32/i32
//     or f16/bf16 buffers load and store 16 bytes per thread per iteration;
//   - launch.block is a multiple of 32 whenever a kernel maps loops to warps, lanes or
//     threads of a block (full-warp shuffles).
//
// The device error record. A gather or scatter index out of range reads 0 (writes nothing
// useful) and records the first such (index, size) of the module's launches in
//
//   extern "C" __device__ struct { int flag; long long index; long long size; } kiln_error;
//
// (offsets 0, 8, 16; 24 bytes). The runtime finds it with cuModuleGetGlobal(module,
// "kiln_error"), reads it after synchronizing the stream, reports flag != 0 as an error
// naming index and size, and writes zeros back before the next launch. Each loaded module
// has its own record (zero at load). Kernels write through the pointer `kiln_error_slot`
// (initially &kiln_error), which a runtime may point at a slot of one array of records for
// all the kernels of a graph, so that a single read checks them all.
//
// Types: values compute in float (f16/bf16/f32), double, int64_t (i32/i64) and bool, as on
// the CPU (codegen/c_family.h); buffers store f16/bf16 as uint16_t bits and bool as uint8_t.
// Index arithmetic and loop variables are `int` when Kernel::index_bits == 32, else `long long`.
//
// Loop maps -> code (v a loop variable, E its extent):
//   GpuGridStride  for (v = blockIdx.x * blockDim.x + threadIdx.x; v < E; v += gridDim.x * blockDim.x)
//   GpuBlocks      for (v = blockIdx.x; v < E; v += gridDim.x)
//   GpuWarps       for (v = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; v < E; v += gridDim.x * (blockDim.x / 32))
//   GpuThreads     for (v = threadIdx.x; v < E; v += blockDim.x)
//   GpuLanes       for (v = threadIdx.x % 32; v < E; v += 32)
//   Serial         for (v = 0; v < E; ++v)
//   GpuBlocks with Stmt::cluster = C (a thread-block cluster per row, sm_90):
//                  for (v = blockIdx.x / C; v < E; v += gridDim.x / C), its GpuThreads loops over the
//                  cluster's threads (rank * blockDim.x + threadIdx.x, stride blockDim.x * C), its
//                  combines through distributed shared memory (kiln_cluster_*), `__cluster_dims__(C, 1, 1)`
//   GpuTiles       for (tile = blockIdx.x; tile < tiles; tile += gridDim.x) { stage the transposed loads
//                  in __shared__ tiles; __syncthreads(); run the body over the tile's elements;
//                  __syncthreads(); }   (Stmt::tiles, codegen/tiling.h)
// A share loop with Stmt::vector = W takes W consecutive elements per iteration (one access
// per buffer). A row loop with Stmt::held first loads each held row into `<b>_held[h]`
// (vector tid + h*T of the row, T the threads per row), and its share loops that read those
// rows walk h = 0..held_vectors-1 fully unrolled, reading the registers instead of memory.
// Every thread of a block (lane of a warp) runs the same iterations of a GpuBlocks (GpuWarps)
// loop, so the combines inside are reached uniformly. Statements there outside any thread or
// lane loop run redundantly in every thread (they are pure) except stores and atomic adds,
// which thread 0 of the block (lane 0 of the warp) does; outside every grid-mapped loop only
// thread 0 of block 0 stores. CombineAcross leaves the combined accumulator in every thread
// (a fixed shuffle tree for a warp; per-warp partials in __shared__ memory for a block), with
// the plain NaN-winning steps for max/min and (value, first index) pairs for argmax: float
// results are deterministic run to run for a given launch.block.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// The device error record, as the host reads it (the same layout as the prelude's
// `kiln_error_record`: int, then two long longs at offsets 8 and 16).
inline constexpr const char* kCudaErrorRecordSymbol = "kiln_error";
// A `kiln_error_record*` the kernels report through (initially &kiln_error): the runtime sets
// it once per loaded module to a slot of its own array of records.
inline constexpr const char* kCudaErrorSlotSymbol = "kiln_error_slot";
struct CudaErrorRecord {
  int32_t flag = 0;  // nonzero: an index was out of range
  int32_t site = 0;  // which check: codegen::LoweredGraph::index_checks
  int64_t index = 0;
  int64_t size = 0;
};
static_assert(sizeof(CudaErrorRecord) == 24, "the layout of the device's kiln_error_record");

std::string_view cuda_prelude();
// One kernel as CUDA C (no prelude).
std::string emit_cuda_kernel(const Kernel& k);
// A whole module: the prelude, then every kernel.
std::string emit_cuda_module(const std::vector<Kernel>& kernels);
// What a kernel compiles to, as text: its code as printed with the names it defines (loop
// variables, lets, accumulators) numbered in order, its own name and every comment left out.
// Two kernels with the same identity are the same function (a model's repeated layers), so
// one compiled function serves both (backend/cuda_backend.cpp).
std::string cuda_kernel_identity(const Kernel& k);

// The static shared memory a kernel's block combines declare (33 slots per value type
// combined across a block, and 33 int64 indices for argmax): what LaunchConfig::shared_bytes
// should say.
int64_t cuda_shared_bytes(const Kernel& k);

}  // namespace kiln::codegen
