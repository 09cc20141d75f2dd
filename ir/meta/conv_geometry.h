#pragma once
// The geometry of a convolution and of a pooling window (sizes, strides, padding, output
// sizes), validated once and shared by the shape rules, the reference kernels and the
// decompositions, so that all three agree on what an op computes.
#include "ir/attr.h"
#include "ir/tensor_meta.h"

namespace kiln::meta {

struct ConvGeometry {
  int64_t spatial = 0;  // 1, 2 or 3
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  bool transposed = false;
  IntList kernel, stride, padding, dilation, output_padding;
  Shape in_size, out_size;  // spatial sizes
};
// kiln::Error saying what is wrong: ranks, channels against groups, a non-positive stride or
// dilation, an output size below 1, an output_padding not below the stride or dilation.
ConvGeometry conv_geometry(const TensorMeta& input, const TensorMeta& weight, const TensorMeta* bias, const Attrs& a);

struct PoolGeometry {
  int64_t spatial = 0;
  bool batched = true;  // [N, C, L...]; else [C, L...]
  bool ceil_mode = false;
  IntList kernel, stride, padding, dilation;
  Shape in_size, out_size;
};
// PyTorch's pooling_output_shape: floor (or ceil) of (L + 2p - d(k-1) - 1) / s, plus 1, a last
// window that would start in the right padding dropped; padding at most half the kernel.
PoolGeometry pool_geometry(const TensorMeta& x, const Attrs& a);

}  // namespace kiln::meta
