#pragma once
// Loaded machine code (a CUBIN from NVRTC) and kernel launches.
#include <cuda.h>

#include <map>
#include <string>
#include <string_view>

#include "runtime/cuda/stream.h"

namespace kiln::runtime::cuda {

// A module loaded into a device's primary context from CUBIN (or PTX) bytes; unloaded on
// destruction. Move-only. Bytes that do not load (wrong architecture, torn file) are a
// kiln::Error naming the module and holding the driver's JIT log.
class Module {
 public:
  Module(const std::string& image, std::string name, int device = 0);
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kernel `name` (its extern "C" name); kiln::Error naming the kernel and the module when
  // it is not there. Looked up once.
  CUfunction function(const std::string& name);
  // The device address of a __device__ variable of the module (a kernel's error record);
  // kiln::Error naming it if absent.
  CUdeviceptr global(const std::string& name) const;
  const std::string& name() const { return name_; }
  int device() const { return device_; }

 private:
  CUmodule module_ = nullptr;
  std::string name_;
  int device_ = 0;
  std::map<std::string, CUfunction> functions_;
};

// How many blocks of `block` threads (and `dynamic_shared_bytes` given at launch) of `kernel`
// one SM holds at once, by its registers, shared memory and threads; 0 when it fits none.
int resident_blocks_per_sm(CUfunction kernel, int block, unsigned dynamic_shared_bytes, int device);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Queues `kernel` on the stream. `args` points at one pointer per kernel parameter, as
// cuLaunchKernel takes them. Dynamic shared memory above the default 48 KB is opted into with
// cuFuncSetAttribute first. A launch that the driver refuses (too many threads, too much shared
// memory) is a kiln::Error naming `what`, the grid and the block; errors inside the kernel show
// up later, in synchronize_and_check.
void launch(CUfunction kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, Stream& stream, void** args,
            std::string_view what = "kernel");

}  // namespace kiln::runtime::cuda
