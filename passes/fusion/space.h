#pragma once
// What fusion needs to know about one node: which iteration space it lives in and whether
// it can share a loop with others. Kept apart from the grouping so the rules read plainly.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

// The dims a reduction node reduces, normalized and sorted (every dim when `dim` is None or
// empty, as the shape rule reads it).
std::vector<int64_t> reduced_dims(const Node& n);

// The two shapes of a reduction's result space: S with the reduced dims set to 1 (keepdim)
// and S with them removed.
Shape keepdim_shape(const Shape& s, const std::vector<int64_t>& dims);
Shape removed_shape(const Shape& s, const std::vector<int64_t>& dims);

// Input-less creation ops (full, zeros, arange, constant, rand): inlined where they are read.
bool is_creation(const Node& n);
// Nodes that are a kernel of their own and never share one: matmul, bmm (BLAS), scatter_add.
bool is_extern(const Node& n);
// A view that is only an index transform of one base (no copy): not `contiguous`, not `cat`
// (several bases), not a reshape whose strides say it had to copy.
bool is_alias_view(const Node& n);

// "[0,2]" for a dim list.
std::string dims_str(const std::vector<int64_t>& dims);

}  // namespace kiln::fusion
