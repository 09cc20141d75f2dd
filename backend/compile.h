#pragma once
// The compile driver: one pipeline, whatever the device (Inductor's compile_fx). A graph in,
// an Executable out:
//   passes (passes/pipeline.h's compile_pipeline: decompose, collectives_dim0, canonicalize,
//   constant_fold, cse, dce on the pass manager: verified, timed and dumped after each) -> fuse -> lower to kernel IR for the device's Target -> schedule
//   (loops mapped to threads / blocks) -> memory plan -> emit (C++ or CUDA C)
//   -> compile through the kernel cache (clang+ORC or NVRTC) -> load
// What differs per device sits behind backend/backend.h: a Target, an emitter, a compiler
// and a Program that runs the schedule on the device. Executable::run takes host tensors on
// every device; run_on_device takes a device's own storage (backend/device_storage.h).
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/device_storage.h"
#include "codegen/lower.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "passes/fusion/fusion.h"
#include "passes/pass_manager.h"
#include "runtime/cpu/jit.h"

namespace kiln::backend {

// How compiled code runs on its device: the user's choice, carried whole from
// kiln::CompileOptions (frontend/compile.h) through CompileOptions into the device's Program.
struct RunOptions {
  bool cuda_graphs = false;  // CUDA: record the launches as a CUDA graph on the first run, replay it after
  bool allow_tf32 = false;   // CUDA: f32 matmuls may use TF32 tensor cores (off: f32 means f32, as PyTorch)
};

struct CompileOptions {
  bool decompose = true;  // composites -> primitives (a composite left over is a kiln::Error)
  bool optimize = true;   // canonicalize, cse, dce
  bool fuse = true;       // false: every node its own kernel (for debugging a fused result)
  fusion::FusionOptions fusion;
  runtime::cpu::CompileOptions jit;  // the CPU compiler (clang+ORC)
  // When set: passes/NN_<pass>.kir, decomposed.kir, fused.kir, fused.dot, kernels.txt (the
  // scheduled kernel IR), kernels.cpp or kernels.cu (+ kernels.ptx, kernels.cubin), report.txt.
  std::string dump_dir;
  Device device = Device::cpu();
  std::string arch;         // CUDA: "sm_90"; empty: the device's own (sm_90 where there is none)
  RunOptions run;
  // Time each generated kernel's candidate schedules on the device and keep the fastest
  // (backend/autotune.h); KILN_AUTOTUNE=1 turns it on for every compile.
  bool autotune = false;
  // The schedule's knobs for every kernel, as the tuner names its candidates
  // ("reduction_block 128, held_bytes_per_thread 64"; codegen/schedule_candidates.h): to run
  // one candidate everywhere (tests, kiln compile --schedule). Empty: the target's own.
  std::string schedule_knobs;
  // Who asked for the compile, for the log lines (output_code, perf) and the debug folder's
  // report.json: "kiln::compile 'mlp'", "eager cuda op", "Trainer", "kiln compile", ...
  std::string origin;
};
// The name the CPU backend's callers knew; the options are the same for every device.
using CpuCompileOptions = CompileOptions;

// compile()'s stages before lowering, for other views of the same pipeline (backend/explain.h):
// the passes on `g` in place (compile_pipeline of passes/pipeline.h until nothing changes, at
// most 4 rounds; each graph dumped into dump_dir when it is given), and
// the fusion options (options.fusion, everything off without options.fuse, matmul epilogues
// where the target's GEMM has them).
PassReport run_compile_passes(Graph& g, const CompileOptions& options, const std::string& dump_dir = "");
fusion::FusionOptions compile_fusion_options(const CompileOptions& options, const codegen::Target& target);

struct CompileReport {
  std::string graph;
  std::string device;     // "cpu", "cuda sm_90"
  int nodes = 0;          // after decompose and optimization
  int groups = 0;
  int kernels = 0;        // generated loop kernels
  int blas_calls = 0;     // matmuls through BLAS (CPU) or cuBLASLt (CUDA)
  int opaque_calls = 0;   // custom ops' own kernels (backend/opaque_kernels.h)
  int collective_calls = 0;  // calls of the process group's engine (runtime/dist)
  int buffers = 0;        // arena buffers (intermediates)
  int64_t arena_bytes = 0;   // the planned peak
  int64_t naive_bytes = 0;   // every intermediate in its own memory
  std::vector<std::pair<std::string, double>> stage_ms;  // in order
  PassReport passes;      // each pass run by the pass manager
  runtime::cpu::CompileStats jit;  // the CPU compiler (empty on other devices)
  std::string compiler;   // one line about the device compiler ("nvrtc 13.0: 4 kernels ...")
  std::string autotune;   // one line about schedule tuning, when it was asked for
  std::string debug_folder;  // the folder KILN_DEBUG_DIR gave this compile ("" when none)
  std::string str() const;   // the text `kiln compile` prints
};

struct ExecutableState;

class Executable {
 public:
  Executable() = default;
  explicit Executable(std::shared_ptr<const ExecutableState> s) : s_(std::move(s)) {}
  // Runs the graph; inputs must have the graph inputs' dtypes and shapes (any strides).
  // Returns contiguous host outputs. kiln::Error for a wrong input, or an index out of range
  // met by a kernel (gather, scatter_add), naming the kernel.
  std::vector<HostTensor> run(std::span<const HostTensor> inputs) const;
  const codegen::LoweredGraph& lowered() const;
  const std::string& source() const;  // the generated module (C++ or CUDA C)
  const Device& device() const;
  const ExecutableState& state() const;

 private:
  std::shared_ptr<const ExecutableState> s_;
};

struct CompiledGraph {
  Executable executable;
  CompileReport report;
  std::vector<HostTensor> run(std::span<const HostTensor> inputs) const { return executable.run(inputs); }
};

// Compiles `g` (left unchanged) for options.device: the one entry of every compile. Without a
// dump_dir, KILN_DEBUG_DIR gives the graph a numbered folder of its own (backend/debug_dump.h);
// KILN_LOGS=output_code prints the generated source, KILN_LOGS=perf the report. kiln::Error when a stage fails: a
// composite without a decomposition, an op with no lowering, source the device compiler
// rejects (with its log), a device whose backend is not in this build.
CompiledGraph compile(const Graph& g, const CompileOptions& options = {});
// Runs `exe` on inputs in its device's own memory (not the CPU's): storages of that device
// with the graph inputs' dtypes and shapes (any strides); returns new storages, with no host
// copy. kiln::Error for a CPU executable or a wrong input (naming it), or what the device's
// run reports (an out-of-range gather index, naming the kernel).
std::vector<StoragePtr> run_on_device(const Executable& exe, std::span<const StoragePtr> inputs);
// compile() for the CPU, whatever options.device says.
CompiledGraph compile_cpu(const Graph& g, CompileOptions options = {});

// Per-dtype tolerance of a compiled output against the reference interpreter:
// |got - want| <= atol + rtol*|want| (f32 1e-5, f64 1e-9, f16 1e-2, bf16 2e-2; integers and
// bools exact). Kernels compute f32 in f32 where the reference computes in f64, and keep
// f16/bf16 intermediates in f32.
struct Tolerance {
  double atol = 0, rtol = 0;
};
Tolerance tolerance_of(DType t);

}  // namespace kiln::backend
