#include "passes/constants.h"

#include <cmath>

#include "ir/host_tensor.h"

namespace kiln {

bool is_constant(Value v) { return v.node->category() == OpCategory::Creation && v.node->inputs().empty(); }

bool same_number(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

namespace {
// A scalar attribute converted to `dt` the way the creation kernel converts it (truncation
// for ints, rounding for f16/bf16), by going through a one-element HostTensor.
double in_dtype(const AttrValue& scalar, DType dt) {
  if (auto* i = std::get_if<int64_t>(&scalar)) {
    int64_t v = *i;
    return HostTensor::from_ints(dt, {}, std::span<const int64_t>(&v, 1)).get(0);
  }
  if (auto* b = std::get_if<bool>(&scalar)) return HostTensor::scalar(dt, *b ? 1.0 : 0.0).get(0);
  return HostTensor::scalar(dt, std::get<double>(scalar)).get(0);
}
}  // namespace

std::optional<double> splat_value(Value v) {
  if (!is_constant(v) || v.meta().numel() == 0) return std::nullopt;
  const Node& n = *v.node;
  DType dt = v.meta().dtype;
  switch (n.op()) {
    case Op::Zeros: return 0.0;
    case Op::Ones: return 1.0;
    case Op::Full: return in_dtype(*n.attrs().find("fill_value"), dt);
    case Op::Constant: {
      FloatList values = n.attrs().get_floats("values");
      double first = in_dtype(values[0], dt);
      for (double x : values)
        if (!same_number(in_dtype(x, dt), first)) return std::nullopt;
      return first;
    }
    default:  // arange is a splat only when it has one element: not worth a rule
      return std::nullopt;
  }
}

}  // namespace kiln
