#pragma once
// Constant folding: a node all of whose inputs are constants (creation ops with no inputs,
// including those this pass made) is evaluated with the op's reference kernel and replaced
// by a creation node: `full` when every element is the same number, else `constant` with
// the values when there are at most 4096 of them and some input is a `constant` already (a
// result computed from indices alone, reshape(arange(n)), stays: a kernel computes it from
// its index, where a table would be read). Larger non-uniform results stay as they are, and
// creation nodes themselves are never "folded" (zeros/ones stay zeros/ones).
//
// A folded value is contiguous, so a folded view (transpose of a constant) loses its
// strides; downstream types are re-inferred. KILN_LOGS=constant_fold says what was folded
// and why a candidate was skipped.
#include "ir/graph.h"

namespace kiln {

bool run_constant_fold(Graph& g);  // whether it folded anything

// A result with more elements than this and not all equal stays unfolded.
inline constexpr int64_t kMaxFoldedConstantElements = 4096;
// Nothing is evaluated whose inputs or results exceed this many elements: folding must not
// make compilation allocate gigabytes (a uniform 4M-element result still becomes a `full`).
inline constexpr int64_t kMaxFoldEvalElements = int64_t{1} << 22;

}  // namespace kiln
