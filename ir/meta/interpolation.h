#pragma once
// Interpolation's geometry, shared by ONNX's Resize (frontend/onnx/ops_resize.cpp) and
// kiln::interpolate (frontend/ops.h): along one resized axis, each output position reads a few
// input positions (taps) with weights that depend on sizes only, computed on the host exactly
// as ONNX's reference computes them (onnx/backend/test/case/node/resize.py: the n nearest
// positions, preferring the left one, the input edge-padded). PyTorch's modes are among them:
// nearest = asymmetric + floor, nearest-exact = tf_half_pixel_for_nn + floor, (bi|tri)linear and
// bicubic = half_pixel (align_corners=false) or align_corners.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct ResizeMode {
  std::string mode = "nearest";                // nearest | linear | cubic
  std::string coordinates = "half_pixel";      // ONNX's coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";  // ONNX's nearest_mode
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The taps of one output position: input indices (clamped to the axis, as the reference's edge
// padding does) and weights; `outside`: tf_crop_and_resize's position past the input, which
// takes the extrapolation value instead.
struct ResizeTaps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;
};

// Output position i of an axis of `in` elements resized by `scale` (its output has
// floor(scale * in) elements, or the size the scale was computed from); roi_start and roi_end
// for tf_crop_and_resize only. kiln::Error for a mode, coordinate mode or nearest mode it does
// not know.
ResizeTaps resize_taps(const ResizeMode& m, int64_t i, int64_t in, double scale, double roi_start = 0, double roi_end = 1);

// Whether `m` names modes resize_taps knows ("" when so, else what it does not know).
std::string unknown_resize_mode(const ResizeMode& m);

}  // namespace kiln
