#include "ir/meta/conv_geometry.h"

#include "ir/error.h"

namespace kiln::meta {

namespace {

// One value for every spatial dim, or one per dim.
IntList per_dim(const IntList& v, int64_t n, const char* what, std::optional<int64_t> dflt = std::nullopt) {
  if (v.empty() && dflt) return IntList(n, *dflt);
  if (v.size() == 1) return IntList(n, v[0]);
  if (static_cast<int64_t>(v.size()) != n) fail("{} has {} values; give 1 or {} (one per spatial dim)", what, v.size(), n);
  return v;
}

}  // namespace

ConvGeometry conv_geometry(const TensorMeta& input, const TensorMeta& weight, const TensorMeta* bias, const Attrs& a) {
  ConvGeometry g;
  g.spatial = weight.rank() - 2;
  if (g.spatial < 1 || g.spatial > 3) fail("weight {} must have 3, 4 or 5 dims (1 to 3 spatial)", shape_str(weight.shape));
  if (input.rank() != g.spatial + 2)
    fail("input {} must be [N, C, {} spatial dims] for a weight of {} dims (add a batch dim of 1 to an unbatched input)",
         shape_str(input.shape), g.spatial, weight.rank());
  if (!is_floating(input.dtype)) fail("convolution takes floating-point tensors, got {}", dtype_name(input.dtype));
  if (weight.dtype != input.dtype) fail("input is {} but weight is {}", dtype_name(input.dtype), dtype_name(weight.dtype));
  g.transposed = a.get_bool("transposed");
  g.groups = a.get_int("groups");
  if (g.groups < 1) fail("groups must be at least 1, got {}", g.groups);
  g.batch = input.shape[0];
  g.in_channels = input.shape[1];
  if (g.in_channels % g.groups) fail("{} input channels do not split into {} groups", g.in_channels, g.groups);
  if (g.transposed) {
    if (weight.shape[0] != g.in_channels)
      fail("a transposed convolution's weight {} must have the input's {} channels first", shape_str(weight.shape), g.in_channels);
    g.out_channels = weight.shape[1] * g.groups;
  } else {
    if (weight.shape[0] % g.groups) fail("{} output channels do not split into {} groups", weight.shape[0], g.groups);
    if (weight.shape[1] * g.groups != g.in_channels)
      fail("weight {} expects {} input channels ({} per group), the input has {}", shape_str(weight.shape), weight.shape[1] * g.groups,
           weight.shape[1], g.in_channels);
    g.out_channels = weight.shape[0];
  }
  if (bias) {
    if (bias->shape != Shape{g.out_channels}) fail("bias {} must be [{}]", shape_str(bias->shape), g.out_channels);
    if (bias->dtype != input.dtype) fail("bias is {} but input is {}", dtype_name(bias->dtype), dtype_name(input.dtype));
  }
  g.kernel.assign(weight.shape.begin() + 2, weight.shape.end());
  g.stride = per_dim(a.get_ints("stride"), g.spatial, "stride");
  g.padding = per_dim(a.get_ints("padding"), g.spatial, "padding");
  g.dilation = per_dim(a.get_ints("dilation"), g.spatial, "dilation");
  g.output_padding = per_dim(a.get_ints("output_padding"), g.spatial, "output_padding");
  g.in_size.assign(input.shape.begin() + 2, input.shape.end());
  for (int64_t d = 0; d < g.spatial; ++d) {
    if (g.stride[d] < 1) fail("stride must be positive, got {}", shape_str(g.stride));
    if (g.dilation[d] < 1) fail("dilation must be positive, got {}", shape_str(g.dilation));
    if (g.padding[d] < 0) fail("padding must not be negative, got {}", shape_str(g.padding));
    if (g.output_padding[d] < 0 || (g.output_padding[d] && !g.transposed))
      fail("output_padding {} is for transposed convolutions, each below the stride or the dilation", shape_str(g.output_padding));
    if (g.transposed && g.output_padding[d] >= std::max(g.stride[d], g.dilation[d]))
      fail("output_padding {} must be below the stride or the dilation", shape_str(g.output_padding));
    if (g.kernel[d] < 1) fail("kernel size must be positive, got weight {}", shape_str(weight.shape));
    int64_t reach = g.dilation[d] * (g.kernel[d] - 1) + 1;
    int64_t out = g.transposed ? (g.in_size[d] - 1) * g.stride[d] - 2 * g.padding[d] + reach + g.output_padding[d]
                               : (g.in_size[d] + 2 * g.padding[d] - reach) / g.stride[d] + 1;
    if (!g.transposed && g.in_size[d] + 2 * g.padding[d] < reach)
      fail("the kernel reaches {} elements in spatial dim {}, the padded input has {}", reach, d, g.in_size[d] + 2 * g.padding[d]);
    if (out < 1 && g.in_size[d] > 0) fail("the output's spatial dim {} would be {}", d, out);
    g.out_size.push_back(std::max<int64_t>(out, 0));
  }
  return g;
}

PoolGeometry pool_geometry(const TensorMeta& x, const Attrs& a) {
  PoolGeometry g;
  g.kernel = a.get_ints("kernel_size");
  g.spatial = static_cast<int64_t>(g.kernel.size());
  if (g.spatial < 1 || g.spatial > 3) fail("kernel_size {} must have 1 to 3 values", shape_str(g.kernel));
  if (x.rank() != g.spatial + 1 && x.rank() != g.spatial + 2)
    fail("input {} must be [N, C, {} spatial dims] or [C, ...]", shape_str(x.shape), g.spatial);
  if (!is_floating(x.dtype)) fail("pooling takes floating-point tensors, got {}", dtype_name(x.dtype));
  g.batched = x.rank() == g.spatial + 2;
  g.stride = per_dim(a.get_ints("stride"), g.spatial, "stride", 0);
  for (int64_t d = 0; d < g.spatial; ++d)
    if (g.stride[d] == 0) g.stride[d] = g.kernel[d];
  g.padding = per_dim(a.get_ints("padding"), g.spatial, "padding");
  g.dilation = a.has("dilation") ? per_dim(a.get_ints("dilation"), g.spatial, "dilation") : IntList(g.spatial, 1);
  g.ceil_mode = a.get_bool("ceil_mode");
  g.in_size.assign(x.shape.end() - g.spatial, x.shape.end());
  for (int64_t d = 0; d < g.spatial; ++d) {
    int64_t k = g.kernel[d], s = g.stride[d], p = g.padding[d], dil = g.dilation[d], L = g.in_size[d];
    if (k < 1 || s < 1 || dil < 1) fail("kernel_size, stride and dilation must be positive");
    if (p < 0 || 2 * p > k) fail("padding {} must be at most half the kernel size {}", shape_str(g.padding), shape_str(g.kernel));
    int64_t span = L + 2 * p - dil * (k - 1) - 1;
    if (span < 0) fail("the window reaches {} elements in spatial dim {}, the padded input has {}", dil * (k - 1) + 1, d, L + 2 * p);
    int64_t out = (span + (g.ceil_mode ? s - 1 : 0)) / s + 1;
    if (g.ceil_mode && (out - 1) * s >= L + p) --out;
    g.out_size.push_back(out);
  }
  return g;
}

}  // namespace kiln::meta
