#pragma once
// Schedule tuning (issue 28 point 4; Triton's autotuner, Inductor's max-autotune): with
// CompileOptions::autotune (KILN_AUTOTUNE=1, the CLI's --autotune) each generated kernel's
// candidate schedules (codegen/schedule_candidates.h) are timed on the device and the fastest
// replaces the default. The choice is stored in the kernel cache under the kernel as the
// lowering left it (its loops and sizes, not its name or graph), the candidate list, the target
// and the device (its name, SMs and driver), so a later compile of the same kernel, in any
// process, takes it without timing again. KILN_LOGS=autotune prints every candidate's time and
// each choice found in the cache; the schedule record says which candidate won
// (ScheduleRecord::tuned: kernels.txt, kiln explain, the profiler's table).
//
// Timing runs each candidate on scratch buffers of the kernel's sizes (zero-filled: every
// index is in range), L2 flushed before each run, and takes the median of its runs. Only the
// schedule differs between candidates, so every one computes the same values; which one ran
// shows in the record. A backend that cannot time (the CPU's; CUDA with no device present)
// keeps the defaults and the report says why.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "codegen/lower.h"

namespace kiln::backend {

struct AutotuneReport {
  int kernels = 0;        // kernels with more than one candidate
  int timed = 0;          // of those, timed in this compile
  int from_cache = 0;     // of those, whose choice came from the kernel cache
  int changed = 0;        // kernels whose chosen schedule is not the default
  int candidates = 0;     // candidates timed
  int matmuls = 0;        // library calls tuned (cuBLASLt's algorithms)
  int matmuls_from_cache = 0, matmuls_changed = 0;
  double ms = 0;          // the tuner's time (NVRTC for the candidates, allocation, the runs)
  std::string skipped;    // why nothing was tuned, when nothing was
  std::string str() const;
};

// Whether this compile tunes: options.autotune, or KILN_AUTOTUNE set to anything but 0.
bool autotune_requested(const CompileOptions& options);

// Replaces each kernel of `lowered` (scheduled) by the fastest of the candidate schedules of
// its unscheduled form in `unscheduled` (same order, as codegen::lower left them).
AutotuneReport autotune(codegen::LoweredGraph& lowered, const std::vector<codegen::Kernel>& unscheduled, const codegen::Target& target,
                        const Backend& backend, const CompileOptions& options, const std::string& graph_name);

// Bumped when the stored choice's layout or what its key covers changes.
inline constexpr int kAutotuneFormatVersion = 1;

}  // namespace kiln::backend
