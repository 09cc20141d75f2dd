// adaptive_avg_pool, adaptive_max_pool, interpolate and repeat_interleave (frontend/ops.h):
// composites of the table's pools, reductions, gathers, slices and views.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frontend/ops.h"
#include "ir/error.h"
#include "ir/meta/interpolation.h"

namespace kiln {

namespace {

Tensor adaptive_pool(const Tensor& x, const IntList& output_size, bool max, const char* fn) {
  const int64_t k = static_cast<int64_t>(output_size.size());
  if (k < 1 || k > 3) fail("{}: output_size must name 1 to 3 spatial dims, got {}", fn, k);
  if (x.dim() < k + 1) fail("{}: an input of rank {} has no {} spatial dims after a channel dim", fn, x.dim(), k);
  // Dims whose output size divides the input size pool with one window each: kernel = stride =
  // n / o. The others are pooled index by index below.
  IntList kernel, stride;
  bool all_divide = true;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t n = x.size(x.dim() - k + d), o = output_size[static_cast<size_t>(d)];
    if (o <= 0) fail("{}: output sizes must be positive, got {}", fn, shape_str(output_size));
    if (n == 0) fail("{}: spatial dim {} of the input is empty", fn, x.dim() - k + d);
    all_divide = all_divide && n % o == 0;
    kernel.push_back(n % o == 0 ? n / o : 1);
    stride.push_back(n % o == 0 ? n / o : 1);
  }
  // The pool ops want [N, C, spatial...] or [C, spatial...]: a leading batch of any rank is
  // folded into one dim and restored after.
  Shape lead(x.shape().begin(), x.shape().end() - k);
  Tensor y = x;
  if (lead.size() > 2) {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < lead.size(); ++i) n *= lead[i];
    Shape folded{n, lead.back()};
    folded.insert(folded.end(), x.shape().end() - k, x.shape().end());
    y = reshape(y, folded);
  }
  y = max ? max_pool(y, kernel, kernel) : avg_pool(y, kernel, kernel);
  if (!all_divide) {
    for (int64_t d = 0; d < k; ++d) {
      const int64_t dim = y.dim() - k + d;
      const int64_t n = x.size(x.dim() - k + d), o = output_size[static_cast<size_t>(d)];
      if (n % o == 0) continue;
      std::vector<Tensor> parts;
      for (int64_t i = 0; i < o; ++i) {
        const int64_t begin = i * n / o, end = ((i + 1) * n + o - 1) / o;
        Tensor window = slice(y, dim, begin, end);
        parts.push_back(max ? amax(window, {dim}, true) : mean(window, {dim}, true));
      }
      y = cat(parts, dim);
    }
  }
  if (lead.size() > 2) {
    Shape out = lead;
    out.insert(out.end(), output_size.begin(), output_size.end());
    y = reshape(y, out);
  }
  return y;
}

}  // namespace

Tensor adaptive_avg_pool(const Tensor& self, const IntList& output_size) { return adaptive_pool(self, output_size, false, "adaptive_avg_pool"); }
Tensor adaptive_max_pool(const Tensor& self, const IntList& output_size) { return adaptive_pool(self, output_size, true, "adaptive_max_pool"); }

namespace {

Tensor interpolate_to(const Tensor& x, const IntList& out, const std::vector<double>& scales, const std::string& mode,
                      std::optional<bool> align_corners) {
  const int64_t k = static_cast<int64_t>(out.size());
  const int64_t want = mode == "linear" ? 1 : mode == "bilinear" || mode == "bicubic" ? 2 : mode == "trilinear" ? 3 : 0;
  if (mode != "nearest" && mode != "nearest-exact" && want == 0)
    fail("interpolate: mode '{}' is not one of nearest, nearest-exact, linear, bilinear, trilinear, bicubic", mode);
  if (want != 0 && k != want) fail("interpolate: mode '{}' resizes {} dims; got {} sizes", mode, want, k);
  if (k < 1 || k > 3 || x.dim() != k + 2) fail("interpolate: an input [N, C, 1 to 3 dims] and one size per spatial dim; got {} for {} sizes", shape_str(x.shape()), k);
  const bool nearest = mode == "nearest" || mode == "nearest-exact";
  if (nearest && align_corners) fail("interpolate: align_corners applies to the linear and cubic modes only");
  if (!is_floating(x.dtype())) fail("interpolate: a floating-point input, got {}", dtype_name(x.dtype()));
  ResizeMode m;
  m.mode = nearest ? "nearest" : mode == "bicubic" ? "cubic" : "linear";
  m.nearest = "floor";
  m.coordinates = mode == "nearest" ? "asymmetric" : mode == "nearest-exact" ? "tf_half_pixel_for_nn"
                  : align_corners.value_or(false) ? "align_corners" : "half_pixel";
  Tensor y = x;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t axis = 2 + d, in = x.size(axis), o = out[static_cast<size_t>(d)];
    if (o <= 0 || in <= 0) fail("interpolate: dim {} resizes {} elements to {}", axis, in, o);
    const double scale = scales.empty() ? static_cast<double>(o) / static_cast<double>(in) : scales[static_cast<size_t>(d)];
    std::vector<ResizeTaps> taps;
    size_t width = 0;
    for (int64_t i = 0; i < o; ++i) {
      taps.push_back(resize_taps(m, i, in, scale));
      width = std::max(width, taps.back().index.size());
    }
    Shape along(static_cast<size_t>(y.dim()), 1);
    along[static_cast<size_t>(axis)] = o;
    Tensor sum;
    for (size_t t = 0; t < width; ++t) {
      std::vector<int64_t> idx;
      std::vector<double> w;
      bool used = false, weighted = false;
      for (const ResizeTaps& tp : taps) {
        idx.push_back(tp.index[t]);
        w.push_back(tp.weight[t]);
        used = used || w.back() != 0;
        weighted = weighted || w.back() != 1;
      }
      if (!used) continue;
      Tensor tap = index_select(y, axis, tensor_of_ints(idx, {o}).to(y.device()));
      if (weighted) tap = tap * reshape(tensor(w, {o}, y.dtype()).to(y.device()), along);
      sum = sum.defined() ? sum + tap : tap;
    }
    y = sum;
  }
  return y;
}

}  // namespace

Tensor interpolate(const Tensor& input, const IntList& size, const std::string& mode, std::optional<bool> align_corners) {
  return interpolate_to(input, size, {}, mode, align_corners);
}

Tensor interpolate(const Tensor& input, const std::vector<double>& scale_factor, const std::string& mode, std::optional<bool> align_corners) {
  IntList out;
  const int64_t k = static_cast<int64_t>(scale_factor.size());
  if (input.dim() != k + 2) fail("interpolate: an input [N, C, 1 to 3 dims] and one scale per spatial dim; got {} for {} scales", shape_str(input.shape()), k);
  for (int64_t d = 0; d < k; ++d) {
    const double s = scale_factor[static_cast<size_t>(d)];
    if (!(s > 0)) fail("interpolate: scale factors must be positive, got {}", s);
    out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(input.size(2 + d)) * s)));
  }
  return interpolate_to(input, out, scale_factor, mode, align_corners);
}

Tensor repeat_interleave(const Tensor& self, int64_t repeats, int64_t dim) {
  if (repeats < 1) fail("repeat_interleave: repeats must be at least 1, got {}", repeats);
  const int64_t r = self.dim();
  if (dim < -r || dim >= r) fail("repeat_interleave: dim {} is out of range for rank {}", dim, r);
  if (dim < 0) dim += r;
  if (repeats == 1) return self;
  Shape expanded = self.shape();
  expanded.insert(expanded.begin() + dim + 1, repeats);
  Shape out = self.shape();
  out[static_cast<size_t>(dim)] *= repeats;
  return reshape(expand(unsqueeze(self, dim + 1), expanded), out);
}

}  // namespace kiln
