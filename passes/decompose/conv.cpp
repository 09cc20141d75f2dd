// Decompositions of convolution and pooling into views, cat and one batched matmul (im2col):
// the padded input's windows, one strided slice per kernel offset, stacked into [.., K, out...];
// a convolution multiplies them by the weight viewed as [groups, OC/groups, C/groups * K], a
// pool reduces them (amax, or a sum divided by each window's count). A transposed convolution is
// the convolution of the input spread out by its stride (zeros between elements) with the
// kernel flipped and its channels swapped. So both run, and differentiate through their parts,
// on every backend; a kernel of their own (oneDNN, implicit GEMM) can replace this later.
#include <limits>

#include "ir/meta/conv_geometry.h"
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

int64_t product(const IntList& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The windows of x (its spatial dims from `first`): one strided slice per kernel offset,
// stacked into a new dim at `first`: [lead..., K, out...].
Var windows(Builder& b, Var x, int64_t first, const IntList& kernel, const IntList& stride, const IntList& dilation,
            const Shape& out) {
  const int64_t spatial = static_cast<int64_t>(kernel.size()), k = product(kernel);
  std::vector<Value> slices;
  for (int64_t kf = 0; kf < k; ++kf) {
    int64_t rest = kf;
    std::vector<int64_t> pos(spatial);
    for (int64_t d = spatial; d-- > 0;) {
      pos[d] = rest % kernel[d];
      rest /= kernel[d];
    }
    Var s = x;
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t start = pos[d] * dilation[d], end = start + (out[d] - 1) * stride[d] + 1;
      if (start != 0 || end != s.shape()[first + d] || stride[d] != 1) s = b.slice(s, first + d, start, end, stride[d]);
    }
    slices.push_back(b.unsqueeze(s, first));
  }
  return slices.size() == 1 ? b.wrap(slices[0]) : b.cat(slices, first);
}

// A convolution of an already padded input, stride and dilation as given, no bias.
Var convolve(Builder& b, Var xp, Var w, int64_t groups, const IntList& stride, const IntList& dilation, const Shape& out) {
  const Shape& ws = w.shape();
  const int64_t n = xp.shape()[0], c = xp.shape()[1], oc = ws[0], cg = c / groups;
  IntList kernel(ws.begin() + 2, ws.end());
  const int64_t k = product(kernel), l = product(out);
  Var cols = windows(b, xp, 2, kernel, stride, dilation, out);      // [N, C, K, out...]
  cols = b.reshape(cols, {n, groups, cg * k, l});                    // [N, G, C/G * K, L]
  Var wm = b.reshape(w, {groups, oc / groups, cg * k});              // [G, OC/G, C/G * K]
  Var y = b.matmul(wm, cols);                                        // [N, G, OC/G, L]
  Shape s{n, oc};
  s.insert(s.end(), out.begin(), out.end());
  return b.reshape(y, s);
}

// x with `s - 1` zeros between neighbours along dim.
Var spread(Builder& b, Var x, int64_t dim, int64_t s) {
  if (s == 1 || x.shape()[dim] == 0) return x;
  Shape shape = x.shape();
  int64_t l = shape[dim];
  Var u = b.unsqueeze(x, dim + 1);
  Shape zs = u.shape();
  zs[dim + 1] = s - 1;
  Var both = b.cat({u, b.full(zs, 0.0, x.dtype())}, dim + 1);  // [.., L, s, ..]
  shape[dim] = l * s;
  return b.slice(b.reshape(both, shape), dim, 0, (l - 1) * s + 1);
}

// x reversed along dim.
Var flip(Builder& b, Var x, int64_t dim) {
  int64_t n = x.shape()[dim];
  if (n == 1) return x;
  std::vector<Value> parts;
  for (int64_t i = n; i-- > 0;) parts.push_back(b.slice(x, dim, i, i + 1));
  return b.cat(parts, dim);
}

std::vector<Value> convolution(DecompositionContext& c) {
  Builder& b = c.b;
  const bool has_bias = c.num_inputs() > 2;
  TensorMeta bias_meta = has_bias ? c.input(2).meta() : TensorMeta();
  meta::ConvGeometry g = meta::conv_geometry(c.input(0).meta(), c.input(1).meta(), has_bias ? &bias_meta : nullptr, c.attrs());
  Var x = c.input(0), w = c.input(1), y;
  const IntList ones(g.spatial, 1);
  if (!g.transposed) {
    for (int64_t d = 0; d < g.spatial; ++d) x = b.pad(x, 2 + d, g.padding[d], g.padding[d], 0.0);
    y = convolve(b, x, w, g.groups, g.stride, g.dilation, g.out_size);
  } else {
    // The input spread out by the stride, padded so that every output sees its full kernel;
    // the weight [C, OC/G, K...] as [OC, C/G, K...] per group, each kernel flipped.
    for (int64_t d = 0; d < g.spatial; ++d) {
      x = spread(b, x, 2 + d, g.stride[d]);
      int64_t reach = g.dilation[d] * (g.kernel[d] - 1);
      x = b.pad(x, 2 + d, reach - g.padding[d], reach - g.padding[d] + g.output_padding[d], 0.0);
    }
    const int64_t cg = g.in_channels / g.groups, ocg = g.out_channels / g.groups;
    Shape grouped{g.groups, cg, ocg};
    grouped.insert(grouped.end(), g.kernel.begin(), g.kernel.end());
    IntList perm{0, 2, 1};
    for (int64_t d = 0; d < g.spatial; ++d) perm.push_back(3 + d);
    Var wt = b.permute(b.reshape(w, grouped), perm);  // [G, OC/G, C/G, K...]
    for (int64_t d = 0; d < g.spatial; ++d) wt = flip(b, wt, 3 + d);
    Shape ws{g.out_channels, cg};
    ws.insert(ws.end(), g.kernel.begin(), g.kernel.end());
    y = convolve(b, x, b.reshape(b.contiguous(wt), ws), g.groups, ones, g.dilation, g.out_size);
  }
  if (has_bias) {
    Shape bs{g.out_channels};
    for (int64_t d = 0; d < g.spatial; ++d) bs.push_back(1);
    y = b.add(y, b.reshape(c.input(2), bs));
  }
  return {y};
}

// The padding a pool's windows need past the input's end: ceil_mode's last window may reach
// beyond the right padding.
int64_t overhang(const meta::PoolGeometry& g, int64_t d) {
  int64_t need = (g.out_size[d] - 1) * g.stride[d] + g.dilation[d] * (g.kernel[d] - 1) + 1;
  return std::max<int64_t>(need - (g.in_size[d] + 2 * g.padding[d]), 0);
}

std::vector<Value> max_pool(DecompositionContext& c) {
  Builder& b = c.b;
  meta::PoolGeometry g = meta::pool_geometry(c.input(0).meta(), c.attrs());
  const int64_t first = c.input(0).rank() - g.spatial;
  Var x = c.input(0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t d = 0; d < g.spatial; ++d) x = b.pad(x, first + d, g.padding[d], g.padding[d] + overhang(g, d), -inf);
  return {b.amax(windows(b, x, first, g.kernel, g.stride, g.dilation, g.out_size), {first})};
}

std::vector<Value> avg_pool(DecompositionContext& c) {
  Builder& b = c.b;
  meta::PoolGeometry g = meta::pool_geometry(c.input(0).meta(), c.attrs());
  const bool include_pad = c.attrs().get_bool("count_include_pad");
  const int64_t first = c.input(0).rank() - g.spatial;
  DType dt = c.out_meta().dtype, ct = compute_dtype(dt);
  Var x = b.to(c.input(0), ct);
  // Each window's divisor: the same windows summed over a mask of ones on the input (and on
  // the padding with count_include_pad), zeros on ceil_mode's overhang.
  // (All the padding first, then all the overhang: an overhang row padded afterwards would get
  // the padding's ones in its corners.)
  Var mask = b.full(g.in_size, 1.0, ct);
  for (int64_t d = 0; d < g.spatial; ++d) {
    x = b.pad(x, first + d, g.padding[d], g.padding[d] + overhang(g, d), 0.0);
    mask = b.pad(mask, d, g.padding[d], g.padding[d], include_pad ? 1.0 : 0.0);
  }
  for (int64_t d = 0; d < g.spatial; ++d) mask = b.pad(mask, d, 0, overhang(g, d), 0.0);
  Var sums = b.sum(windows(b, x, first, g.kernel, g.stride, g.dilation, g.out_size), {first});
  Var counts = b.sum(windows(b, mask, 0, g.kernel, g.stride, g.dilation, g.out_size), {0});
  return {b.to(b.div(sums, counts), dt)};
}

}  // namespace

void install_conv() {
  register_decomposition(Op::Convolution, convolution);
  register_decomposition(Op::MaxPool, max_pool);
  register_decomposition(Op::AvgPool, avg_pool);
}

}  // namespace kiln::decompositions
