#pragma once
// Attention's kernels: a kernel kind of its own (AttentionKernel in codegen/kernel_ir.h). The
// lowering (codegen/lower_attention.cpp) makes one kernel for flash_attention and two for its
// backward (dK and dV per key tile, dQ per query tile: no atomics, so the results are
// deterministic); schedule_attention picks each kernel's tiles for its target and records them;
// the emitters print a call of the target's routine, written once in its prelude
// (codegen/attention_prelude.cpp).
#include <string_view>

#include "codegen/kernel_ir.h"
#include "codegen/target.h"

namespace kiln::codegen {

// kiln's dtype as the preludes' routines number it (kiln_attn_type<N>): f32 0, f64 1, f16 2, bf16 3.
int attention_dtype_code(DType dt);

// CUDA: blocks of 128 threads, one per (batch, tile); heads padded to a multiple of 16. On
// tensor cores, tiles of 64 rows walking tiles of 64 (the dK/dV pass walks 32 queries at heads
// past 64, so that its accumulators fit in registers), the walked tiles double-buffered; on
// FFMA, the largest tiles (64, 32 or 16 rows) whose shared memory fits the opt-in limit.
// CPU: tiles of 32 rows (the prelude's), one task of the pool per (batch, tile), on the calling
// thread when the whole call is small. Sets the launch and the schedule record.
void schedule_attention(Kernel& k, const Target& t);

// The routines, appended to each target's prelude (the CUDA one with its tensor-core routines,
// codegen/attention_prelude_mma.cpp).
std::string_view cuda_attention_prelude();
std::string_view cuda_attention_mma_prelude();
std::string_view cpp_attention_prelude();

}  // namespace kiln::codegen
