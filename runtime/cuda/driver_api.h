#pragma once
// The driver API functions kiln calls, resolved from libcuda.so.1 with dlsym (runtime/cuda/
// driver.cpp); internal to runtime/cuda. Each name goes through cuda.h's own #defines, so
// `cuMemAlloc` here is `cuMemAlloc_v2` and the symbol looked up is the versioned one matching
// the prototype of the headers kiln was built with (CUDA 11.8 or 13).
#include <cuda.h>

namespace kiln::runtime::cuda::detail {

#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                        \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)             \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuStreamCreate)       \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery) X(cuEventCreate)               \
  X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuStreamWaitEvent)            \
  X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncSetAttribute)      \
  X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpyHtoD)              \
  X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                 \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuStreamBeginCapture) X(cuStreamEndCapture)      \
  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)   \
  X(cuGraphGetNodes) X(cuStreamIsCapturing) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

struct DriverApi {
#define KILN_CUDA_DECLARE(fn) decltype(&::fn) fn = nullptr;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_DECLARE)
#undef KILN_CUDA_DECLARE
};

// The resolved table; raises kiln::Error (with driver_available's reason) when there is no
// usable driver or device.
const DriverApi& api();

}  // namespace kiln::runtime::cuda::detail
