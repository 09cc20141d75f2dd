#pragma once
// Shape-and-dtype rules ("meta functions"), one per row of ir/ops.def. Each receives the
// input metas and the completed attributes (defaults filled in) and returns the result metas,
// or throws kiln::Error saying what is wrong; the caller adds the op name and input shapes.
#include <span>
#include <vector>

#include "ir/attr.h"
#include "ir/tensor_meta.h"

namespace kiln::meta {

using Metas = std::vector<TensorMeta>;
using In = std::span<const TensorMeta>;

// PyTorch's result_type: dimensioned tensors outrank zero-dim ones, unless a zero-dim tensor
// is of a higher kind (bool < integral < floating).
DType result_type(In inputs);

#define KILN_OP(E, name, cat, schema, meta_fn) Metas meta_fn(In in, const Attrs& a);
#include "ir/ops.def"
#undef KILN_OP

// Helpers shared by rules.
std::vector<bool> reduced_dims(const TensorMeta& t, const std::optional<IntList>& dims);  // None/[] = all
Shape reduce_shape(const Shape& s, const std::vector<bool>& reduced, bool keepdim);
// Strides of `shape` viewing memory laid out as (old_shape, old_strides), if a view exists
// (PyTorch's computeStride); nullopt when reshape must copy.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape);
// reshape's target with one -1 inferred; throws on a mismatch.
Shape infer_reshape(const Shape& from, const IntList& to);

}  // namespace kiln::meta
