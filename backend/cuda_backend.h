#pragma once
// The CUDA backend (backend/backend.h): the device's Target (architecture and multiprocessor
// count read off the GPU, or --arch with none), the CUDA C emitter, NVRTC (every kernel of a
// graph its own program, compiled in parallel on the host's cores, through the kernel cache:
// a warm process loads CUBINs without NVRTC), cuBLASLt for matmuls, and a Program that runs
// the schedule on one stream over device memory from the caching allocator.
//
// Without a GPU (CI, development machines) everything up to the CUBIN works; running says
// that no CUDA device is present and why.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/nvrtc.h"

namespace kiln::backend {

// The CUDA backend's DeviceStorage (backend/device_storage.h) over `t`, sharing its buffer.
StoragePtr cuda_storage(runtime::cuda::DeviceTensor t);
// The DeviceTensor of a CUDA storage; kiln::Error for another device's.
const runtime::cuda::DeviceTensor& cuda_tensor(const DeviceStorage& s);

// run_on_device (backend/compile.h) in DeviceTensors, for code that holds them (benchmarks,
// the runtime's tests): inputs on the executable's device (any strides), outputs new device
// tensors from the caching allocator. kiln::Error for a non-CUDA executable, a wrong input, or
// a kernel error (an out-of-range gather index, an illegal address) naming the kernel.
std::vector<runtime::cuda::DeviceTensor> run_on_device(const Executable& exe, std::span<const runtime::cuda::DeviceTensor> inputs);

#if KILN_HAVE_CUDA
// The NVRTC options of kiln's generated kernels for `arch` (-fmad=false and why: see its
// definition), the kernel cache as `use_cache` says.
runtime::cuda::NvrtcOptions generated_kernel_options(const std::string& arch, bool use_cache);

// Schedule tuning's two questions (backend/autotune.h) for the CUDA backend: what a choice
// holds for on options.device ("NVIDIA H200, 132 SMs, sm_90, driver 13.0", nullopt with
// `why` when no device is present), and each candidate's time there (cuda_timing.cpp).
std::optional<std::string> cuda_tuning_device(const CompileOptions& options, std::string* why);
std::vector<double> time_cuda_kernels(const std::vector<codegen::Kernel>& candidates, const CompileOptions& options);
// Each matmul of `lowered` tuned (cuBLASLt's algorithms timed, GemmOptions::autotune) on scratch
// operands of its sizes; what each got, in step order.
std::vector<runtime::TuningOutcome> tune_cuda_matmuls(const codegen::LoweredGraph& lowered, const CompileOptions& options);

// The grid `k` launches with as `fn` on `device`: its schedule's, or for a persistent kernel
// (codegen::LaunchConfig::persistent) at most the blocks the device's SMs hold at once for the
// compiled code.
int64_t cuda_launch_grid(const codegen::Kernel& k, CUfunction fn, int device);

// Queues the product `mm` (a MatmulCall of the lowering) through cuBLASLt on these operands,
// with the options `go` (TF32, tuning) and the call's epilogue.
void queue_matmul(const codegen::MatmulCall& mm, const void* a, const void* b, void* out, const void* bias, runtime::cuda::Stream& stream,
                  runtime::cuda::GemmOptions go);
#endif

// Whether a CUDA device can run kernels here; when not, `why` says what is missing (no
// driver, no device).
bool cuda_device_present(std::string* why = nullptr);

}  // namespace kiln::backend
