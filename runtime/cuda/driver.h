#pragma once
// The CUDA driver, loaded at first use: libcuda.so.1 is dlopen'ed (never linked), so that kiln
// starts, and compiles CUDA through NVRTC, on machines with no driver or no GPU. Only cuda.h's
// types and prototypes are used at build time.
//
// Contexts: kiln uses each device's PRIMARY context (cuDevicePrimaryCtxRetain), the one the CUDA
// runtime API uses too, so that cuBLASLt (a runtime-API library) and kiln's own launches share
// memory and streams. It is retained once per device and kept for the process. Every call of
// this folder that touches a device makes its context current on the calling thread first
// (ScopedContext), so callers never have to.
#include <cuda.h>

#include <cstdint>
#include <string>

namespace kiln::runtime::cuda {

// Whether a driver is present and sees a device. When not, `why` (if given) says which:
// "no CUDA driver: libcuda.so.1 not found (...)" or "no CUDA device: cuInit failed:
// CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)". Loads the driver once
// (thread-safe); the answer never changes within a process.
bool driver_available(std::string* why = nullptr);

// The number of devices; 0 when !driver_available().
int device_count();

// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", from cuGetErrorName/String
// where the driver is loaded, else the number.
std::string error_string(CUresult result);

// Raises kiln::Error "<what>: <error_string>" unless `result` is CUDA_SUCCESS.
void check(CUresult result, const std::string& what);

struct DeviceInfo {
  std::string name;
  int ordinal = 0;
  int sm_major = 0, sm_minor = 0;
  int num_sms = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
  int64_t total_memory = 0;
  int64_t shared_memory_per_block = 0;        // without opting in (48 KB)
  int64_t shared_memory_per_block_optin = 0;  // with cuFuncSetAttribute (227 KB on an H100)
  int64_t l2_bytes = 0;
  int driver_version = 0;  // as cuDriverGetVersion: 12020 for 12.2
};

// Queried once per device; kiln::Error when there is no such device (or no driver).
const DeviceInfo& device_info(int ordinal = 0);

// "sm_90" for compute capability 9.0.
std::string arch_name(const DeviceInfo& info);

// The driver's version as "12.2", or "nodriver" when no driver is loaded (for cache keys).
std::string driver_version_string();

// Makes `device`'s primary context current on this thread for the guard's lifetime and
// restores the previous one after (cheap when it already is current).
class ScopedContext {
 public:
  explicit ScopedContext(int device = 0);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool restore_ = false;
};

// The primary context of `device` (retained at the first call, for the process).
CUcontext primary_context(int device = 0);

}  // namespace kiln::runtime::cuda
