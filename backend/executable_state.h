#pragma once
// What an Executable holds: the lowered schedule, the JIT module and the kernels' addresses.
// Shared (immutable) between copies of an Executable, so runs may happen on several threads.
#include <memory>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "ir/tensor_meta.h"
#include "runtime/cpu/jit.h"

namespace kiln::backend {

using KernelFn = void (*)(void* const* buffers, const int64_t* scalars);

struct ExecutableState {
  std::string graph_name;
  std::vector<TensorMeta> input_metas;
  std::vector<std::string> input_names, output_names;
  codegen::LoweredGraph lowered;
  std::shared_ptr<runtime::cpu::CompiledModule> module;
  std::vector<KernelFn> kernels;  // per lowered kernel
  int64_t arena_bytes = 0;
  std::string source;
};

}  // namespace kiln::backend
