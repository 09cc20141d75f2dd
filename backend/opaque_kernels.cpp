#include "backend/opaque_kernels.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "ir/error.h"

namespace kiln::backend {

namespace {
struct Entry {
  CpuOpaqueKernel cpu;
  CudaOpaqueKernel cuda;
};
struct Table {
  std::mutex mu;
  std::map<Op, Entry> kernels;
};
Table& table() {
  static Table t;
  return t;
}
}  // namespace

void register_opaque_kernels(Op op, CpuOpaqueKernel cpu, CudaOpaqueKernel cuda) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (!t.kernels.emplace(op, Entry{std::move(cpu), std::move(cuda)}).second)
    fail("op '{}' already has kernels of its own", op_name(op));
}

const CpuOpaqueKernel* find_cpu_opaque_kernel(Op op) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.kernels.find(op);
  return it == t.kernels.end() || !it->second.cpu ? nullptr : &it->second.cpu;
}

const CudaOpaqueKernel* find_cuda_opaque_kernel(Op op) {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.kernels.find(op);
  return it == t.kernels.end() || it->second.cuda.source.empty() ? nullptr : &it->second.cuda;
}

CudaLaunch cuda_launch_of(const CudaOpaqueKernel& k, std::span<const TensorMeta> inputs, std::span<const TensorMeta> outputs,
                          const Attrs& attrs) {
  if (k.launch) return k.launch(inputs, outputs, attrs);
  const int64_t n = outputs.empty() ? 0 : outputs[0].numel();
  CudaLaunch l;
  l.block = 256;
  l.grid = std::clamp<int64_t>((n + l.block - 1) / l.block, 1, 65535);
  return l;
}

}  // namespace kiln::backend
