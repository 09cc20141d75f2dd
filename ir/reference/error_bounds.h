#pragma once
// How far a correct compiled kernel may land from exact arithmetic, element by element: the
// conditioning allowance of kiln fuzz. The reference computes each op in double and rounds once;
// compiled code computes in the dtype (f32 for f16/bf16), uses approximations a few ulps off,
// contracts into FMAs and sums in its own order. Where a graph amplifies such differences (a
// mean subtracted from equal values and divided by sqrt(eps), a gradient that cancels before it
// is multiplied by 1/x^2, cos of exp of a large value), a right compiler lands far from the
// reference.
//
// A first-order running error bound is carried through the decomposed graph beside its values
// (each a float64 tensor laid out like its value):
// - each primitive adds its own rounding: 1 ulp for arithmetic (add, mul, div, sqrt, ...),
//   4 ulps for transcendentals (exp, log, pow, erf, tanh, ...), u * sqrt(n) * sum|terms| for an
//   n-term sum, mean, matmul or scatter_add, in the dtype it computes in (f32 for f16/bf16),
//   and an ulp of f16/bf16 for storing one or casting to one (the reference and compiled code
//   may round apart);
// - and passes on its inputs' bounds: linear ops with non-negative weights (views, cat, sums,
//   gather, where, max/min) apply themselves to the bounds; matmul uses |A| E_B + E_A |B|;
//   1-Lipschitz ops (neg, abs, relu, clamp, sin, cos, tanh) pass them through, capped by their
//   range; every other op is probed at x + E, x - E, and 0 where [x - E, x + E] holds it.
// Integer and bool results get a bound too: infinite where compiled code may differ (a
// comparison of values within their bounds, an argmax of near ties, a cast), 0 elsewhere; a
// float computed from an unsure one (where(cond, ...), a gather at an unsure index) is unsure.
// An element whose bound is not finite (or, for integers, not 0) is ill-conditioned and not
// judged.
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

// The bound of each output of `decomposed` (a float64 tensor; for an integer or bool output,
// undefined where no element is unsure), from running it on `inputs` with the reference
// interpreter.
std::vector<HostTensor> error_bounds(const Graph& decomposed, const std::vector<HostTensor>& inputs);

}  // namespace kiln
