#pragma once
// Convolution and pooling modules (torch.nn's Conv1d/2d/3d, MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d; same shapes, defaults and initialization), over frontend/ops.h's conv,
// max_pool, avg_pool and adaptive_avg_pool.
#include <optional>

#include "frontend/nn/module.h"

namespace kiln::nn {

// y = conv(x, weight) + bias; weight [out, in / groups, k...], bias [out]. Sizes of one value
// apply to every spatial dim. Weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in =
// in / groups * prod(k), as PyTorch's default (kaiming_uniform with a = sqrt(5)).
class Conv : public Module {
 public:
  Conv(int64_t spatial_dims, int64_t in_channels, int64_t out_channels, const IntList& kernel_size, const IntList& stride = {1},
       const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1, bool bias = true, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Tensor weight;
  std::optional<Tensor> bias;
  IntList stride, padding, dilation;
  int64_t groups;
};

class Conv1d : public Conv {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1,
         int64_t groups = 1, bool bias = true, uint64_t seed = 0)
      : Conv(1, in_channels, out_channels, {kernel_size}, {stride}, {padding}, {dilation}, groups, bias, seed) {}
};

class Conv2d : public Conv {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, const IntList& kernel_size, const IntList& stride = {1},
         const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1, bool bias = true, uint64_t seed = 0)
      : Conv(2, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, seed) {}
};

class Conv3d : public Conv {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, const IntList& kernel_size, const IntList& stride = {1},
         const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1, bool bias = true, uint64_t seed = 0)
      : Conv(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, seed) {}
};

// Pools over the last two dims ([N, C, H, W] or [C, H, W]); stride left empty is the kernel.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, IntList dilation = {1}, bool ceil_mode = false);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  IntList kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(IntList kernel_size, IntList stride = {}, IntList padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  IntList kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(IntList output_size);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  IntList output_size;
};

}  // namespace kiln::nn
