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

}  // namespace kiln::backend
