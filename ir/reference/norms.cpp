// Reference kernels of rms_norm and group_norm: each row (rms_norm's normalized dims; a group's
// channels and spatial dims) in double, rounded once into the result dtype.
#include <cmath>

#include "ir/error.h"
#include "ir/reference/kernels.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

std::vector<HostTensor> rms_norm(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  int64_t row = 1;
  for (int64_t d : a.get_ints("normalized_shape")) row *= d;
  const double eps = a.opt_float("eps").value_or(machine_epsilon(x.dtype()));
  std::vector<double> v = x.to_doubles(), w = in.size() > 1 ? in[1].to_doubles() : std::vector<double>();
  const int64_t rows = row ? x.numel() / row : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < row; ++j) ss += v[static_cast<size_t>(r * row + j)] * v[static_cast<size_t>(r * row + j)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(row) + eps);
    for (int64_t j = 0; j < row; ++j) {
      double& y = v[static_cast<size_t>(r * row + j)];
      y *= inv;
      if (!w.empty()) y *= w[static_cast<size_t>(j)];
    }
  }
  return {HostTensor::from_doubles(outs[0].dtype, outs[0].shape, v)};
}

std::vector<HostTensor> group_norm(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], g = a.get_int("num_groups");
  const int64_t spatial = c ? x.numel() / std::max<int64_t>(n * c, 1) : 0, per_group = c / g * spatial;
  const double eps = a.get_float("eps");
  std::vector<double> v = x.to_doubles();
  std::vector<double> w = in.size() > 1 ? in[1].to_doubles() : std::vector<double>(), b = in.size() > 2 ? in[2].to_doubles() : std::vector<double>();
  for (int64_t i = 0; i < n * g; ++i) {
    const size_t base = static_cast<size_t>(i * per_group);
    double mean = 0, var = 0;
    for (int64_t j = 0; j < per_group; ++j) mean += v[base + j];
    mean /= static_cast<double>(per_group);
    for (int64_t j = 0; j < per_group; ++j) var += (v[base + j] - mean) * (v[base + j] - mean);
    var /= static_cast<double>(per_group);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < per_group; ++j) {
      const int64_t channel = (i % g) * (c / g) + j / std::max<int64_t>(spatial, 1);
      double y = (v[base + j] - mean) * inv;
      if (!w.empty()) y *= w[static_cast<size_t>(channel)];
      if (!b.empty()) y += b[static_cast<size_t>(channel)];
      v[base + j] = y;
    }
  }
  return {HostTensor::from_doubles(outs[0].dtype, outs[0].shape, v)};
}

}  // namespace

void install_norms(const Setter& set) {
  set(Op::RmsNorm, rms_norm);
  set(Op::GroupNorm, group_norm);
}

}  // namespace kiln::reference
