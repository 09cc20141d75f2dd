#pragma once
// Values a held row's later pass would compute again, kept in registers from the pass that
// computed them first (a CUDA schedule decision, after the rows to hold are chosen).
//
// Softmax and cross-entropy's gradient walk a held row three times: the max, then the sum of
// exp(x - max), then the output, which computes exp(x - max) again (the lowering inlines a
// pointwise value into every loop that reads it). The sum's pass can leave each exp in the
// registers that held x, when nothing after it reads x itself: then the output pass reads them,
// and the registers a thread needs do not grow (x's die as the exps are born). An f32 exp is
// about nine instructions an element in kernels bound by instructions (bench/NOTES.md, stop 37).
#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// Sets Stmt::kept_lets on every row loop of `k` that holds rows in registers, where a later
// share loop's f32 let equals, element for element, a let of an earlier share loop, and keeping
// it leaves no later read of a held row (so no register is added); records them in k.schedule.
void keep_recomputed_values(Kernel& k);

// `body` without the lets nothing else in it reads (in order). What the CUDA emitter prints of a
// share loop whose kept lets read registers: the lets that only fed them go.
std::vector<StmtPtr> without_dead_lets(const std::vector<StmtPtr>& body);

}  // namespace kiln::codegen
