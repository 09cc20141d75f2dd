#pragma once
// What the passes know about compile-time constants: values computed by creation ops (full,
// zeros, ones, arange, constant), which take no tensor inputs. Constant folding replaces
// whatever it evaluates by such a node, so "constant" covers folded values too.
#include <optional>

#include "ir/graph.h"

namespace kiln {

bool is_constant(Value v);

// The single number every element of constant `v` holds, read in v's dtype (so full(0.5)
// as i64 is 0); nullopt when the elements differ, when v has no elements, or when v is not
// a constant. Reads attributes only: never runs a kernel.
std::optional<double> splat_value(Value v);

// Whether two element values are the same number: nan equals nan, and -0.0 differs from
// 0.0 (1/x tells them apart, so folding must not merge them).
bool same_number(double a, double b);

}  // namespace kiln
