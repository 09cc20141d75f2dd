#pragma once
// The schedules a tuner times (CompileOptions::autotune; backend/autotune.h): for one lowered
// kernel, its default schedule first, then the few variants of the Target's schedule knobs
// that the default's mapping reads (Triton's autotune configs, Inductor's
// max-autotune of its reduction and pointwise configs): a grid-stride loop's block and grid,
// a warp-per-row kernel's rows per block or a block per row instead, a block-per-row kernel's
// block and held bytes, a chunk kernel's held bytes, a tiled kernel's blocks per SM. Variants
// that schedule to the same kernel as one before them (a short row's block does not grow
// with reduction_block) are dropped, so a kernel the knobs cannot change has one candidate.
// Attention's forward on tensor cores varies its query rows a warp; attention's backward passes,
// cluster rows and kernels on one thread are not varied.
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/target.h"

namespace kiln::codegen {

struct ScheduleCandidate {
  std::string knobs;  // what differs from the target: "default", "pointwise_block 128, blocks_per_sm 16"
  Kernel kernel;      // scheduled under those knobs (verified)
};

// `unscheduled`: a kernel as the lowering left it. CUDA targets only; a CPU target gets its
// default alone.
std::vector<ScheduleCandidate> schedule_candidates(const Kernel& unscheduled, const Target& target);

// Every variant any mapping gets on `target`, as named in ScheduleCandidate::knobs (for tests
// that run each one).
std::vector<std::string> every_candidate_knobs(const Target& target);

// The knobs of `knobs` (as schedule_candidates names them) applied to `target`; a kiln::Error
// for a name it does not know.
Target with_knobs(Target target, const std::string& knobs);

}  // namespace kiln::codegen
