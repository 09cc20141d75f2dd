// Loading libcuda.so.1, the function table, errors, devices and primary contexts.
#include "runtime/cuda/driver.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::runtime::cuda {
namespace {

#define KILN_CUDA_STR2(x) #x
#define KILN_CUDA_STR(x) KILN_CUDA_STR2(x)  // after expansion: "cuMemAlloc_v2"

struct Driver {
  detail::DriverApi api;
  bool ok = false;
  std::string why;  // when !ok
  int driver_version = 0;
};

// Loads the library, resolves every function, then cuInit. The handle is never closed: the
// driver stays loaded for the process, as with a linked one.
Driver* load() {
  auto* d = new Driver;  // leaked on purpose: used until exit, by static destructors too
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = ::dlerror();
    d->why = fmt::format("no CUDA driver: libcuda.so.1 not found ({})", err ? err : "dlopen failed");
    return d;
  }
  std::string missing;
  auto resolve = [&](const char* name) -> void* {
    void* sym = ::dlsym(lib, name);
    // cuEventElapsedTime_v2 (CUDA 12.8 headers and later) has v1's signature; older drivers
    // have only v1.
    if (!sym && std::string_view(name) == "cuEventElapsedTime_v2") sym = ::dlsym(lib, "cuEventElapsedTime");
    if (!sym) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
    return sym;
  };
#define KILN_CUDA_RESOLVE(fn) d->api.fn = reinterpret_cast<decltype(d->api.fn)>(resolve(KILN_CUDA_STR(fn)));
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
  if (!missing.empty()) {
    d->why = fmt::format(
        "CUDA driver too old: libcuda.so.1 lacks {} (kiln was built with CUDA {}.{} headers)", missing,
        CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    return d;
  }
  d->api.cuDriverGetVersion(&d->driver_version);
  if (CUresult r = d->api.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    d->api.cuGetErrorName(r, &name);
    d->api.cuGetErrorString(r, &text);
    d->why = fmt::format("no CUDA device: cuInit failed: {} ({})", name ? name : std::to_string(r),
                         text ? text : "unknown error");
    return d;
  }
  d->ok = true;
  return d;
}

Driver& driver() {
  static Driver* d = load();  // thread-safe once (magic static)
  return *d;
}

std::mutex device_mutex;
std::vector<std::unique_ptr<DeviceInfo>> infos;  // by ordinal, filled on first query
std::vector<CUcontext> contexts;                 // by ordinal, retained primary contexts

}  // namespace

namespace detail {
const DriverApi& api() {
  Driver& d = driver();
  if (!d.ok) kiln::fail("{}", d.why);
  return d.api;
}
}  // namespace detail

using detail::api;

bool driver_available(std::string* why) {
  Driver& d = driver();
  if (!d.ok && why) *why = d.why;
  return d.ok;
}

int device_count() {
  if (!driver_available()) return 0;
  int n = 0;
  check(api().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

std::string error_string(CUresult result) {
  Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.api.cuGetErrorName) d.api.cuGetErrorName(result, &name);
  if (d.api.cuGetErrorString) d.api.cuGetErrorString(result, &text);
  if (!name) return fmt::format("CUDA error {}", static_cast<int>(result));
  return fmt::format("{} ({})", name, text ? text : "no description");
}

void check(CUresult result, const std::string& what) {
  if (result != CUDA_SUCCESS) kiln::fail("{}: {}", what, error_string(result));
}

std::string driver_version_string() {
  Driver& d = driver();
  if (d.driver_version == 0) return "nodriver";
  return fmt::format("{}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10);
}

CUcontext primary_context(int device) {
  const detail::DriverApi& a = api();
  std::lock_guard<std::mutex> lock(device_mutex);
  if (device < 0) kiln::fail("cuda:{}: no such device", device);
  if (static_cast<size_t>(device) >= contexts.size()) contexts.resize(device + 1, nullptr);
  if (!contexts[device]) {
    int n = 0;
    check(a.cuDeviceGetCount(&n), "cuDeviceGetCount");
    if (device >= n) kiln::fail("cuda:{}: no such device ({} CUDA device{} present)", device, n, n == 1 ? "" : "s");
    CUdevice dev;
    check(a.cuDeviceGet(&dev, device), fmt::format("cuDeviceGet({})", device));
    check(a.cuDevicePrimaryCtxRetain(&contexts[device], dev), fmt::format("cuDevicePrimaryCtxRetain(cuda:{})", device));
  }
  return contexts[device];
}

ScopedContext::ScopedContext(int device) {
  CUcontext ctx = primary_context(device);
  const detail::DriverApi& a = api();
  check(a.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ != ctx) {
    check(a.cuCtxSetCurrent(ctx), fmt::format("cuCtxSetCurrent(cuda:{})", device));
    // A thread that had no context keeps this one: cuBLASLt calls made later on this thread
    // (outside any guard) then find the primary context current, as the runtime API expects.
    restore_ = previous_ != nullptr;
  }
}

ScopedContext::~ScopedContext() {
  if (restore_) api().cuCtxSetCurrent(previous_);
}

const DeviceInfo& device_info(int ordinal) {
  const detail::DriverApi& a = api();
  primary_context(ordinal);  // checks the ordinal
  std::lock_guard<std::mutex> lock(device_mutex);
  if (static_cast<size_t>(ordinal) >= infos.size()) infos.resize(ordinal + 1);
  if (!infos[ordinal]) {
    auto info = std::make_unique<DeviceInfo>();
    CUdevice dev;
    check(a.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    char name[256] = {};
    check(a.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    info->name = name;
    info->ordinal = ordinal;
    auto attr = [&](CUdevice_attribute at, const char* what) {
      int v = 0;
      check(a.cuDeviceGetAttribute(&v, at, dev), fmt::format("cuDeviceGetAttribute({})", what));
      return v;
    };
    info->sm_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
    info->sm_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
    info->num_sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
    info->max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
    info->warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size");
    info->shared_memory_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block");
    info->shared_memory_per_block_optin =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory per block (opt-in)");
    info->l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size");
    size_t total = 0;
    check(a.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    info->total_memory = static_cast<int64_t>(total);
    info->driver_version = driver().driver_version;
    infos[ordinal] = std::move(info);
  }
  return *infos[ordinal];
}

std::string arch_name(const DeviceInfo& info) { return fmt::format("sm_{}{}", info.sm_major, info.sm_minor); }

}  // namespace kiln::runtime::cuda
