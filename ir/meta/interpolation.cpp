#include "ir/meta/interpolation.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace kiln {

namespace {

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

}  // namespace

std::string unknown_resize_mode(const ResizeMode& m) {
  static const char* kModes[] = {"nearest", "linear", "cubic"};
  static const char* kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                       "tf_crop_and_resize"};
  static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  auto known = [](const auto& list, const std::string& v) { return std::find(std::begin(list), std::end(list), v) != std::end(list); };
  if (!known(kModes, m.mode)) return "mode '" + m.mode + "'";
  if (!known(kCoordinates, m.coordinates)) return "coordinate_transformation_mode '" + m.coordinates + "'";
  if (!known(kNearest, m.nearest)) return "nearest_mode '" + m.nearest + "'";
  return "";
}

ResizeTaps resize_taps(const ResizeMode& m, int64_t i, int64_t in, double scale, double roi_start, double roi_end) {
  if (std::string bad = unknown_resize_mode(m); !bad.empty()) fail("resize: {}", bad);
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
    if (xo < 0 || xo > n - 1) return ResizeTaps{{}, {}, true};
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
  ResizeTaps t;
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


}  // namespace kiln
