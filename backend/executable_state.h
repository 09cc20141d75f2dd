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
  std::string source;
  std::shared_ptr<const Program> program;
};

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
