#pragma once
// The backend interface: what one device adds to the shared compile driver
// (backend/compile.h). Four things, each small:
//   target   — the codegen::Target the lowering and schedule step read;
//   emit     — the target's prelude, and one source per scheduled kernel (codegen's C++ or
//              CUDA C emitter); the module is their concatenation (EmittedModule);
//   compile  — that source -> a Program loaded on the device, through the shared
//              content-addressed kernel cache (runtime/kernel_cache.h);
//   execute  — Program::run: binds buffers and runs the schedule (backend/executor.h);
// and, optionally, the memory budget a graph must fit in (Backend::memory_budget), and for a
// device with memory of its own, its storage (backend/device_storage.h: copy_from_host, and
// Program::run_on_device). backend/registry.h says which backend serves which device kind;
// docs/adding-a-backend.md walks through adding one.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/device_storage.h"
#include "codegen/kernel_ir.h"
#include "codegen/lower.h"
#include "codegen/target.h"
#include "ir/host_tensor.h"
#include "runtime/tuning.h"

namespace kiln::backend {

struct CompileOptions;
struct CompileReport;
struct ExecutableState;

// What the emitter made of a graph's kernels: the target's prelude and one source per kernel,
// each emitted once. The module a compiler sees is the prelude, then each kernel after a newline.
struct EmittedModule {
  std::string prelude;
  std::vector<std::string> kernels;  // per lowered kernel
  std::string text() const;
  // The kernel whose source holds `line` (1-based) of text(); -1 for a line of the prelude.
  int kernel_at_line(int line) const;
};

// A compiled graph's code, loaded on its device; immutable, shared by copies of an Executable.
class Program {
 public:
  virtual ~Program() = default;
  // Runs the schedule of `s` on host inputs already checked against the graph's signature;
  // returns contiguous host outputs.
  virtual std::vector<HostTensor> run(const ExecutableState& s, std::span<const HostTensor> inputs) const = 0;
  // Runs on inputs in the device's own memory (storages its backend made, on this program's
  // device, with the graph inputs' dtypes and shapes: run_on_device in backend/compile.h
  // checked them); returns new storages. A program of the host's memory (the CPU's) has none:
  // its default is a kiln::Error.
  virtual std::vector<StoragePtr> run_on_device(const ExecutableState& s, std::span<const StoragePtr> inputs) const;
  // Per kernel, the grid it launches with where the device chose it at load (a persistent
  // kernel's, codegen::LaunchConfig::persistent: what the SMs hold at once); empty before the
  // first run and on devices that do not choose.
  virtual std::vector<int64_t> launched_grids() const { return {}; }
};

// How much memory a compiled graph's runs may use on a device, and how to say it in an error:
// {bytes, "this machine's 23.5 GB of memory"}.
struct MemoryBudget {
  int64_t bytes = 0;
  std::string what;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  // "cpu", "cuda"
  virtual codegen::Target target(const CompileOptions& options) const = 0;
  // The emitter: what every module starts with, and one kernel's source.
  virtual std::string_view prelude() const = 0;
  virtual std::string emit_kernel(const codegen::Kernel& kernel) const = 0;
  virtual std::string source_file_name() const = 0;  // kernels.cpp, kernels.cu
  // Compiles state.source for state.lowered; records the compiler's figures in `report`
  // (and writes device-code files to options.dump_dir when set).
  virtual std::shared_ptr<const Program> compile(const ExecutableState& state, const CompileOptions& options,
                                                 CompileReport& report) const = 0;
  // What the compile driver checks a graph's memory against (check_memory in
  // executable_state.h) before compiling it: the host's memory for the CPU, the device's for
  // CUDA; nullopt when unknown (a CUDA compile on a machine with no GPU).
  virtual std::optional<MemoryBudget> memory_budget(const CompileOptions&) const { return std::nullopt; }

  // ---- tuning (backend/autotune.h)
  // What a tuned choice holds for on options.device, as part of its cache key ("NVIDIA H200,
  // 132 SMs, driver 13000"); nullopt, with `why`, when this backend cannot time kernels there.
  virtual std::optional<std::string> tuning_device(const CompileOptions& options, std::string* why) const;
  // Milliseconds per run of each of `candidates` (schedules of one kernel: the same buffers,
  // distinct names), timed on options.device. The default: a kiln::Error.
  virtual std::vector<double> time_kernels(const std::vector<codegen::Kernel>& candidates, const CompileOptions& options) const;
  // Each library call of `lowered` (cuBLASLt's matmuls) tuned on options.device: what each got,
  // in step order. The default: none.
  virtual std::vector<runtime::TuningOutcome> tune_matmuls(const codegen::LoweredGraph&, const CompileOptions&) const { return {}; }

  // ---- a device with memory of its own (not the CPU's: its tensors are HostTensors)
  // Whether `device` can run kernels here; when not, `why` says what is missing (no driver,
  // no such device).
  virtual bool device_present(const Device& device, std::string* why) const;
  // A contiguous copy of `host` in `device`'s memory. Default: a kiln::Error (the host's
  // memory needs no copy).
  virtual StoragePtr copy_from_host(const HostTensor& host, const Device& device) const;
};

// Every kernel of `kernels` emitted once by `backend`.
EmittedModule emit(const Backend& backend, const std::vector<codegen::Kernel>& kernels);

const Backend& cpu_backend();
#if KILN_HAVE_CUDA
const Backend& cuda_backend();
#endif

}  // namespace kiln::backend
