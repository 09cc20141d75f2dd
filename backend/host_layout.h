#pragma once
// Host-side layout helpers every backend's Program uses to bind graph inputs.
#include "ir/host_tensor.h"

namespace kiln::backend {

// A copy of `t` laid out as `meta` says (its strides, offset 0) when the graph input is
// declared with a non-contiguous layout; the storage spans the strided extent (`extent`
// elements).
HostTensor relayout(const HostTensor& t, const TensorMeta& meta, int64_t extent);

}  // namespace kiln::backend
