#pragma once
// What every tuner in kiln shares (backend/autotune.h's schedules, runtime/cuda/cublaslt.h's
// algorithms): when a timed candidate counts as faster than the default, and what one tuning
// decided.
#include <algorithm>
#include <string>

namespace kiln::runtime {

// A candidate replaces the default only when it beats it by 2% and by 1 us: CUDA events resolve
// about half a microsecond, and a few-microsecond kernel otherwise changes schedule by noise
// (MiniGPT's 68 small kernels went 58 times off the default with the step no faster).
inline bool clearly_faster(double candidate_ms, double default_ms) {
  return candidate_ms <= std::min(0.98 * default_ms, default_ms - 0.001);
}

// One tuning's outcome: the sentence the logs and the schedule record show, whether the choice
// came from the kernel cache, and whether it left the default.
struct TuningOutcome {
  std::string said;
  bool from_cache = false;
  bool changed = false;
};

}  // namespace kiln::runtime
