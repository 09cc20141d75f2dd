// Reference kernels of pointwise ops. Like PyTorch's TensorIterator, every operand is first
// converted to the op's computation type (the promoted type of the inputs, or its float type
// for div), then combined elementwise over the broadcast output shape. Floats are computed in
// double and rounded to the output dtype by HostTensor::set; integers are computed exactly in
// int64 with two's-complement wrap-around (and narrowed to i32 by set_int when stored).
#include <cmath>
#include <cstdint>
#include <numbers>

#include "ir/error.h"
#include "ir/meta/meta.h"
#include "ir/reference/kernels.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using In = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

// Wrapping int64 arithmetic (signed overflow is undefined in C++, defined as wrap in torch).
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

DType float_of(DType t) { return is_floating(t) ? t : kDefaultFloat; }

DType promoted(In in) {
  std::vector<TensorMeta> metas;
  for (auto& t : in) metas.push_back(t.meta());
  return meta::result_type(metas);
}

// The operands converted to the computation type `ct` (a copy only where the dtype differs).
std::vector<HostTensor> cast_all(In in, DType ct) {
  std::vector<HostTensor> out;
  for (auto& t : in) out.push_back(t.dtype() == ct ? t : t.to(ct));
  return out;
}

// Runs fn(out, i, j) for every output element i, where j[k] is the broadcast index into input k.
template <class Fn>
std::vector<HostTensor> map_elements(In in, const TensorMeta& out_meta, Fn fn) {
  HostTensor out = HostTensor::empty(out_meta);
  std::vector<BroadcastIndexer> ix;
  for (auto& t : in) ix.emplace_back(t.shape(), out_meta.shape);
  std::vector<int64_t> j(in.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    for (size_t k = 0; k < in.size(); ++k) j[k] = ix[k](i);
    fn(out, i, j);
  }
  return {out};
}

// A unary op with one formula for floats and one for integers; the computation type is the
// output's (int inputs of float-only ops are converted to float first).
template <class F, class I>
ReferenceFn unary(F f, I g) {
  return [f, g](In in, const Attrs&, Outs outs) {
    DType ct = outs[0].dtype;
    auto x = cast_all(in, ct);
    return map_elements(x, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
      if (is_floating(ct)) o.set(i, f(x[0].get(j[0])));
      else o.set_int(i, g(x[0].get_int(j[0])));
    });
  };
}
template <class F>
ReferenceFn unary_float(F f) {
  return unary(f, [](int64_t) -> int64_t {
    KILN_INTERNAL_ASSERT(false, "float-only ops have float outputs");
    return 0;
  });
}

// A binary op computed in the promoted type of its inputs (`to_float`: its float type, for
// div); the result is stored in the output dtype (bool for comparisons).
template <class F, class I>
ReferenceFn binary(F f, I g, bool to_float = false) {
  return [f, g, to_float](In in, const Attrs&, Outs outs) {
    DType ct = promoted(in);
    if (to_float) ct = float_of(ct);
    auto x = cast_all(in, ct);
    return map_elements(x, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
      if (is_floating(ct)) o.set(i, f(x[0].get(j[0]), x[1].get(j[1])));
      else o.set_int(i, g(x[0].get_int(j[0]), x[1].get_int(j[1])));
    });
  };
}
// Comparisons and logical ops: the same formula for both kinds of operands.
template <class P>
ReferenceFn predicate(P p) {
  return binary([p](double a, double b) { return p(a, b) ? 1.0 : 0.0; },
                [p](int64_t a, int64_t b) -> int64_t { return p(a, b); });
}

int64_t int_pow(int64_t base, int64_t exp) {
  // PyTorch's tensor-tensor pow: a negative exponent gives 1/base truncated toward zero
  // (kiln's scalars are 0-d tensors, so this is the rule that applies to every pow).
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  for (; exp; exp >>= 1, base = wrap_mul(base, base))
    if (exp & 1) r = wrap_mul(r, base);
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
// NaN-propagating max/min (std::max would drop a NaN in the second operand).
// erf's inverse in double: Giles' single-precision approximation ("Approximating the erfinv
// function", GPU Computing Gems, 2011) refined by Newton steps on erf(x) = y, on erfc(x) = 1 - y
// past |y| = 0.5 (1 - y is exact there, and erfc keeps its relative precision in the tail where
// erf's rounds to 1).
double erfinv_of(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return NAN;
  if (y == 1 || y == -1) return y * INFINITY;
  const double a = std::fabs(y);
  double w = -std::log((1.0 - a) * (1.0 + a)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                     1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406,
                     2.83297682})
      p = c + p * w;
  }
  double x = p * a;
  const double slope = 2 / std::sqrt(std::numbers::pi);
  for (int step = 0; step < 3; ++step) {
    const double residual = a <= 0.5 ? std::erf(x) - a : (1.0 - a) - std::erfc(x);
    x -= residual / (slope * std::exp(-x * x));
  }
  return y < 0 ? -x : x;
}

double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
// PyTorch's sign is (0 < x) - (x < 0), which makes sign(NaN) = 0.
template <class T>
T sign_of(T x) { return static_cast<T>((T(0) < x) - (x < T(0))); }

std::vector<HostTensor> where_kernel(In in, const Attrs&, Outs outs) {
  DType ct = outs[0].dtype;
  auto x = cast_all(in.subspan(1), ct);
  return map_elements(in, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
    const HostTensor& pick = in[0].get_int(j[0]) ? x[0] : x[1];
    int64_t jj = in[0].get_int(j[0]) ? j[1] : j[2];
    if (is_floating(ct)) o.set(i, pick.get(jj));
    else o.set_int(i, pick.get_int(jj));
  });
}

// clamp(x, min, max) = min(max(x, lo), hi): when lo > hi every element becomes hi, and a NaN
// input stays NaN. Bounds are converted to the computation type first, as torch does.
std::vector<HostTensor> clamp_kernel(In in, const Attrs& a, Outs outs) {
  DType ct = outs[0].dtype;
  auto x = cast_all(in, ct);
  auto bound = [&](const char* name) -> std::optional<HostTensor> {
    const AttrValue* v = a.find(name);
    if (!v) return std::nullopt;
    HostTensor b = HostTensor::empty(ct, {});
    if (auto* iv = std::get_if<int64_t>(v)) b.set_int(0, *iv);
    else b.set(0, std::get<double>(*v));
    return b;
  };
  auto lo = bound("min"), hi = bound("max");
  return map_elements(x, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
    if (is_floating(ct)) {
      double v = x[0].get(j[0]);
      if (lo && !std::isnan(v)) v = std::max(v, lo->get(0));
      if (hi && !std::isnan(v)) v = std::min(v, hi->get(0));
      o.set(i, v);
    } else {
      int64_t v = x[0].get_int(j[0]);
      if (lo) v = std::max(v, lo->get_int(0));
      if (hi) v = std::min(v, hi->get_int(0));
      o.set_int(i, v);
    }
  });
}

// The fill value is cast to the input's dtype (a float value truncates on an int tensor).
std::vector<HostTensor> masked_fill_kernel(In in, const Attrs& a, Outs outs) {
  const AttrValue* value = a.find("value");
  return map_elements(in, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
    if (in[1].get_int(j[1])) {
      if (auto* iv = std::get_if<int64_t>(value)) o.set_int(i, *iv);
      else o.set(i, std::get<double>(*value));
    } else if (is_floating(o.dtype())) {
      o.set(i, in[0].get(j[0]));
    } else {
      o.set_int(i, in[0].get_int(j[0]));
    }
  });
}

// to(dtype): float -> int truncates toward zero, anything -> bool is != 0, int -> int exact.
std::vector<HostTensor> to_kernel(In in, const Attrs&, Outs outs) {
  bool exact_int = !is_floating(in[0].dtype());
  return map_elements(in, outs[0], [&](HostTensor& o, int64_t i, const std::vector<int64_t>& j) {
    if (exact_int) o.set_int(i, in[0].get_int(j[0]));
    else o.set(i, in[0].get(j[0]));
  });
}

// remainder's floored division: fmod's remainder moved to the divisor's sign (as PyTorch's
// kernel computes it: fmod, then + b where the signs differ).
double python_remainder(double a, double b) {
  double m = std::fmod(a, b);
  return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
}

}  // namespace

void install_pointwise(const Setter& set) {
  set(Op::Neg, unary([](double x) { return -x; }, [](int64_t x) { return wrap_sub(0, x); }));
  set(Op::Abs, unary([](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }));
  set(Op::Relu, unary([](double x) { return std::isnan(x) ? x : std::max(x, 0.0); },
                      [](int64_t x) { return std::max<int64_t>(x, 0); }));
  set(Op::Square, unary([](double x) { return x * x; }, [](int64_t x) { return wrap_mul(x, x); }));
  set(Op::Sign, unary(sign_of<double>, sign_of<int64_t>));
  set(Op::LogicalNot, unary([](double x) { return x == 0 ? 1.0 : 0.0; }, [](int64_t x) -> int64_t { return x == 0; }));
  set(Op::Exp, unary_float([](double x) { return std::exp(x); }));
  set(Op::Log, unary_float([](double x) { return std::log(x); }));
  set(Op::Log1p, unary_float([](double x) { return std::log1p(x); }));
  set(Op::Sqrt, unary_float([](double x) { return std::sqrt(x); }));
  set(Op::Rsqrt, unary_float([](double x) { return 1.0 / std::sqrt(x); }));
  set(Op::Reciprocal, unary_float([](double x) { return 1.0 / x; }));
  set(Op::Sin, unary_float([](double x) { return std::sin(x); }));
  set(Op::Cos, unary_float([](double x) { return std::cos(x); }));
  set(Op::Tanh, unary_float([](double x) { return std::tanh(x); }));
  set(Op::Sigmoid, unary_float(sigmoid));
  set(Op::Silu, unary_float([](double x) { return x / (1.0 + std::exp(-x)); }));  // torch's formula
  set(Op::Erf, unary_float([](double x) { return std::erf(x); }));
  set(Op::Erfinv, unary_float(erfinv_of));
  auto same_int = [](int64_t x) { return x; };
  set(Op::Floor, unary([](double x) { return std::floor(x); }, same_int));
  set(Op::Ceil, unary([](double x) { return std::ceil(x); }, same_int));
  set(Op::Round, unary([](double x) { return std::nearbyint(x); }, same_int));  // half to even
  set(Op::Trunc, unary([](double x) { return std::trunc(x); }, same_int));
  set(Op::Log2, unary_float([](double x) { return std::log2(x); }));
  set(Op::Exp2, unary_float([](double x) { return std::exp2(x); }));
  set(Op::Gelu, [exact = unary_float(gelu_erf), tanh = unary_float(gelu_tanh)](In in, const Attrs& a, Outs outs) {
    return (a.get_string("approximate") == "tanh" ? tanh : exact)(in, a, outs);
  });
  set(Op::To, to_kernel);

  set(Op::Add, binary(std::plus<double>(), wrap_add));
  set(Op::Sub, binary(std::minus<double>(), wrap_sub));
  set(Op::Mul, binary(std::multiplies<double>(), wrap_mul));
  set(Op::Div, binary(std::divides<double>(), [](int64_t, int64_t) -> int64_t { return 0; }, /*to_float=*/true));
  set(Op::Pow, binary([](double a, double b) { return std::pow(a, b); }, int_pow));
  set(Op::Maximum, binary(nan_max, [](int64_t a, int64_t b) { return std::max(a, b); }));
  set(Op::Minimum, binary(nan_min, [](int64_t a, int64_t b) { return std::min(a, b); }));
  auto no_int = [](int64_t, int64_t) -> int64_t { return 0; };  // the shape rule takes floats only
  set(Op::Fmod, binary([](double a, double b) { return std::fmod(a, b); }, no_int));
  set(Op::Remainder, binary(python_remainder, no_int));
  set(Op::Atan2, binary([](double a, double b) { return std::atan2(a, b); }, no_int, /*to_float=*/true));
  set(Op::Eq, predicate([](auto a, auto b) { return a == b; }));
  set(Op::Ne, predicate([](auto a, auto b) { return a != b; }));
  set(Op::Lt, predicate([](auto a, auto b) { return a < b; }));
  set(Op::Le, predicate([](auto a, auto b) { return a <= b; }));
  set(Op::Gt, predicate([](auto a, auto b) { return a > b; }));
  set(Op::Ge, predicate([](auto a, auto b) { return a >= b; }));
  set(Op::LogicalAnd, predicate([](auto a, auto b) { return a != 0 && b != 0; }));
  set(Op::LogicalOr, predicate([](auto a, auto b) { return a != 0 || b != 0; }));
  auto no_float = [](double, double) { return 0.0; };  // the shape rule takes integers and bools only
  set(Op::BitwiseAnd, binary(no_float, [](int64_t a, int64_t b) { return a & b; }));
  set(Op::BitwiseOr, binary(no_float, [](int64_t a, int64_t b) { return a | b; }));
  set(Op::BitwiseXor, binary(no_float, [](int64_t a, int64_t b) { return a ^ b; }));
  set(Op::Where, where_kernel);
  set(Op::Clamp, clamp_kernel);
  set(Op::MaskedFill, masked_fill_kernel);
}

}  // namespace kiln::reference
