#pragma once
// The CUDA backend (backend/backend.h): the device's Target (architecture and multiprocessor
// count read off the GPU, or --arch with none), the CUDA C emitter, NVRTC (every kernel of a
// graph its own program, compiled in parallel on the host's cores, through the kernel cache:
// a warm process loads CUBINs without NVRTC), cuBLASLt for matmuls, and a Program that runs
// the schedule on one stream over device memory from the caching allocator.
//
// Without a GPU (CI, development machines) everything up to the CUBIN works; running says
// that no CUDA device is present and why.
#include <span>
#include <vector>

#include "backend/compile.h"
#include "runtime/cuda/device_tensor.h"

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

// Whether a CUDA device can run kernels here; when not, `why` says what is missing (no
// driver, no device).
bool cuda_device_present(std::string* why = nullptr);

}  // namespace kiln::backend
