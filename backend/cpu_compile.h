#pragma once
// The CPU backend: a graph in, an executable out. compile_cpu runs
//   decompose -> canonicalize, cse, dce -> fuse -> lower (kernel IR) -> memory plan
//   -> C++ emitter -> clang+ORC JIT (one module for every kernel of the graph)
// and Executable::run executes the schedule: generated kernels and BLAS calls over one arena
// of the planned peak size, with graph inputs read in place and outputs written into the
// tensors it returns.
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codegen/lower.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "passes/fusion/fusion.h"
#include "runtime/cpu/jit.h"

namespace kiln::backend {

struct CpuCompileOptions {
  bool decompose = true;  // composites -> primitives (a composite left over is a kiln::Error)
  bool optimize = true;   // canonicalize, cse, dce
  bool fuse = true;       // false: every node its own kernel (for debugging a fused result)
  fusion::FusionOptions fusion;
  runtime::cpu::CompileOptions jit;
  std::string dump_dir;   // when set: decomposed.kir, fused.kir, fused.dot, kernels.txt, kernels.cpp, report.txt
};

struct CompileReport {
  std::string graph;
  int nodes = 0;          // after decompose and optimization
  int groups = 0;
  int kernels = 0;        // generated loop kernels
  int blas_calls = 0;
  int buffers = 0;        // arena buffers (intermediates)
  int64_t arena_bytes = 0;   // the planned peak
  int64_t naive_bytes = 0;   // every intermediate in its own memory
  std::vector<std::pair<std::string, double>> stage_ms;  // in order
  runtime::cpu::CompileStats jit;
  std::string str() const;   // the text `kiln compile` prints
};

struct ExecutableState;

class Executable {
 public:
  Executable() = default;
  explicit Executable(std::shared_ptr<const ExecutableState> s) : s_(std::move(s)) {}
  // Runs the graph; inputs must have the graph inputs' dtypes and shapes (any strides).
  // Returns contiguous outputs. kiln::Error for a wrong input, or an index out of range met
  // by a kernel (gather, scatter_add), naming the kernel.
  std::vector<HostTensor> run(std::span<const HostTensor> inputs) const;
  const codegen::LoweredGraph& lowered() const;
  const std::string& source() const;  // the C++ module

 private:
  std::shared_ptr<const ExecutableState> s_;
};

struct CompiledGraph {
  Executable executable;
  CompileReport report;
  std::vector<HostTensor> run(std::span<const HostTensor> inputs) const { return executable.run(inputs); }
};

// Compiles `g` (left unchanged). kiln::Error when a stage fails: a composite without a
// decomposition, an op with no lowering, C++ that clang rejects, or no JIT in this build.
CompiledGraph compile_cpu(const Graph& g, const CpuCompileOptions& options = {});

}  // namespace kiln::backend
