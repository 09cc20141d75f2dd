#pragma once
// Divisions by a value that a loop does not change (softmax's row sum, a normalization by a
// row's total) become multiplications by its reciprocal, computed once before the loop.
//
// Why: an f32 division correctly rounded is a reciprocal, a few FMAs and a check for the slow
// path, about ten instructions an element; the memory-bound row kernels (softmax over a vocabulary,
// cross-entropy's gradient) are bound by instructions, not bytes (bench/NOTES.md, stop 33 and
// 37). A multiplication by the correctly rounded reciprocal is within 1.5 ulp of the quotient,
// as accurate as torch.compile's f32 division (Triton's div.full.f32, 2 ulp) and far inside
// every f32 tolerance; f64 keeps IEEE division (who asks for f64 asks for it).
//
// The reciprocal is taken of the divisor scaled into the range where it is a normal number
// (kiln_rcp_scale: 1, 2^24 or 2^-24), and the scale multiplied back per element, so that a
// divisor below 2^-126 or above 2^126 (a sum of subnormals; a huge norm) gives a/b, not the
// infinity or the subnormal its plain reciprocal would; b = 0, inf and NaN give what a/b gives.
// Constant divisors keep their division (a compiler folds the exact ones, powers of two).
#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// The body with every f32 division by a loop-invariant, load-free divisor inside a loop
// rewritten as (a * r) * s, r and s let-bound right before the outermost loop they are
// invariant in.
StmtPtr hoist_invariant_reciprocals(const StmtPtr& body);

}  // namespace kiln::codegen
