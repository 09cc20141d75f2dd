// Resize (opsets 10 to 17) and Upsample (7 to 9): interpolation written as kiln ops. Along each
// resized axis, every output position reads a few input positions (taps) with weights that
// depend on sizes only, computed at import (ir/meta/interpolation.h); the graph gathers each
// tap along the axis (its index list, a few integers, broadcast over the other dims) and sums
// the taps weighted. Axes are resized one after another, as the reference's recursion does.
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <limits>

#include "frontend/onnx/op_table.h"
#include "ir/meta/interpolation.h"

namespace kiln::onnx {

namespace {

// x resized along `axis` to `out` elements.
Var resize_axis(NodeContext& c, Var x, int64_t axis, int64_t out, double scale, const ResizeMode& m, double extrapolation,
              double roi_start, double roi_end) {
  Builder& b = c.b;
  const int64_t in = x.shape()[static_cast<size_t>(axis)];
  std::vector<ResizeTaps> all;
  size_t width = 0;
  bool any_outside = false;
  for (int64_t i = 0; i < out; ++i) {
    all.push_back(resize_taps(m, i, in, scale, roi_start, roi_end));
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
    for (const ResizeTaps& t : all) {
      idx.push_back(t.outside ? 0.0 : static_cast<double>(t.index[k]));
      w.push_back(t.outside ? 0.0 : t.weight[k]);
      weighted = weighted || w.back() != 1.0;
    }
    bool unused = true;
    for (double v : w) unused = unused && v == 0;
    if (unused) continue;  // nearest: one of the two taps is chosen at every position
    Var index = b.reshape(constant_1d(c.b, idx, DType::I64), along);
    Var tap = b.gather(x, b.expand(index, out_shape), axis);
    if (weighted) tap = b.mul(tap, b.reshape(constant_1d(c.b, w, x.dtype()), along));
    y = y ? Var(b.add(y, tap)) : tap;
  }
  if (!y) y = b.full(out_shape, 0.0, x.dtype());
  if (any_outside) {
    std::vector<double> extra;
    for (const ResizeTaps& t : all) extra.push_back(t.outside ? extrapolation : 0.0);
    y = b.add(y, b.reshape(constant_1d(c.b, extra, x.dtype()), along));
  }
  return y;
}

Var resize(NodeContext& c, Var x, const std::vector<double>& scales, const IntList& sizes, const std::vector<double>& roi, const ResizeMode& m,
           double extrapolation = 0.0) {
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
    x = resize_axis(c, x, d, out, scale, m, extrapolation, rs, re);
  }
  return x;
}

std::vector<Out> resize_op(NodeContext& c) {
  ResizeMode m;
  double extrapolation = 0.0;
  m.mode = c.attr_string("mode", "nearest");
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
    extrapolation = c.attr_float("extrapolation_value", 0.0);
    if (c.has(1) && c.meta(1).numel() > 0) roi = c.known_doubles(1, "roi");
    if (c.has(2) && c.meta(2).numel() > 0) scales = c.known_doubles(2, "scales");
    if (c.has(3) && c.meta(3).numel() > 0) sizes = c.known_ints(3, "sizes");
  }
  if (std::string bad = unknown_resize_mode(m); !bad.empty()) c.unsupported(bad);
  if (scales.empty() == sizes.empty()) c.error("needs exactly one of scales and sizes");
  if (!scales.empty() && static_cast<int64_t>(scales.size()) != r) c.error(fmt::format("{} scales for rank {}", scales.size(), r));
  if (!sizes.empty() && static_cast<int64_t>(sizes.size()) != r) c.error(fmt::format("{} sizes for rank {}", sizes.size(), r));
  if (m.coordinates == "tf_crop_and_resize" && static_cast<int64_t>(roi.size()) != 2 * r)
    c.error(fmt::format("tf_crop_and_resize needs a roi of {} values, got {}", 2 * r, roi.size()));
  return one(resize(c, c.in(0), scales, sizes, m.coordinates == "tf_crop_and_resize" ? roi : std::vector<double>{}, m, extrapolation));
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
