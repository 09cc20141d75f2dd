#pragma once
// The profiler: where a compiled graph's time goes, step by step (each generated kernel and
// each BLAS/cuBLASLt call), as `kiln profile` prints it and as a Chrome trace (Perfetto,
// chrome://tracing). "Which kernel takes more than 5% of the step, and why."
//
//   backend::CompiledGraph c = backend::compile(g, {.device = Device::cuda()});
//   backend::Profile p = backend::profile(c.executable, inputs, /*runs=*/20);
//   fmt::print("{}", p.table());
//   write_text("trace.json", p.chrome_trace());
//
// Times: on the CPU the host clock around each step; on CUDA events around each step (device
// time). Each step's time is its median over the runs; GB/s counts the bytes of every buffer
// the step reads or writes once.
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/compile.h"

namespace kiln::backend {

// Backends call these around their steps while a recorder is active on the thread.
struct StepTime {
  double start_ms = 0;  // from the start of the run
  double ms = 0;
};
class StepRecorder {
 public:
  StepRecorder();   // active on this thread until destroyed
  ~StepRecorder();
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;
  // The recorder of this thread, or null: a backend checks it once per run.
  static StepRecorder* current();
  std::vector<StepTime> steps;  // of the last run, one per schedule step
};

struct StepProfile {
  int step = 0;          // in the schedule
  std::string kind;      // "kernel", "BLAS" (CPU) or "cuBLASLt" (CUDA)
  std::string name;      // the kernel's name or the GEMM's label
  std::string computes;  // the graph nodes it computes
  std::string schedule;  // a GPU kernel: how the schedule mapped it and why (codegen::print_schedule)
  int64_t bytes = 0;     // every buffer it reads or writes, once
  double ms = 0;         // median over the runs
  double start_ms = 0;   // in the median run
  double gbps() const { return ms > 0 ? bytes / (ms * 1e6) : 0; }
};

struct Profile {
  std::string graph, device;
  int runs = 0;
  double run_ms = 0;             // median wall time of a whole run (launch and synchronize included)
  bool host_copies = false;      // a run copies its inputs from and its outputs to the host (profile())
  std::vector<StepProfile> steps;  // in schedule order
  double steps_ms() const;       // the sum of the steps' medians
  // The steps sorted by time: time, % of the steps' sum, GB/s, kind, name, what each computes;
  // above them, the totals by kind (kernels, cuBLASLt calls, ...).
  std::string table() const;
  // One line: the totals by kind, each its steps, ms and % of the steps' sum.
  std::string totals_by_kind() const;
  // Chrome's trace event format: one complete event ("X") per step of the median run.
  std::string chrome_trace() const;
};

// The median of timings (the upper middle of an even count; 0 for none): the profiler's and the
// tuner's.
double median_of(std::vector<double> v);

// Runs the executable `runs` times after one warm-up run, recording every step.
// kiln::Error for runs < 1 or a failing run.
Profile profile(const Executable& exe, std::span<const HostTensor> inputs, int runs = 10);

// The same, where `run_once` runs `exe` once as the caller runs it (the CUDA benchmark: on
// inputs already on the device, so that no host copy is timed): one warm-up call, then `runs`.
Profile profile_runs(const Executable& exe, const std::function<void()>& run_once, int runs = 10);

}  // namespace kiln::backend
