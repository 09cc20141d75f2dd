// A library of custom ops for `kiln ... --load` (tools/cli/plugins.h), as a user would write
// one: it registers its ops from a static initializer and links nothing of kiln's (its calls
// resolve to the kiln program's own, so the ops land in the program's op table).
#include <cmath>

#include "frontend/custom_op.h"

namespace {

using namespace kiln;

void scan_rows(const HostTensor& in, HostTensor& out) {
  const int64_t cols = in.shape().back(), rows = cols ? in.numel() / cols : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t k = 0; k < cols; ++k) out.set(r * cols + k, acc += in.get(r * cols + k));
  }
}

const bool registered = [] {
  register_custom_op({
      .schema = "plug::scaled_swish(Tensor x, float beta=1.0) -> Tensor",
      .reference =
          [](std::span<const HostTensor> in, const Attrs& a, std::span<const TensorMeta> out) {
            HostTensor y = HostTensor::empty(out[0]);
            for (int64_t i = 0; i < y.numel(); ++i) {
              double x = in[0].get(i);
              y.set(i, x / (1 + std::exp(-a.get_float("beta") * x)));
            }
            return std::vector<HostTensor>{std::move(y)};
          },
      .scalar_expr = "x * sigmoid(beta * x)",
  });
  CustomOp scan;
  scan.schema = "plug::cumsum(Tensor x) -> Tensor";
  scan.meta = [](std::span<const TensorMeta> in, const Attrs&) { return std::vector<TensorMeta>{TensorMeta(in[0].dtype, in[0].shape)}; };
  scan.reference = [](std::span<const HostTensor> in, const Attrs&, std::span<const TensorMeta> out) {
    HostTensor y = HostTensor::empty(out[0]);
    scan_rows(in[0], y);
    return std::vector<HostTensor>{std::move(y)};
  };
  scan.cpu_kernel = [](std::span<const HostTensor> in, std::span<HostTensor> out, const Attrs&) { scan_rows(in[0], out[0]); };
  register_custom_op(scan);
  return true;
}();

}  // namespace
