#pragma once
// The executor: what running a compiled program means, once for every device. It binds a run's
// buffers (graph inputs in place or laid out as the graph declares, the intermediates in one
// arena at their planned offsets, each output once in memory of its own) and walks the lowered
// steps in order: kernels, GEMMs, custom ops' own kernels and collectives, each collective
// started asynchronously and waited for before the first step that touches its result, every
// step timed when the profiler (backend/profile.h) or KILN_LOGS=perf asks. What differs per
// device is the small interface below; the CPU and CUDA Programs are adapters over it.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/executable_state.h"
#include "codegen/lower.h"

namespace kiln::backend {

// Where a run's buffers live on one device.
class RunMemory {
 public:
  virtual ~RunMemory() = default;
  // Graph input `i` as the graph declares it (`gb.meta`: its strides), spanning `gb.numel`
  // elements: the caller's memory where it already is so laid out, else a copy kept for the run.
  virtual void* input(const codegen::GraphBuffer& gb) = 0;
  // The run's arena of intermediates, `bytes` long.
  virtual void* arena(int64_t bytes) = 0;
  // Memory of its own for output `o`, contiguous `meta` (every element is written by the run).
  virtual void* output(size_t o, const TensorMeta& meta) = 0;
};

// Every buffer's address for one run; an output returned twice is bound once (at its first
// position: duplicate_outputs says where the others must be copied from).
std::vector<void*> bind_buffers(const codegen::LoweredGraph& lg, RunMemory& memory, int64_t arena_bytes);

// For each output returned again at a later position: (that position, its first position).
std::vector<std::pair<size_t, size_t>> duplicate_outputs(const codegen::LoweredGraph& lg);

// What one device does for each kind of step.
class DeviceSteps {
 public:
  virtual ~DeviceSteps() = default;
  virtual void kernel(const codegen::Step& step, const std::vector<void*>& ptr) = 0;
  virtual void gemm(const codegen::MatmulCall& mm, const std::vector<void*>& ptr) = 0;
  virtual void opaque(size_t step_index, const codegen::OpaqueCall& c, const std::vector<void*>& ptr) = 0;
  // A collective on `in` -> `out`: done before it returns (-1), or started (a token that
  // wait_collective takes, once, before the first step that touches `out`).
  virtual int start_collective(const codegen::OpaqueCall& c, void* in, void* out) = 0;
  virtual void wait_collective(int token) = 0;
  // Step timing: whether this device can time steps now (not while a CUDA graph is being
  // captured), a mark before each step and one after the last, and the marks' times in ms
  // from the first (waiting for the device where it must).
  virtual bool can_time() const = 0;
  virtual void mark() = 0;
  virtual std::vector<double> mark_ms() = 0;
};

// Walks `s.lowered.steps` over `ptr`. Every kind of step, a GEMM too, first waits for the
// collectives in flight whose results it touches; the run ends with every collective waited
// for. With a StepRecorder on this thread it records each step's start and duration, and with
// KILN_LOGS=perf it logs them as a table.
void run_steps(const ExecutableState& s, DeviceSteps& device, const std::vector<void*>& ptr);

}  // namespace kiln::backend
