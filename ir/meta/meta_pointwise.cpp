// Shape-and-dtype rules of pointwise ops: NumPy broadcasting, PyTorch type promotion.
#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

DType result_type(In inputs) {
  std::optional<DType> dimensioned, zero_dim;
  for (auto& m : inputs) {
    auto& slot = m.rank() > 0 ? dimensioned : zero_dim;
    slot = slot ? promote_types(*slot, m.dtype) : m.dtype;
  }
  if (!dimensioned) return *zero_dim;
  if (!zero_dim) return *dimensioned;
  if (dtype_kind(*zero_dim) > dtype_kind(*dimensioned)) return *zero_dim;
  return *dimensioned;
}

namespace {
Shape broadcast_all(In in) {
  Shape s;
  for (auto& m : in) s = broadcast_shapes(s, m.shape);
  return s;
}
Metas one(DType dt, Shape s, const TensorMeta& like) { return {TensorMeta(dt, std::move(s), like.device)}; }
DType float_of(DType t) { return is_floating(t) ? t : kDefaultFloat; }
void check_same_device(In in) {
  for (auto& m : in)
    if (!(m.device == in[0].device))
      fail("inputs are on different devices ({} and {})", in[0].device.str(), m.device.str());
}
}  // namespace

Metas meta_input(In, const Attrs&) { fail("graph inputs have no shape rule"); }

Metas meta_unary_same(In in, const Attrs&) { return one(in[0].dtype, in[0].shape, in[0]); }
Metas meta_unary_numeric(In in, const Attrs&) {
  if (in[0].dtype == DType::Bool) fail("not defined for bool tensors (use logical_not)");
  return one(in[0].dtype, in[0].shape, in[0]);
}
Metas meta_unary_square(In in, const Attrs&) {
  // torch.square(bool) promotes to int64, as pow(x, 2) does.
  return one(in[0].dtype == DType::Bool ? DType::I64 : in[0].dtype, in[0].shape, in[0]);
}
Metas meta_unary_float(In in, const Attrs&) { return one(float_of(in[0].dtype), in[0].shape, in[0]); }
Metas meta_unary_bool(In in, const Attrs&) { return one(DType::Bool, in[0].shape, in[0]); }
Metas meta_to(In in, const Attrs& a) { return one(a.get_dtype("dtype"), in[0].shape, in[0]); }
// The activations of torch.nn.functional: floating inputs only (PyTorch has no integer
// kernels for them), the input's type and layout.
Metas meta_activation(In in, const Attrs& a) {
  if (!is_floating(in[0].dtype)) fail("needs a floating-point input, got {}", dtype_name(in[0].dtype));
  if (a.has("beta") && a.get_float("beta") == 0) fail("beta must not be 0");
  return one(in[0].dtype, in[0].shape, in[0]);
}
Metas meta_gelu(In in, const Attrs& a) {
  const std::string& ap = a.get_string("approximate");
  if (ap != "none" && ap != "tanh") fail("approximate must be \"none\" or \"tanh\", got \"{}\"", ap);
  if (!is_floating(in[0].dtype)) fail("gelu needs a floating-point input, got {}", dtype_name(in[0].dtype));
  return one(in[0].dtype, in[0].shape, in[0]);
}

Metas meta_binary_arith(In in, const Attrs&) {
  check_same_device(in);
  return one(result_type(in), broadcast_all(in), in[0]);
}
Metas meta_binary_sub(In in, const Attrs& a) {
  // PyTorch rejects a bool operand on either side, not only bool - bool.
  if (in[0].dtype == DType::Bool || in[1].dtype == DType::Bool)
    fail("subtraction with a bool tensor is not supported (use logical_not, or cast with to() first)");
  return meta_binary_arith(in, a);
}
Metas meta_binary_div(In in, const Attrs&) {
  check_same_device(in);
  return one(float_of(result_type(in)), broadcast_all(in), in[0]);
}
// fmod and remainder: PyTorch's type promotion, for floating-point results only (an integer
// remainder by 0 has no value a kernel could give; PyTorch raises there).
Metas meta_binary_mod(In in, const Attrs&) {
  check_same_device(in);
  DType dt = result_type(in);
  if (!is_floating(dt))
    fail("takes floating-point tensors only (an integer remainder by 0 has no value a compiled kernel could give), got {} "
         "and {}: cast with to() first", dtype_name(in[0].dtype), dtype_name(in[1].dtype));
  return one(dt, broadcast_all(in), in[0]);
}
Metas meta_binary_compare(In in, const Attrs&) {
  check_same_device(in);
  return one(DType::Bool, broadcast_all(in), in[0]);
}
// Bitwise ops: integer and bool tensors only, as PyTorch (a float has no bits to combine).
Metas meta_unary_bitwise(In in, const Attrs&) {
  if (is_floating(in[0].dtype)) fail("takes integer or bool tensors, got {}", dtype_name(in[0].dtype));
  return one(in[0].dtype, in[0].shape, in[0]);
}
Metas meta_binary_bitwise(In in, const Attrs&) {
  check_same_device(in);
  DType dt = result_type(in);
  if (is_floating(dt)) fail("takes integer or bool tensors, got {} and {}", dtype_name(in[0].dtype), dtype_name(in[1].dtype));
  return one(dt, broadcast_all(in), in[0]);
}
Metas meta_binary_logical(In in, const Attrs&) {
  check_same_device(in);
  return one(DType::Bool, broadcast_all(in), in[0]);
}
Metas meta_where(In in, const Attrs&) {
  check_same_device(in);
  if (in[0].dtype != DType::Bool) fail("condition must be bool, got {}", dtype_name(in[0].dtype));
  return one(result_type(in.subspan(1)), broadcast_all(in), in[1]);
}
Metas meta_clamp(In in, const Attrs& a) {
  if (!a.has("min") && !a.has("max")) fail("clamp needs at least one of min and max");
  if (in[0].dtype == DType::Bool) fail("clamp is not defined for bool tensors");
  DType dt = in[0].dtype;
  // A float bound on an integer tensor gives a float result, as in PyTorch.
  for (const char* b : {"min", "max"})
    if (auto* v = a.find(b); v && std::holds_alternative<double>(*v) && !is_floating(dt)) dt = kDefaultFloat;
  return one(dt, in[0].shape, in[0]);
}
Metas meta_masked_fill(In in, const Attrs&) {
  if (in[1].dtype != DType::Bool) fail("mask must be bool, got {}", dtype_name(in[1].dtype));
  Shape s = broadcast_shapes(in[0].shape, in[1].shape);
  if (s != in[0].shape)
    fail("mask of shape {} must broadcast to the input's shape {}", shape_str(in[1].shape), shape_str(in[0].shape));
  return one(in[0].dtype, s, in[0]);
}

Metas meta_dropout(In in, const Attrs& a) {
  double p = a.get_float("p");
  if (!(p >= 0 && p <= 1)) fail("dropout probability has to be between 0 and 1, got {}", p);
  if (!is_floating(in[0].dtype)) fail("dropout needs a floating-point input, got {}", dtype_name(in[0].dtype));
  return one(in[0].dtype, in[0].shape, in[0]);
}

}  // namespace kiln::meta
