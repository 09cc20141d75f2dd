// Shape-and-dtype rules of creation ops.
#include <cmath>

#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

namespace {
Shape checked_size(const IntList& size) {
  for (int64_t d : size)
    if (d < 0) fail("sizes must be non-negative, got {}", shape_str(size));
  return Shape(size.begin(), size.end());
}
DType scalar_dtype(const AttrValue& v) {
  if (std::holds_alternative<double>(v)) return kDefaultFloat;
  return DType::I64;
}
}  // namespace

Metas meta_full(In, const Attrs& a) {
  DType dt = a.opt_dtype("dtype").value_or(scalar_dtype(*a.find("fill_value")));
  return {TensorMeta(dt, checked_size(a.get_ints("size")))};
}

Metas meta_zeros_ones(In, const Attrs& a) {
  return {TensorMeta(a.get_dtype("dtype"), checked_size(a.get_ints("size")))};
}

Metas meta_arange(In, const Attrs& a) {
  double start = a.get_float("start"), end = a.get_float("end"), step = a.get_float("step");
  if (step == 0) fail("arange step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end)) fail("arange bounds must be finite");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    fail("arange: upper bound and lower bound inconsistent with step sign");
  DType inferred = DType::I64;
  for (const char* k : {"start", "end", "step"})
    if (std::holds_alternative<double>(*a.find(k))) inferred = kDefaultFloat;
  DType dt = a.opt_dtype("dtype").value_or(inferred);
  // Lengths past 2^62 are errors before any conversion to int64 (which would be undefined for
  // a double that large; found by libFuzzer: end=6.7e95).
  constexpr double kMaxLength = 0x1p62;
  const double length = std::ceil((end - start) / step);
  if (!(length < kMaxLength)) fail("arange from {} to {} by {} would have {:.3g} elements", start, end, step, length);
  if (dt == DType::I64 && (std::abs(start) >= kMaxLength || std::abs(end) >= kMaxLength || std::abs(step) >= kMaxLength))
    fail("arange bounds and step must be below 2^62 in magnitude for i64, got start {}, end {}, step {}", start, end, step);
  int64_t n;
  if (dt == DType::I64) {
    // PyTorch computes an int64 arange's length in int64 with the bounds and step truncated.
    auto as_int = [&](const char* k) {
      const AttrValue& v = *a.find(k);
      return std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : static_cast<int64_t>(std::get<double>(v));
    };
    int64_t s = as_int("start"), e = as_int("end"), st = as_int("step");
    if (st == 0) fail("arange step must be nonzero (step {} truncates to 0 for i64)", attr_str(*a.find("step")));
    int64_t sgn = st > 0 ? 1 : -1;
    n = (e - s + st - sgn) / st;
  } else {
    n = static_cast<int64_t>(length);
  }
  return {TensorMeta(dt, Shape{std::max<int64_t>(n, 0)})};
}

Metas meta_constant(In, const Attrs& a) {
  Shape s = checked_size(a.get_ints("size"));
  size_t n = a.get_floats("values").size();
  if (static_cast<int64_t>(n) != numel(s))
    fail("constant of shape {} needs {} values, got {}", shape_str(s), numel(s), n);
  return {TensorMeta(a.get_dtype("dtype"), s)};
}

Metas meta_rand(In, const Attrs& a) {
  DType dt = a.get_dtype("dtype");
  if (!is_floating(dt)) fail("rand makes floating-point values, got dtype {}", dtype_name(dt));
  return {TensorMeta(dt, checked_size(a.get_ints("size")))};
}

Metas meta_tri(In in, const Attrs& a) {
  auto size = a.opt_ints("size");
  if (!in.empty()) {
    if (size) fail("give either an input tensor or size=, not both");
    if (a.has("dtype")) fail("dtype= is only for the size= form (use to() to cast)");
    if (in[0].rank() < 2) fail("the input needs at least 2 dims, got {}", shape_str(in[0].shape));
    return {in[0].contiguous()};
  }
  if (!size) fail("give an input tensor or size=[rows,cols]");
  if (size->size() < 2) fail("size {} needs at least 2 dims", shape_str(*size));
  return {TensorMeta(a.opt_dtype("dtype").value_or(kDefaultFloat), checked_size(*size))};
}

}  // namespace kiln::meta
