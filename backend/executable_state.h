#pragma once
// What an Executable holds: the lowered and scheduled graph, the generated source and the
// Program its backend loaded. Shared (immutable) between copies of an Executable, so runs
// may happen on several threads.
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "codegen/lower.h"
#include "ir/tensor_meta.h"

namespace kiln::backend {

struct ExecutableState {
  std::string graph_name;
  Device device;
  codegen::Target target;
  std::vector<TensorMeta> input_metas;
  std::vector<std::string> input_names, output_names;
  codegen::LoweredGraph lowered;
  int64_t arena_bytes = 0;
  // What else a run holds in memory besides the arena: the graph inputs' storage and the outputs
  // (each returned buffer once), in bytes; see check_memory.
  int64_t input_bytes = 0, output_bytes = 0;
  // Per lowered kernel: the graph nodes it computes, for a kernel the device compiler rejects:
  // "%e = exp(%x) : f32[4,4]; %y = mul(%e, %x) : f32[4,4]".
  std::vector<std::string> kernel_nodes;
  EmittedModule emitted;  // the prelude and each kernel's source
  std::string source;     // emitted.text(): the module the device compiler sees
  std::shared_ptr<const Program> program;
};

// Refuses a run that needs more memory than `budget` bytes, before anything is allocated:
// kiln::Error "graph g needs 3.6 TB to run (inputs 8 B, intermediates 3.6 TB in its arena,
// outputs 16 B), more than <budget_what>", where budget_what is like "this machine's 23.5 GB of
// memory". `with_inputs`: whether the inputs are part of it (not when the caller already holds
// them where the run reads them).
void check_memory(const ExecutableState& s, bool with_inputs, int64_t budget, const std::string& budget_what);

// The message of a kernel the device compiler rejects, naming the kernel and the graph nodes it
// computes: "graph f: kernel k1 (%e = exp(%x) : f32[4,4]) failed to compile: <the compiler's
// message>".
inline std::string kernel_compile_error_message(const ExecutableState& s, size_t kernel, const std::string& compiler_message) {
  const std::string& name = s.lowered.kernels.at(kernel).name;
  const std::string nodes = kernel < s.kernel_nodes.size() ? s.kernel_nodes[kernel] : s.lowered.kernels[kernel].comment;
  return "graph " + s.graph_name + ": kernel " + name + " (" + nodes + ") failed to compile: " + compiler_message;
}

// The message of an index out of range met by kernel `k` at check `site`: the op the user wrote
// (through decompositions), the value, and the kernel: "graph ce: %loss = cross_entropy (its
// gather %loss_gather): index 10 is out of range for a dimension of size 10 (kernel k1)".
inline std::string index_error_message(const ExecutableState& s, const codegen::Kernel& k, int64_t site, const std::string& what) {
  const auto& checks = s.lowered.index_checks;
  if (site >= 0 && site < static_cast<int64_t>(checks.size()))
    return "graph " + s.graph_name + ": " + checks[static_cast<size_t>(site)] + ": " + what + " (kernel " + k.name + ")";
  return "graph " + s.graph_name + ": kernel " + k.name + " (" + k.comment + "): " + what;
}

}  // namespace kiln::backend
