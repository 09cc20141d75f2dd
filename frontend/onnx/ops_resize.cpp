// Resize (opsets 10 to 17) and Upsample (7 to 9): interpolation written as kiln ops. Along each
// resized axis, every output position reads a few input positions (taps) with weights that
// depend on sizes only, so they are computed here, at import, exactly as ONNX's reference
// (onnx/backend/test/case/node/resize.py) computes them; the graph then gathers each tap along
// the axis (its index list, a few integers, broadcast over the other dims) and sums the taps
// weighted. Axes are resized one after another, which is what the reference's recursion does.
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <limits>

#include "frontend/onnx/op_table.h"

namespace kiln::onnx {

namespace {

struct ResizeMode {
  std::string mode = "nearest";                  // nearest | linear | cubic
  std::string coordinates = "half_pixel";        // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";    // nearest_mode
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// The taps of one output position: input indices (clamped to the axis, as the reference's edge
// padding does) and weights; `outside`: tf_crop_and_resize's position past the input, which
// takes the extrapolation value.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;
};

std::vector<double> coefficients(const ResizeMode& m, double ratio, bool integer) {
  if (m.mode == "nearest") {
    if (integer) return {0, 1};
    if (m.nearest == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (m.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (m.nearest == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (m.mode == "linear") return {1 - ratio, ratio};
  const double A = m.cubic_a, r = ratio, s = 1 - ratio;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * s - (A + 3)) * s * s + 1, ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
}

// Output position i of an axis of `in` elements resized by `scale` (to `out` elements).
Taps taps_of(const ResizeMode& m, int64_t i, int64_t in, double scale, double roi_start, double roi_end) {
  const double x = static_cast<double>(i), n = static_cast<double>(in);
  const double out_width = scale * n;  // the reference's output_width: scale * input, not rounded
  double xo = 0;
  const std::string& ct = m.coordinates;
  if (ct == "align_corners") xo = out_width == 1 ? 0.0 : x * (n - 1) / (out_width - 1);
  else if (ct == "asymmetric") xo = x / scale;
  else if (ct == "tf_half_pixel_for_nn") xo = (x + 0.5) / scale;
  else if (ct == "pytorch_half_pixel") xo = out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  else if (ct == "tf_crop_and_resize") {
    xo = out_width == 1 ? (roi_end - roi_start) * (n - 1) / 2 : x * (roi_end - roi_start) * (n - 1) / (out_width - 1);
    xo += roi_start * (n - 1);
    if (xo < 0 || xo > n - 1) return Taps{{}, {}, true};
  } else {
    xo = (x + 0.5) / scale - 0.5;  // half_pixel
  }
  // The n nearest input positions, preferring those left of xo: the ratio is in (0, 1].
  int64_t base = static_cast<int64_t>(std::floor(xo));
  double ratio = xo - static_cast<double>(base);
  const bool integer = ratio == 0;
  if (integer) {
    base -= 1;
    ratio = 1;
  }
  std::vector<double> w = coefficients(m, ratio, integer);
  const int64_t first = m.mode == "cubic" ? base - 1 : base;
  Taps t;
  double sum = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    const int64_t idx = first + static_cast<int64_t>(k);
    if (m.exclude_outside && (idx < 0 || idx >= in)) w[k] = 0;
    sum += w[k];
    t.index.push_back(std::clamp<int64_t>(idx, 0, in - 1));
  }
  for (double& v : w) t.weight.push_back(m.exclude_outside ? v / sum : v);
  return t;
}

// A 1-d constant node of `values`.
Var constant_1d(NodeContext& c, const std::vector<double>& values, DType dtype) {
  Attrs a;
  a.set("size", IntList{static_cast<int64_t>(values.size())});
  a.set("dtype", dtype);
  a.set("values", FloatList(values.begin(), values.end()));
  return c.b.op(Op::Constant, {}, a);
}

// x resized along `axis` to `out` elements.
Var resize_axis(NodeContext& c, Var x, int64_t axis, int64_t out, double scale, const ResizeMode& m, double roi_start, double roi_end) {
  Builder& b = c.b;
  const int64_t in = x.shape()[static_cast<size_t>(axis)];
  std::vector<Taps> all;
  size_t width = 0;
  bool any_outside = false;
  for (int64_t i = 0; i < out; ++i) {
    all.push_back(taps_of(m, i, in, scale, roi_start, roi_end));
    width = std::max(width, all.back().index.size());
    any_outside = any_outside || all.back().outside;
  }
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = out;
  Shape along(static_cast<size_t>(x.rank()), 1);
  along[static_cast<size_t>(axis)] = out;
  Var y;
  for (size_t k = 0; k < width; ++k) {
    std::vector<double> idx, w;
    bool weighted = false;
    for (const Taps& t : all) {
      idx.push_back(t.outside ? 0.0 : static_cast<double>(t.index[k]));
      w.push_back(t.outside ? 0.0 : t.weight[k]);
      weighted = weighted || w.back() != 1.0;
    }
    bool unused = true;
    for (double v : w) unused = unused && v == 0;
    if (unused) continue;  // nearest: one of the two taps is chosen at every position
    Var index = b.reshape(constant_1d(c, idx, DType::I64), along);
    Var tap = b.gather(x, b.expand(index, out_shape), axis);
    if (weighted) tap = b.mul(tap, b.reshape(constant_1d(c, w, x.dtype()), along));
    y = y ? Var(b.add(y, tap)) : tap;
  }
  if (!y) y = b.full(out_shape, 0.0, x.dtype());
  if (any_outside) {
    std::vector<double> extra;
    for (const Taps& t : all) extra.push_back(t.outside ? m.extrapolation : 0.0);
    y = b.add(y, b.reshape(constant_1d(c, extra, x.dtype()), along));
  }
  return y;
}

Var resize(NodeContext& c, Var x, const std::vector<double>& scales, const IntList& sizes, const std::vector<double>& roi, const ResizeMode& m) {
  if (!is_floating(x.dtype())) c.unsupported(fmt::format("resizing {} (kiln interpolates floating-point tensors)", dtype_name(x.dtype())));
  const int64_t r = x.rank();
  for (int64_t d = 0; d < r; ++d) {
    const int64_t in = x.shape()[static_cast<size_t>(d)];
    int64_t out = in;
    double scale = 1;
    if (!sizes.empty()) {
      out = sizes[static_cast<size_t>(d)];
      scale = static_cast<double>(out) / static_cast<double>(in);
    } else {
      scale = scales[static_cast<size_t>(d)];
      if (!(scale > 0)) c.error(fmt::format("scales must be positive, got {} for axis {}", scale, d));
      out = static_cast<int64_t>(std::floor(scale * static_cast<double>(in)));
    }
    if (out == in && scale == 1 && m.coordinates != "tf_crop_and_resize") continue;
    if (in == 0 || out <= 0) c.error(fmt::format("axis {} resizes {} elements to {}", d, in, out));
    const double rs = roi.empty() ? 0.0 : roi[static_cast<size_t>(d)], re = roi.empty() ? 1.0 : roi[static_cast<size_t>(r + d)];
    x = resize_axis(c, x, d, out, scale, m, rs, re);
  }
  return x;
}

std::vector<Out> resize_op(NodeContext& c) {
  ResizeMode m;
  m.mode = c.attr_string("mode", "nearest");
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") c.unsupported(fmt::format("mode '{}'", m.mode));
  const int64_t r = c.meta(0).rank();
  std::vector<double> scales, roi;
  IntList sizes;
  if (c.opset < 11) {
    // Resize-10: (X, scales), the asymmetric coordinates, nearest rounding down... as Upsample.
    m.coordinates = "asymmetric";
    m.nearest = "floor";
    scales = c.known_doubles(1, "scales");
  } else {
    m.coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
    m.nearest = c.attr_string("nearest_mode", "round_prefer_floor");
    m.cubic_a = c.attr_float("cubic_coeff_a", -0.75);
    m.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
    m.extrapolation = c.attr_float("extrapolation_value", 0.0);
    if (c.has(1) && c.meta(1).numel() > 0) roi = c.known_doubles(1, "roi");
    if (c.has(2) && c.meta(2).numel() > 0) scales = c.known_doubles(2, "scales");
    if (c.has(3) && c.meta(3).numel() > 0) sizes = c.known_ints(3, "sizes");
  }
  static const char* kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                       "tf_crop_and_resize"};
  if (std::find(std::begin(kCoordinates), std::end(kCoordinates), m.coordinates) == std::end(kCoordinates))
    c.unsupported(fmt::format("coordinate_transformation_mode '{}'", m.coordinates));
  static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(std::begin(kNearest), std::end(kNearest), m.nearest) == std::end(kNearest))
    c.unsupported(fmt::format("nearest_mode '{}'", m.nearest));
  if (scales.empty() == sizes.empty()) c.error("needs exactly one of scales and sizes");
  if (!scales.empty() && static_cast<int64_t>(scales.size()) != r) c.error(fmt::format("{} scales for rank {}", scales.size(), r));
  if (!sizes.empty() && static_cast<int64_t>(sizes.size()) != r) c.error(fmt::format("{} sizes for rank {}", sizes.size(), r));
  if (m.coordinates == "tf_crop_and_resize" && static_cast<int64_t>(roi.size()) != 2 * r)
    c.error(fmt::format("tf_crop_and_resize needs a roi of {} values, got {}", 2 * r, roi.size()));
  return one(resize(c, c.in(0), scales, sizes, m.coordinates == "tf_crop_and_resize" ? roi : std::vector<double>{}, m));
}

// Upsample (deprecated by Resize): scales as an attribute (opset 7) or an input (9); nearest
// or linear, on the asymmetric coordinates, nearest rounding down.
std::vector<Out> upsample_op(NodeContext& c) {
  ResizeMode m;
  m.mode = c.attr_string("mode", "nearest");
  if (m.mode == "bilinear") m.mode = "linear";
  if (m.mode != "nearest" && m.mode != "linear") c.unsupported(fmt::format("mode '{}'", m.mode));
  m.coordinates = "asymmetric";
  m.nearest = "floor";
  std::vector<double> scales = c.has(1) ? c.known_doubles(1, "scales") : c.attr_floats("scales");
  if (static_cast<int64_t>(scales.size()) != c.meta(0).rank()) c.error(fmt::format("{} scales for rank {}", scales.size(), c.meta(0).rank()));
  return one(resize(c, c.in(0), scales, {}, {}, m));
}

}  // namespace

void add_resize_ops(std::vector<OpEntry>& t) {
  t.push_back({"Resize", resize_op});
  t.push_back({"Upsample", upsample_op});
}

}  // namespace kiln::onnx
