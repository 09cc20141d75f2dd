#include "frontend/nn/conv.h"

#include <cmath>

#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

namespace {

// One value per spatial dim: a single value repeated, or exactly `dims` values.
IntList per_dim(const IntList& v, int64_t dims, const char* what, const char* module) {
  if (v.size() == 1) return IntList(static_cast<size_t>(dims), v[0]);
  if (static_cast<int64_t>(v.size()) != dims) fail("{}: {} needs 1 or {} values, got {}", module, what, dims, v.size());
  return v;
}

}  // namespace

Conv::Conv(int64_t spatial_dims, int64_t in_channels, int64_t out_channels, const IntList& kernel_size, const IntList& stride_,
           const IntList& padding_, const IntList& dilation_, int64_t groups_, bool with_bias, uint64_t seed)
    : groups(groups_) {
  const char* name = spatial_dims == 1 ? "Conv1d" : spatial_dims == 2 ? "Conv2d" : "Conv3d";
  if (spatial_dims < 1 || spatial_dims > 3) fail("Conv: 1 to 3 spatial dims, got {}", spatial_dims);
  if (in_channels <= 0 || out_channels <= 0) fail("{}({}, {}): channel counts must be positive", name, in_channels, out_channels);
  if (groups <= 0 || in_channels % groups != 0 || out_channels % groups != 0)
    fail("{}: in_channels {} and out_channels {} must both be multiples of groups {}", name, in_channels, out_channels, groups);
  IntList k = per_dim(kernel_size, spatial_dims, "kernel_size", name);
  stride = per_dim(stride_, spatial_dims, "stride", name);
  padding = per_dim(padding_, spatial_dims, "padding", name);
  dilation = per_dim(dilation_, spatial_dims, "dilation", name);
  int64_t fan_in = in_channels / groups;
  for (int64_t d : k) {
    if (d <= 0) fail("{}: kernel sizes must be positive, got {}", name, shape_str(k));
    fan_in *= d;
  }
  Shape ws{out_channels, in_channels / groups};
  ws.insert(ws.end(), k.begin(), k.end());
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  weight = register_parameter("weight", init::uniform(ws, -bound, bound, derive_seed(seed, "weight")));
  if (with_bias) bias = register_parameter("bias", init::uniform({out_channels}, -bound, bound, derive_seed(seed, "bias")));
}

Tensor Conv::forward(const Tensor& x) const { return conv(x, weight, bias, stride, padding, dilation, groups); }

MaxPool2d::MaxPool2d(IntList kernel_size_, IntList stride_, IntList padding_, IntList dilation_, bool ceil_mode_)
    : kernel_size(per_dim(kernel_size_, 2, "kernel_size", "MaxPool2d")),
      stride(stride_.empty() ? kernel_size : per_dim(stride_, 2, "stride", "MaxPool2d")),
      padding(per_dim(padding_, 2, "padding", "MaxPool2d")),
      dilation(per_dim(dilation_, 2, "dilation", "MaxPool2d")),
      ceil_mode(ceil_mode_) {}

Tensor MaxPool2d::forward(const Tensor& x) const { return max_pool(x, kernel_size, stride, padding, dilation, ceil_mode); }

AvgPool2d::AvgPool2d(IntList kernel_size_, IntList stride_, IntList padding_, bool ceil_mode_, bool count_include_pad_)
    : kernel_size(per_dim(kernel_size_, 2, "kernel_size", "AvgPool2d")),
      stride(stride_.empty() ? kernel_size : per_dim(stride_, 2, "stride", "AvgPool2d")),
      padding(per_dim(padding_, 2, "padding", "AvgPool2d")),
      ceil_mode(ceil_mode_),
      count_include_pad(count_include_pad_) {}

Tensor AvgPool2d::forward(const Tensor& x) const { return avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntList output_size_) : output_size(per_dim(output_size_, 2, "output_size", "AdaptiveAvgPool2d")) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) const { return adaptive_avg_pool(x, output_size); }

}  // namespace kiln::nn
