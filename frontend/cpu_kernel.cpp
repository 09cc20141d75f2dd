#include "frontend/cpu_kernel.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/compile.h"
#include "ir/printer.h"
#include "ir/reference/reference.h"
#include "runtime/cpu/jit.h"

namespace kiln {

namespace {

std::atomic<int> g_compiles{0};
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

// One executable per printed one-op graph (op, attributes, input types and strides), compiled
// under the lock so that two threads do not compile the same signature twice.
const backend::Executable& executable_for(const Graph& g) {
  static std::mutex mu;
  static std::map<std::string, backend::Executable> cache;
  std::string key = print_graph(g);
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  backend::CompileOptions options;
  options.device = Device::cpu();
  options.origin = "eager cpu op";
  ++g_compiles;
  return cache.emplace(key, backend::compile(g, options).executable).first->second;
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

int cpu_kernel_compiles() { return g_compiles.load(); }

std::vector<Tensor> cpu_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<HostTensor> args;
  args.reserve(inputs.size());
  for (const Tensor& t : inputs) args.push_back(t.data());
  std::vector<Tensor> out;
  if (worth_compiling(op, inputs)) {
    Graph g(std::string(op_short_name(op)));
    std::vector<Value> values;
    for (size_t i = 0; i < args.size(); ++i) values.push_back(g.add_input(fmt::format("x{}", i), args[i].meta()));
    Node* node = g.add_node(op, values, attrs, std::string(op_short_name(op)));
    std::vector<Value> results;
    for (int i = 0; i < node->num_results(); ++i) results.push_back(node->result(i));
    g.set_outputs(results);
    for (HostTensor& r : executable_for(g).run(args)) out.emplace_back(std::move(r));
    return out;
  }
  for (HostTensor& r : run_reference(op, args, attrs)) out.emplace_back(std::move(r));
  return out;
}

}  // namespace kiln
