// Reference kernels of convolution and pooling: direct loops over every output element and its
// window, in double, rounded once into the result dtype. Geometry (output sizes, which
// positions a window covers) comes from ir/meta/conv_geometry.h, as the shape rules use it.
#include <array>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/meta/conv_geometry.h"
#include "ir/reference/kernels.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;
using Pos = std::array<int64_t, 3>;

int64_t product(const IntList& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row-major multi-index of `flat` over `sizes` (at most 3 dims; the rest 0).
Pos unflatten(int64_t flat, const IntList& sizes) {
  Pos p{0, 0, 0};
  for (size_t d = sizes.size(); d-- > 0;) {
    p[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return p;
}

// The flat index of multi-index `p` over `sizes`, or -1 when a coordinate is outside.
int64_t flatten(const Pos& p, const IntList& sizes) {
  int64_t f = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (p[d] < 0 || p[d] >= sizes[d]) return -1;
    f = f * sizes[d] + p[d];
  }
  return f;
}

std::vector<HostTensor> convolution_kernel(Ins in, const Attrs& a, Outs outs) {
  const bool has_bias = in.size() > 2 && in[2].defined();
  TensorMeta bias_meta = has_bias ? in[2].meta() : TensorMeta();
  meta::ConvGeometry g = meta::conv_geometry(in[0].meta(), in[1].meta(), has_bias ? &bias_meta : nullptr, a);
  const std::vector<double> x = in[0].to_doubles(), w = in[1].to_doubles();
  const int64_t in_sp = product(g.in_size), out_sp = product(g.out_size), k_sp = product(g.kernel);
  const int64_t cin_g = g.in_channels / g.groups, cout_g = g.out_channels / g.groups;
  std::vector<double> y(static_cast<size_t>(g.batch * g.out_channels * out_sp), 0.0);
  auto at = [&](const Pos& base, const Pos& k, int64_t d) { return base[d] + k[d] * g.dilation[d]; };
  for (int64_t n = 0; n < g.batch; ++n) {
    if (!g.transposed) {
      for (int64_t oc = 0; oc < g.out_channels; ++oc) {
        const int64_t grp = oc / cout_g;
        for (int64_t o = 0; o < out_sp; ++o) {
          Pos op = unflatten(o, g.out_size), base{0, 0, 0};
          for (int64_t d = 0; d < g.spatial; ++d) base[d] = op[d] * g.stride[d] - g.padding[d];
          double acc = 0;
          for (int64_t ic = 0; ic < cin_g; ++ic) {
            const int64_t c = grp * cin_g + ic;
            for (int64_t kf = 0; kf < k_sp; ++kf) {
              Pos kp = unflatten(kf, g.kernel), ip{0, 0, 0};
              for (int64_t d = 0; d < g.spatial; ++d) ip[d] = at(base, kp, d);
              int64_t i = flatten(ip, g.in_size);
              if (i < 0) continue;
              acc += x[static_cast<size_t>((n * g.in_channels + c) * in_sp + i)] * w[static_cast<size_t>((oc * cin_g + ic) * k_sp + kf)];
            }
          }
          y[static_cast<size_t>((n * g.out_channels + oc) * out_sp + o)] = acc;
        }
      }
    } else {
      // Each input element scatters into the outputs its kernel covers.
      for (int64_t c = 0; c < g.in_channels; ++c) {
        const int64_t grp = c / cin_g;
        for (int64_t i = 0; i < in_sp; ++i) {
          Pos ip = unflatten(i, g.in_size), base{0, 0, 0};
          for (int64_t d = 0; d < g.spatial; ++d) base[d] = ip[d] * g.stride[d] - g.padding[d];
          const double xv = x[static_cast<size_t>((n * g.in_channels + c) * in_sp + i)];
          for (int64_t kf = 0; kf < k_sp; ++kf) {
            Pos kp = unflatten(kf, g.kernel), opos{0, 0, 0};
            for (int64_t d = 0; d < g.spatial; ++d) opos[d] = at(base, kp, d);
            int64_t o = flatten(opos, g.out_size);
            if (o < 0) continue;
            for (int64_t ocg = 0; ocg < cout_g; ++ocg) {
              const int64_t oc = grp * cout_g + ocg;
              y[static_cast<size_t>((n * g.out_channels + oc) * out_sp + o)] += xv * w[static_cast<size_t>((c * cout_g + ocg) * k_sp + kf)];
            }
          }
        }
      }
    }
  }
  if (has_bias) {
    const std::vector<double> b = in[2].to_doubles();
    for (size_t j = 0; j < y.size(); ++j) y[j] += b[static_cast<size_t>((static_cast<int64_t>(j) / out_sp) % g.out_channels)];
  }
  return {HostTensor::from_doubles(outs[0].dtype, outs[0].shape, y)};
}

// max_pool and avg_pool: each output folds the input elements of its window that lie inside
// the input (padding is -inf for max, zeros for avg).
ReferenceFn pool_kernel(bool max) {
  return [max](Ins in, const Attrs& a, Outs outs) {
    meta::PoolGeometry g = meta::pool_geometry(in[0].meta(), a);
    const bool include_pad = !max && a.get_bool("count_include_pad");
    const std::vector<double> x = in[0].to_doubles();
    const int64_t in_sp = product(g.in_size), out_sp = product(g.out_size), k_sp = product(g.kernel);
    const int64_t planes = in_sp ? static_cast<int64_t>(x.size()) / in_sp : numel(outs[0].shape) / std::max<int64_t>(out_sp, 1);
    std::vector<double> y(static_cast<size_t>(planes * out_sp));
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t o = 0; o < out_sp; ++o) {
        Pos op = unflatten(o, g.out_size);
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        bool nan = false;
        int64_t inside = 0, padded = 1;
        // avg's divisor with count_include_pad: the window clipped to the padded input.
        for (int64_t d = 0; d < g.spatial; ++d) {
          int64_t start = op[d] * g.stride[d] - g.padding[d];
          int64_t end = std::min(start + g.kernel[d], g.in_size[d] + g.padding[d]);
          padded *= end - start;
        }
        for (int64_t kf = 0; kf < k_sp; ++kf) {
          Pos kp = unflatten(kf, g.kernel), ip{0, 0, 0};
          for (int64_t d = 0; d < g.spatial; ++d) ip[d] = op[d] * g.stride[d] - g.padding[d] + kp[d] * g.dilation[d];
          int64_t i = flatten(ip, g.in_size);
          if (i < 0) continue;
          double v = x[static_cast<size_t>(p * in_sp + i)];
          ++inside;
          if (max) {
            if (std::isnan(v)) nan = true;
            acc = std::max(acc, v);
          } else {
            acc += v;
          }
        }
        double r = max ? (nan ? std::numeric_limits<double>::quiet_NaN() : acc)
                       : acc / static_cast<double>(include_pad ? padded : inside);
        y[static_cast<size_t>(p * out_sp + o)] = r;
      }
    }
    return std::vector<HostTensor>{HostTensor::from_doubles(outs[0].dtype, outs[0].shape, y)};
  };
}

}  // namespace

void install_conv(const Setter& set) {
  set(Op::Convolution, convolution_kernel);
  set(Op::MaxPool, pool_kernel(true));
  set(Op::AvgPool, pool_kernel(false));
}

}  // namespace kiln::reference
