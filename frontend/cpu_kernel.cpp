#include "frontend/cpu_kernel.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "frontend/eager_compile.h"
#include "ir/reference/reference.h"
#include "runtime/cpu/jit.h"

namespace kiln {

namespace {

std::atomic<int> g_reference_scopes{0};

// Ops worth a compile: work large enough that the reference kernel's per-element cost shows
// (a 64x176 linear over 128 rows takes ~20 ms there, ~0.1 ms compiled), on an op the CPU
// backend compiles as any graph's. Small ops, factories (no tensor inputs), random draws,
// collectives and opaque (custom) ops stay on the reference kernels.
bool worth_compiling(Op op, std::span<const Tensor> inputs) {
  if (eager_cpu_uses_reference()) return false;
  const OpCategory cat = op_info(op).category;
  if (cat == OpCategory::Collective || cat == OpCategory::Opaque || cat == OpCategory::Placeholder || cat == OpCategory::View ||
      op == Op::Rand || op == Op::Dropout || inputs.empty())
    return false;
  int64_t elements = 0;
  for (const Tensor& t : inputs) elements += t.numel();
  const bool flop_heavy = cat == OpCategory::Matmul || cat == OpCategory::Attention || op == Op::Linear || op == Op::Addmm ||
                          op == Op::Convolution;
  const int64_t threshold = flop_heavy ? 4096 : 65536;
  return elements >= threshold && runtime::cpu::jit_available();
}

}  // namespace

bool eager_cpu_uses_reference() {
  static const bool from_env = [] {
    const char* v = std::getenv("KILN_EAGER_CPU");
    return v && std::strcmp(v, "reference") == 0;
  }();
  return from_env || g_reference_scopes.load() > 0;
}

EagerCpuReference::EagerCpuReference() { ++g_reference_scopes; }
EagerCpuReference::~EagerCpuReference() { --g_reference_scopes; }

int cpu_kernel_compiles() { return eager_compiles(Device::Kind::CPU); }

std::vector<Tensor> cpu_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<HostTensor> args;
  args.reserve(inputs.size());
  for (const Tensor& t : inputs) args.push_back(t.data());
  std::vector<Tensor> out;
  if (worth_compiling(op, inputs)) {
    std::vector<TensorMeta> metas;
    for (const HostTensor& a : args) metas.push_back(a.meta());
    const Graph g = one_op_graph(op, metas, attrs);
    for (HostTensor& r : eager_executable(g, Device::cpu()).run(args)) out.emplace_back(std::move(r));
    return out;
  }
  for (HostTensor& r : run_reference(op, args, attrs)) out.emplace_back(std::move(r));
  return out;
}

}  // namespace kiln
