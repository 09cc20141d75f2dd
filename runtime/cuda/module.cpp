// Module loading and kernel launches.
#include "runtime/cuda/module.h"

#include <utility>

#include "ir/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::runtime::cuda {

using detail::api;

Module::Module(const std::string& image, std::string name, int device) : name_(std::move(name)), device_(device) {
  ScopedContext ctx(device);
  // The JIT error log says why an image does not load (e.g. "no kernel image for this device").
  char log[4096] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log - 1))};
  CUresult r = api().cuModuleLoadDataEx(&module_, image.data(), 2, options, values);
  if (r != CUDA_SUCCESS) {
    module_ = nullptr;
    kiln::fail("cannot load CUDA module '{}' ({} bytes) on cuda:{}: {}{}{}", name_, image.size(), device,
               error_string(r), log[0] ? "\n" : "", log);
  }
}

Module::~Module() {
  if (module_) api().cuModuleUnload(module_);
}

Module::Module(Module&& other) noexcept
    : module_(std::exchange(other.module_, nullptr)),
      name_(std::move(other.name_)),
      device_(other.device_),
      functions_(std::move(other.functions_)) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_) api().cuModuleUnload(module_);
    module_ = std::exchange(other.module_, nullptr);
    name_ = std::move(other.name_);
    device_ = other.device_;
    functions_ = std::move(other.functions_);
  }
  return *this;
}

CUdeviceptr Module::global(const std::string& name) const {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  CUresult r = api().cuModuleGetGlobal(&p, &bytes, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) kiln::fail("no __device__ variable '{}' in CUDA module '{}'", name, name_);
  check(r, fmt::format("cuModuleGetGlobal('{}' in module '{}')", name, name_));
  return p;
}

CUfunction Module::function(const std::string& name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  CUresult r = api().cuModuleGetFunction(&f, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) kiln::fail("no kernel '{}' in CUDA module '{}' (is it extern \"C\"?)", name, name_);
  check(r, fmt::format("cuModuleGetFunction('{}' in module '{}')", name, name_));
  functions_.emplace(name, f);
  return f;
}

namespace {
// Dynamic shared memory above the default 48 KB is usable (and counted by the occupancy query)
// only once the kernel opts into it.
void opt_into_dynamic_shared(CUfunction kernel, unsigned bytes, std::string_view what) {
  constexpr unsigned kDefaultSharedLimit = 48 * 1024;
  if (bytes > kDefaultSharedLimit)
    check(api().cuFuncSetAttribute(kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
          fmt::format("{}: opting into {} bytes of dynamic shared memory", what, bytes));
}
}  // namespace

int resident_blocks_per_sm(CUfunction kernel, int block, unsigned dynamic_shared_bytes, int device) {
  ScopedContext ctx(device);
  opt_into_dynamic_shared(kernel, dynamic_shared_bytes, "the occupancy query");
  int blocks = 0;
  check(api().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, dynamic_shared_bytes),
        fmt::format("cuOccupancyMaxActiveBlocksPerMultiprocessor (block {}, {} bytes of dynamic shared memory)", block,
                    dynamic_shared_bytes));
  return blocks;
}

void launch(CUfunction kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream& stream, void** args,
            std::string_view what) {
  ScopedContext ctx(stream.device());
  opt_into_dynamic_shared(kernel, shared_bytes, what);
  CUresult r = api().cuLaunchKernel(kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                                    stream.raw(), args, nullptr);
  if (r != CUDA_SUCCESS) {
    kiln::fail("launching {} (grid {}x{}x{}, block {}x{}x{}, {} bytes of shared memory) on cuda:{}: {}", what, grid.x,
               grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream.device(), error_string(r));
  }
}

}  // namespace kiln::runtime::cuda
