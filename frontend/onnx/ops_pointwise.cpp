// ONNX's elementwise operators: unary math and activations, broadcasting binary arithmetic and
// comparisons, variadic Max/Min/Sum/Mean, Where, Clip, Cast.
#include <fmt/format.h>

#include <cmath>

#include "frontend/onnx/op_table.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {


Converter unary(Op op) {
  return [op](NodeContext& c) { return one(c.b.op(op, {c.in(0)})); };
}

// The second operand of a binary operator. Before opset 7 (Add, Sub, Mul, Div, Pow, And, Or, Xor,
// Equal, Less, Greater) it broadcasts only with broadcast=1, its dims matched to the first's from
// `axis`, or to its last dims where no axis is given (what numpy broadcasting does); without
// broadcast the shapes are equal.
Var second_operand(NodeContext& c) {
  Var b = c.in(1);
  if (c.opset >= 7) return b;
  const TensorMeta a = c.meta(0);
  if (c.attr_int("broadcast", 0) == 0) {
    if (a.shape != b.shape())
      c.error(fmt::format("operands {} and {} differ without broadcast=1 (opset {})", shape_str(a.shape), shape_str(b.shape()), c.opset));
    return b;
  }
  if (!c.has_attr("axis")) return b;
  const int64_t axis = normalize_axis(c, c.attr_int("axis"), std::max<int64_t>(a.rank(), 1)), rb = b.rank();
  if (axis + rb > a.rank()) c.error(fmt::format("B {} does not fit A {} from axis {}", shape_str(b.shape()), shape_str(a.shape), axis));
  Shape s(static_cast<size_t>(a.rank()), 1);
  for (int64_t d = 0; d < rb; ++d) s[static_cast<size_t>(axis + d)] = b.shape()[static_cast<size_t>(d)];
  return c.b.reshape(b, s);
}

Converter binary(Op op) {
  return [op](NodeContext& c) { return one(c.b.op(op, {c.in(0), second_operand(c)})); };
}

// Integer Div and Mod: ONNX truncates (Div) or takes the divisor's sign (Mod) on integers, where
// kiln's div is true division and its fmod/remainder take floats: computed in f64 (exact for
// the magnitudes below 2^53 that shapes and indices have), then cast back.
Var integer_op(NodeContext& c, Op op, bool truncate) {
  DType dt = c.meta(0).dtype;
  Var a = c.b.to(c.in(0), DType::F64), d = c.b.to(second_operand(c), DType::F64);
  Var r = c.b.op(op, {a, d});
  if (truncate) r = c.b.trunc(r);
  return c.b.to(r, dt);
}

std::vector<Out> div(NodeContext& c) {
  if (is_floating(c.meta(0).dtype)) return one(c.b.div(c.in(0), second_operand(c)));
  return one(integer_op(c, Op::Div, true));
}

std::vector<Out> mod(NodeContext& c) {
  bool f = c.attr_int("fmod", 0) != 0;
  if (!f && is_floating(c.meta(0).dtype)) c.error("fmod=0 is for integers; floating-point Mod needs fmod=1");
  if (is_floating(c.meta(0).dtype)) return one(c.b.fmod(c.in(0), c.in(1)));
  return one(integer_op(c, f ? Op::Fmod : Op::Remainder, false));
}

std::vector<Out> pow(NodeContext& c) {
  // The result has the base's type (the exponent may be of another).
  DType dt = c.meta(0).dtype;
  Var e = second_operand(c);
  if (is_floating(dt)) e = c.b.to(e, dt);
  return one(c.b.to(c.b.pow(c.in(0), e), dt));
}

// Max, Min, Sum, Mean: any number of broadcasting operands.
Converter variadic(Op op, bool mean = false) {
  return [op, mean](NodeContext& c) {
    std::vector<Value> xs = c.present_inputs();
    if (xs.empty()) c.error("needs at least one input");
    Var acc = c.b.wrap(xs[0]);
    for (size_t i = 1; i < xs.size(); ++i) acc = c.b.op(op, {acc, xs[i]});
    if (mean && xs.size() > 1) acc = c.b.div(acc, c.b.scalar(static_cast<double>(xs.size()), acc.dtype()));
    return one(acc);
  };
}

std::vector<Out> xor_op(NodeContext& c) { return one(c.b.ne(c.in(0), second_operand(c))); }

std::vector<Out> identity(NodeContext& c) {
  if (const HostTensor* k = c.known(0)) return {Out::of_known(*k)};
  return one(c.in(0));
}

std::vector<Out> cast(NodeContext& c) {
  int to = static_cast<int>(c.attr_int("to"));
  std::optional<DType> dt = dtype_of(to);
  if (!dt) c.unsupported(fmt::format("a cast to {} (kiln has f16, bf16, f32, f64, i32, i64 and bool)", elem_type_name(to)));
  c.ignore_attr("saturate");
  return one(c.b.to(c.in(0), *dt));
}

std::vector<Out> cast_like(NodeContext& c) { return one(c.b.to(c.in(0), c.meta(1).dtype)); }

std::vector<Out> clip(NodeContext& c) {
  Var x = c.in(0);
  if (c.opset < 11) {
    std::optional<double> lo, hi;
    if (c.has_attr("min")) lo = c.attr_float("min");
    if (c.has_attr("max")) hi = c.attr_float("max");
    if (!lo && !hi) return one(x);
    return one(c.b.clamp(x, lo, hi));
  }
  // min and max are optional 0-d inputs: a clamp when known, else maximum/minimum.
  std::optional<double> lo, hi;
  bool lo_known = !c.has(1) || c.known(1), hi_known = !c.has(2) || c.known(2);
  if (lo_known && hi_known) {
    if (c.has(1)) lo = c.known(1)->get(0);
    if (c.has(2)) hi = c.known(2)->get(0);
    if (!lo && !hi) return one(x);
    return one(c.b.clamp(x, lo, hi));
  }
  if (c.has(1)) x = c.b.maximum(x, c.in(1));
  if (c.has(2)) x = c.b.minimum(x, c.in(2));
  return one(x);
}

std::vector<Out> leaky_relu(NodeContext& c) {
  Attrs a;
  a.set("negative_slope", c.attr_float("alpha", 0.01));
  return one(c.b.op(Op::LeakyRelu, {c.in(0)}, a));
}

Var elu_of(NodeContext& c, double alpha, double scale, double input_scale) {
  Attrs a;
  a.set("alpha", alpha);
  a.set("scale", scale);
  a.set("input_scale", input_scale);
  return c.b.op(Op::Elu, {c.in(0)}, a);
}

std::vector<Out> elu(NodeContext& c) { return one(elu_of(c, c.attr_float("alpha", 1.0), 1.0, 1.0)); }

std::vector<Out> selu(NodeContext& c) {
  double alpha = c.attr_float("alpha", 1.67326319217681884765625), gamma = c.attr_float("gamma", 1.05070102214813232421875);
  return one(elu_of(c, alpha, gamma, 1.0));
}

std::vector<Out> celu(NodeContext& c) {
  double alpha = c.attr_float("alpha", 1.0);
  if (alpha == 0) c.error("alpha must not be 0");
  // celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): elu with input_scale 1/alpha
  return one(elu_of(c, alpha, 1.0, 1.0 / alpha));
}

std::vector<Out> hard_sigmoid(NodeContext& c) {
  double alpha = c.attr_float("alpha", 0.2), beta = c.attr_float("beta", 0.5);
  Var x = c.in(0);
  return one(c.b.clamp(x * alpha + beta, 0.0, 1.0));
}

std::vector<Out> thresholded_relu(NodeContext& c) {
  double alpha = c.attr_float("alpha", 1.0);
  Var x = c.in(0);
  return one(c.b.where(c.b.gt(x, c.b.scalar(alpha, x.dtype())), x, c.b.scalar(0.0, x.dtype())));
}

std::vector<Out> softsign(NodeContext& c) {
  Var x = c.in(0);
  return one(x / (c.b.abs(x) + 1.0));
}

std::vector<Out> prelu(NodeContext& c) {
  Var x = c.in(0), slope = c.in(1);
  // Before opset 7 a slope of one value per channel applies along dim 1 ([N, C, ...]), not
  // with numpy's broadcasting from the right.
  if (c.opset < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.shape()[0] == x.shape()[1] && x.rank() > 2) {
    Shape s{slope.shape()[0]};
    for (int64_t i = 2; i < x.rank(); ++i) s.push_back(1);
    slope = c.b.reshape(slope, s);
  }
  return one(c.b.where(c.b.lt(x, c.b.scalar(0.0, x.dtype())), c.b.mul(x, slope), x));
}

std::vector<Out> is_inf(NodeContext& c) {
  bool neg = c.attr_int("detect_negative", 1) != 0, pos = c.attr_int("detect_positive", 1) != 0;
  Var x = c.in(0);
  Var inf = c.b.op(Op::Isinf, {x});
  if (neg && pos) return one(inf);
  if (!neg && !pos) return one(c.b.full(x.shape(), 0, DType::Bool));
  Var side = neg ? c.b.lt(x, c.b.scalar(0.0, x.dtype())) : c.b.gt(x, c.b.scalar(0.0, x.dtype()));
  return one(c.b.logical_and(inf, side));
}

std::vector<Out> where(NodeContext& c) { return one(c.b.where(c.in(0), c.in(1), c.in(2))); }

std::vector<Out> shrink(NodeContext& c) {
  double bias = c.attr_float("bias", 0.0), lambd = c.attr_float("lambd", 0.5);
  Var x = c.in(0);
  DType dt = x.dtype();
  Var y = c.b.where(c.b.lt(x, c.b.scalar(-lambd, dt)), c.b.add(x, c.b.scalar(bias, dt)),
                    c.b.where(c.b.gt(x, c.b.scalar(lambd, dt)), c.b.sub(x, c.b.scalar(bias, dt)), c.b.scalar(0.0, dt)));
  return one(c.b.to(y, dt));
}

// The trigonometric and hyperbolic functions kiln has no op of, written with those it has:
// atan2 for the inverse trigonometric ones (exact at the ends: asin(1) = atan2(1, 0)), exp and
// log for the hyperbolic ones (asinh through |x| so that large negative x do not cancel).
Converter trig(const char* which) {
  return [which](NodeContext& c) {
    Builder& b = c.b;
    Var x = c.in(0);
    if (!is_floating(x.dtype())) c.error("needs a floating-point input");
    const DType dt = x.dtype();
    auto k = [&](double v) { return b.scalar(v, dt); };
    const std::string f = which;
    Var y;
    if (f == "Tan") y = b.div(b.sin(x), b.cos(x));
    else if (f == "Atan") y = b.atan2(x, k(1));
    else if (f == "Asin") y = b.atan2(x, b.sqrt(b.sub(k(1), b.mul(x, x))));
    else if (f == "Acos") y = b.atan2(b.sqrt(b.sub(k(1), b.mul(x, x))), x);
    else if (f == "Sinh") y = b.mul(b.sub(b.exp(x), b.exp(b.neg(x))), k(0.5));
    else if (f == "Cosh") y = b.mul(b.add(b.exp(x), b.exp(b.neg(x))), k(0.5));
    else if (f == "Asinh") {
      Var a = b.abs(x);
      y = b.mul(b.sign(x), b.log(b.add(a, b.sqrt(b.add(b.mul(a, a), k(1))))));
    } else if (f == "Acosh") y = b.log(b.add(x, b.sqrt(b.sub(b.mul(x, x), k(1)))));
    else y = b.mul(b.sub(b.log1p(x), b.log1p(b.neg(x))), k(0.5));  // Atanh
    return one(y);
  };
}

}  // namespace

void add_pointwise_ops(std::vector<OpEntry>& t) {
  for (const char* f : {"Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}) t.push_back({f, trig(f)});
  for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{
           {"Abs", Op::Abs}, {"Neg", Op::Neg}, {"Exp", Op::Exp}, {"Log", Op::Log}, {"Sqrt", Op::Sqrt},
           {"Reciprocal", Op::Reciprocal}, {"Sin", Op::Sin}, {"Cos", Op::Cos}, {"Tanh", Op::Tanh},
           {"Sigmoid", Op::Sigmoid}, {"Relu", Op::Relu}, {"Erf", Op::Erf}, {"Sign", Op::Sign},
           {"Floor", Op::Floor}, {"Ceil", Op::Ceil}, {"Round", Op::Round}, {"Not", Op::LogicalNot},
           {"IsNaN", Op::Isnan}, {"Softplus", Op::Softplus}, {"Mish", Op::Mish}, {"HardSwish", Op::Hardswish}})
    t.push_back({name, unary(op)});
  for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{
           {"Add", Op::Add}, {"Sub", Op::Sub}, {"Mul", Op::Mul}, {"Equal", Op::Eq}, {"Less", Op::Lt},
           {"LessOrEqual", Op::Le}, {"Greater", Op::Gt}, {"GreaterOrEqual", Op::Ge}, {"And", Op::LogicalAnd},
           {"Or", Op::LogicalOr}})
    t.push_back({name, binary(op)});
  t.push_back({"Div", div});
  t.push_back({"Mod", mod});
  t.push_back({"Pow", pow});
  t.push_back({"Xor", xor_op});
  t.push_back({"Max", variadic(Op::Maximum)});
  t.push_back({"Min", variadic(Op::Minimum)});
  t.push_back({"Sum", variadic(Op::Add)});
  t.push_back({"Mean", variadic(Op::Add, true)});
  t.push_back({"Identity", identity});
  t.push_back({"Cast", cast});
  t.push_back({"CastLike", cast_like});
  t.push_back({"Clip", clip});
  t.push_back({"LeakyRelu", leaky_relu});
  t.push_back({"Elu", elu});
  t.push_back({"Selu", selu});
  t.push_back({"Celu", celu});
  t.push_back({"HardSigmoid", hard_sigmoid});
  t.push_back({"ThresholdedRelu", thresholded_relu});
  t.push_back({"Softsign", softsign});
  t.push_back({"PRelu", prelu});
  t.push_back({"IsInf", is_inf});
  t.push_back({"Where", where});
  t.push_back({"Shrink", shrink});
}

}  // namespace kiln::onnx
