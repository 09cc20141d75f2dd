#include "tests/support/nonfinite_grads.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "tests/support/support.h"

namespace kiln::testing {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

HostTensor D(const Shape& s, std::vector<double> v) { return HostTensor::from_doubles(DType::F64, s, v); }
HostTensor Bools(const Shape& s, std::vector<int64_t> v) { return HostTensor::from_ints(DType::Bool, s, v); }
HostTensor Longs(const Shape& s, std::vector<int64_t> v) { return HostTensor::from_ints(DType::I64, s, v); }
std::vector<double> repeat(double v, size_t n) { return std::vector<double>(n, v); }

NonfiniteGradCase one_op(std::string name, std::string torch, Op op, std::vector<HostTensor> inputs, const Attrs& attrs,
                         HostTensor tangent, std::vector<HostTensor> expected) {
  std::vector<TensorMeta> metas;
  for (const HostTensor& t : inputs) metas.push_back(t.meta());
  return {std::move(name), std::move(torch), one_op_graph(op, metas, attrs), std::move(inputs), {std::move(tangent)},
          std::move(expected)};
}

// A unary op on a vector x with tangent t.
NonfiniteGradCase unary(std::string name, std::string torch, Op op, std::vector<double> x, std::vector<double> t,
                        std::vector<double> want, const Attrs& attrs = {}) {
  Shape s{static_cast<int64_t>(x.size())};
  return one_op(std::move(name), std::move(torch), op, {D(s, std::move(x))}, attrs, D(s, std::move(t)), {D(s, std::move(want))});
}

// PyTorch's CPU layer_norm backward of one row (LayerNormBackwardKernelImplInternal), written
// in its own a/b/c form, which is not the form kiln's rule uses:
//   ds = sum(dy*w*x), db = sum(dy*w), a = rstd, b = (db*mean - ds)*rstd^3/N,
//   c = -b*mean - db*rstd/N, dx = a*dy*w + b*x + c.
std::vector<double> torch_layer_norm_dx(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& dy, double eps) {
  double n = static_cast<double>(x.size()), mean = 0, var = 0, ds = 0, db = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  double rstd = 1 / std::sqrt(var + eps);
  for (size_t j = 0; j < x.size(); ++j) ds += dy[j] * w[j] * x[j], db += dy[j] * w[j];
  double b = (db * mean - ds) * rstd * rstd * rstd / n, c = -b * mean - db * rstd / n;
  std::vector<double> dx;
  for (size_t j = 0; j < x.size(); ++j) dx.push_back(rstd * dy[j] * w[j] + b * x[j] + c);
  return dx;
}

// Row r's dgamma term of the same kernel: dy * (x - mean) * rstd.
std::vector<double> torch_layer_norm_dw_row(const std::vector<double>& x, const std::vector<double>& dy, double eps) {
  double n = static_cast<double>(x.size()), mean = 0, var = 0;
  for (double v : x) mean += v / n;
  for (double v : x) var += (v - mean) * (v - mean) / n;
  double rstd = 1 / std::sqrt(var + eps);
  std::vector<double> dw;
  for (size_t j = 0; j < x.size(); ++j) dw.push_back(dy[j] * (x[j] - mean) * rstd);
  return dw;
}

void pointwise(std::vector<NonfiniteGradCase>& cs) {
  cs.push_back(unary("relu", "threshold_backward(grad, relu(x), 0): relu(x) <= 0 ? 0 : grad (NaN <= 0 is false)", Op::Relu,
                     {kNan, kInf, -kInf, -1, 0, 2}, {1, 2, 3, 4, 5, 6}, {1, 2, 0, 0, 0, 6}));
  cs.push_back(unary("relu_nonfinite_grad", "threshold_backward: a where, so a blocked NaN/inf gradient is 0", Op::Relu,
                     {-1, 2, 0, 3}, {kNan, kInf, kInf, kNan}, {0, kInf, 0, kNan}));
  // gelu_backward: dy * (cdf + x * pdf); at +-inf, x * pdf = inf * 0 = NaN.
  const double cdf1 = 0.5 * (1 + std::erf(1 / std::numbers::sqrt2)), pdf1 = std::exp(-0.5) / std::sqrt(2 * std::numbers::pi);
  cs.push_back(unary("gelu", "gelu_backward(grad, x): grad * (Phi(x) + x * phi(x))", Op::Gelu, {kNan, kInf, -kInf, 0, 1},
                     repeat(1, 5), {kNan, kNan, kNan, 0.5, cdf1 + pdf1}, {{"approximate", std::string("none")}}));
  cs.push_back(unary("gelu_tanh",
                     "gelu_backward(approximate='tanh'): left*(1-tanh^2)*inner' with left = x/2 = +-inf, 1-tanh^2 = 0 -> NaN",
                     Op::Gelu, {kNan, kInf, -kInf, 0}, repeat(1, 4), {kNan, kNan, kNan, 0.5}, {{"approximate", std::string("tanh")}}));
  cs.push_back(unary("tanh", "tanh_backward(grad, y) = grad * (1 - y^2)", Op::Tanh, {kNan, kInf, -kInf, 0}, {1, 2, 3, 4},
                     {kNan, 0, 0, 4}));
  cs.push_back(unary("sigmoid", "sigmoid_backward(grad, y) = grad * (1 - y) * y", Op::Sigmoid, {kNan, kInf, -kInf, 0},
                     {1, 2, 3, 4}, {kNan, 0, 0, 1}));
  cs.push_back(unary("silu", "silu_backward: grad * s * (1 + x * (1 - s)), s = sigmoid(x): inf * 0 at +-inf", Op::Silu,
                     {kNan, kInf, -kInf, 0}, repeat(1, 4), {kNan, kNan, kNan, 0.5}));
  cs.push_back(unary("exp", "grad * result", Op::Exp, {kNan, kInf, -kInf, 0}, {1, 2, 3, 4}, {kNan, kInf, 0, 4}));
  cs.push_back(unary("log", "grad.div(self)", Op::Log, {kNan, kInf, -kInf, 0, -0.0, -2, 4}, repeat(1, 7),
                     {kNan, 0, -0.0, kInf, -kInf, -0.5, 0.25}));
  cs.push_back(unary("log1p", "log1p_backward: grad / (self + 1)", Op::Log1p, {kNan, kInf, -1, -2}, repeat(1, 4),
                     {kNan, 0, kInf, -1}));
  cs.push_back(unary("sqrt", "grad / (2 * result)", Op::Sqrt, {kNan, kInf, -kInf, 0, -1, 4}, repeat(1, 6),
                     {kNan, 0, kNan, kInf, kNan, 0.25}));
  cs.push_back(unary("rsqrt", "-0.5 * grad * result.pow(3)", Op::Rsqrt, {kNan, kInf, -kInf, 0, -1, 4}, repeat(1, 6),
                     {kNan, -0.0, kNan, -kInf, kNan, -0.0625}));
  cs.push_back(unary("reciprocal", "-grad * (result * result)", Op::Reciprocal, {kNan, kInf, -kInf, 0, -0.0, 2}, repeat(1, 6),
                     {kNan, -0.0, -0.0, -kInf, -kInf, -0.25}));
  // torch.sign(nan) is 0 (pytorch/pytorch#41245), so abs passes no gradient at a NaN.
  cs.push_back(unary("abs", "grad * self.sgn()", Op::Abs, {kNan, kInf, -kInf, 0, -2}, {1, 2, 3, 4, 5}, {0, 2, -3, 0, -5}));
  cs.push_back(unary("square", "pow_backward(grad, self, 2) = grad * 2 * self", Op::Square, {kNan, kInf, -kInf}, repeat(1, 3),
                     {kNan, kInf, -kInf}));
  cs.push_back(unary("erf", "2 / sqrt(pi) * exp(-self^2) * grad", Op::Erf, {kNan, kInf, -kInf, 0}, repeat(1, 4),
                     {kNan, 0, 0, 2 / std::sqrt(std::numbers::pi)}));
  cs.push_back(unary("erfinv", "0.5 * sqrt(M_PI) * exp(self.erfinv().pow(2)) * grad", Op::Erfinv, {kNan, 1, -1, 2, 0},
                     repeat(1, 5), {kNan, kInf, kInf, kNan, std::sqrt(std::numbers::pi) / 2}));
  cs.push_back(unary("sin", "grad * self.cos()", Op::Sin, {kNan, kInf, 0}, repeat(1, 3), {kNan, kNan, 1}));
  cs.push_back(unary("cos", "grad * -self.sin()", Op::Cos, {kNan, kInf, 0}, repeat(1, 3), {kNan, kNan, -0.0}));
  cs.push_back(unary("neg", "grad.neg()", Op::Neg, {kNan, kInf}, {kInf, kNan}, {-kInf, kNan}));
  cs.push_back(unary("clamp", "clamp_backward: where(self >= min & self <= max, grad, 0): NaN compares false", Op::Clamp,
                     {kNan, kInf, -kInf, 0.5, 0, 1}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 4, 5, 6}, {{"min", 0.0}, {"max", 1.0}}));
  cs.push_back(unary("clamp_min", "clamp_backward: where(self >= min, grad, 0)", Op::Clamp, {kNan, kInf, -kInf}, {1, 2, 3},
                     {0, 2, 0}, {{"min", 0.0}}));

  // maximum: where(a == b, grad / 2, grad).masked_fill_(a < b, 0); NaN compares false both
  // ways, so both operands get the whole gradient.
  HostTensor a = D({4}, {kNan, 1, kInf, 2}), b = D({4}, {1, kNan, kInf, -kInf}), t = D({4}, {1, 2, 4, 8});
  cs.push_back(one_op("maximum", "self: where(self == other, grad / 2, grad).masked_fill_(self < other, 0); other: ... (self > other)",
                      Op::Maximum, {a, b}, {}, t, {D({4}, {1, 2, 2, 8}), D({4}, {1, 2, 2, 0})}));
  cs.push_back(one_op("minimum", "self: where(self == other, grad / 2, grad).masked_fill_(self > other, 0); other: ... (self < other)",
                      Op::Minimum, {a, b}, {}, t, {D({4}, {1, 2, 2, 0}), D({4}, {1, 2, 2, 8})}));
  cs.push_back(one_op("where", "self: where(condition, grad, 0); other: where(condition, 0, grad)", Op::Where,
                      {Bools({3}, {1, 0, 1}), D({3}, {kNan, 1, kInf}), D({3}, {2, kNan, -kInf})}, {}, D({3}, {1, kNan, kInf}),
                      {D({3}, {1, 0, kInf}), D({3}, {0, kNan, 0})}));
  cs.push_back(one_op("masked_fill", "grad.masked_fill(mask, 0)", Op::MaskedFill, {D({3}, {kNan, kInf, 1}), Bools({3}, {1, 0, 1})},
                      {{"value", 2.0}}, D({3}, {kNan, 2, kInf}), {D({3}, {0, 2, 0})}));
  cs.push_back(one_op("mul", "self: grad * other; other: grad * self", Op::Mul, {D({3}, {kInf, 0, kNan}), D({3}, {0, kNan, 1})}, {},
                      D({3}, {1, 1, 1}), {D({3}, {0, kNan, 1}), D({3}, {kInf, 0, kNan})}));
  cs.push_back(one_op("div", "self: grad / other; other: -grad * ((self / other) / other)", Op::Div,
                      {D({4}, {1, kInf, 0, kNan}), D({4}, {0, kInf, 0, 2})}, {}, D({4}, {1, 1, 1, 1}),
                      {D({4}, {kInf, 0, kInf, 0.5}), D({4}, {-kInf, kNan, kNan, kNan})}));
  // pow: self: where(exponent == 0, 0, grad * exponent * self.pow(exponent - 1));
  //      exponent: grad * where(self == 0 & exponent >= 0, 0, result * self.log()).
  cs.push_back(one_op("pow", "pow_backward_self / pow_backward_exponent", Op::Pow, {D({4}, {kNan, kInf, 0, 2}), D({4}, {0, 2, kNan, kInf})},
                      {}, D({4}, {1, 1, 1, 1}), {D({4}, {0, kInf, kNan, kInf}), D({4}, {kNan, kInf, kNan, kInf})}));
}

void reductions(std::vector<NonfiniteGradCase>& cs) {
  // amax/amin: scale_grad_by_count(grad, result == self, dim) = (grad / mask.sum(dim)) * mask.
  // A NaN result equals nothing: the count is 0, grad / 0 is inf, inf * 0 is NaN for the whole
  // slice. Ties (infinities included) share the gradient evenly.
  cs.push_back(one_op("amax", "scale_grad_by_count(grad, amax(x) == x, dim)", Op::Amax,
                      {D({4, 3}, {1, kNan, 3, kInf, kInf, 1, -kInf, -kInf, -kInf, 2, 5, 5})}, {{"dim", IntList{1}}},
                      D({4}, {1, 2, 3, 4}), {D({4, 3}, {kNan, kNan, kNan, 1, 1, 0, 1, 1, 1, 0, 2, 2})}));
  cs.push_back(one_op("amin", "scale_grad_by_count(grad, amin(x) == x, dim)", Op::Amin,
                      {D({4, 3}, {1, kNan, 3, -kInf, 4, -kInf, kInf, kInf, kInf, 2, 2, 7})}, {{"dim", IntList{-1}}, {"keepdim", true}},
                      D({4, 1}, {1, 2, 3, 4}), {D({4, 3}, {kNan, kNan, kNan, 1, 0, 1, 1, 1, 1, 2, 2, 0})}));
  cs.push_back(one_op("amax_all_nan", "scale_grad_by_count over every dim: a NaN anywhere makes every gradient NaN", Op::Amax,
                      {D({2, 2}, {1, kNan, 3, kNan})}, {}, D({}, {1}), {D({2, 2}, repeat(kNan, 4))}));
  cs.push_back(one_op("amax_all_inf_tie", "scale_grad_by_count: two +inf maxima share the gradient", Op::Amax,
                      {D({3}, {kInf, 1, kInf})}, {}, D({}, {1}), {D({3}, {0.5, 0, 0.5})}));
  cs.push_back(one_op("sum", "grad.expand(self.sizes())", Op::Sum, {D({2}, {kNan, kInf})}, {}, D({}, {2}), {D({2}, {2, 2})}));
  cs.push_back(one_op("mean", "grad.expand(self.sizes()) / numel", Op::Mean, {D({3}, {kNan, 1, kInf})}, {}, D({}, {3}),
                      {D({3}, {1, 1, 1})}));
  // var_backward over every dim with dof <= 0: grad * where(self == self.mean(), nan, inf).
  cs.push_back(one_op("var_dof0", "var_backward, full, dof = 0: grad * where(x == mean, nan, inf)", Op::Var, {D({2}, {1, 2})},
                      {{"correction", int64_t{2}}}, D({}, {1}), {D({2}, {kInf, kInf})}));
  cs.push_back(one_op("var_dof0_one_element", "var_backward, full, dof = 0, x == mean: nan", Op::Var, {D({1}, {3})}, {},
                      D({}, {1}), {D({1}, {kNan})}));
  cs.push_back(one_op("var_dof_negative", "var_backward, full, dof < 0: grad * where(x == mean, nan, inf)", Op::Var,
                      {D({3}, {1, 2, 4})}, {{"correction", int64_t{5}}}, D({}, {1}), {D({3}, {kInf, kInf, kInf})}));
  // Over given dims PyTorch divides by (n - correction) as it is: 2/0 * grad * (x - mean).
  cs.push_back(one_op("var_dim_dof0", "var_backward over dim: (2 / (n - correction)) * grad * (x - mean)", Op::Var,
                      {D({1, 2}, {1, 2})}, {{"dim", IntList{1}}, {"correction", int64_t{2}}}, D({1}, {1}), {D({1, 2}, {-kInf, kInf})}));
  cs.push_back(one_op("var_inf", "var_backward: (2 / dof) * grad * (x - mean), mean = inf", Op::Var, {D({3}, {1, kInf, 2})}, {},
                      D({}, {1}), {D({3}, {-kInf, kNan, -kInf})}));
  // prod_backward with no zero in the input: grad * (result / input); inf / inf is NaN.
  cs.push_back(one_op("prod", "prod_backward (no zero): grad * (result / input)", Op::Prod, {D({3}, {2, kInf, 3})}, {}, D({}, {1}),
                      {D({3}, {kInf, kNan, kInf})}));
}

void composites(std::vector<NonfiniteGradCase>& cs) {
  // Rows: a -inf among finite values; all -inf; a NaN; a +inf. softmax is NaN on the last
  // three (x - max is NaN somewhere, so the sum is), and so is every gradient there.
  HostTensor x = D({4, 3}, {0, -kInf, 0, -kInf, -kInf, -kInf, 1, kNan, 2, kInf, 0, 1});
  HostTensor t = D({4, 3}, {1, 2, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  std::vector<double> nan9 = repeat(kNan, 9);
  // Row 0: y = [0.5, 0, 0.5], sum(g * y) = 2.
  std::vector<double> sm = {-0.5, 0, 0.5};
  sm.insert(sm.end(), nan9.begin(), nan9.end());
  cs.push_back(one_op("softmax", "_softmax_backward_data: y * (grad - (grad * y).sum(dim, keepdim))", Op::Softmax, {x},
                      {{"dim", int64_t{-1}}}, t, {D({4, 3}, sm)}));
  // The same along dim 0 of the transpose.
  auto transpose = [](const HostTensor& m) {
    HostTensor r = HostTensor::empty(DType::F64, {m.shape()[1], m.shape()[0]});
    for (int64_t i = 0; i < m.shape()[0]; ++i)
      for (int64_t j = 0; j < m.shape()[1]; ++j) r.set(j * m.shape()[0] + i, m.get(i * m.shape()[1] + j));
    return r;
  };
  cs.push_back(one_op("softmax_dim0", "_softmax_backward_data along dim 0", Op::Softmax, {transpose(x)}, {{"dim", int64_t{0}}},
                      transpose(t), {transpose(D({4, 3}, sm))}));
  // Row 0: y = [-ln 2, -inf, -ln 2], sum(grad) = 6: grad - exp(y) * 6.
  std::vector<double> lsm = {-2, 2, 0};
  lsm.insert(lsm.end(), nan9.begin(), nan9.end());
  cs.push_back(one_op("log_softmax", "_log_softmax_backward_data: grad - exp(y) * grad.sum(dim, keepdim)", Op::LogSoftmax, {x},
                      {{"dim", int64_t{1}}}, t, {D({4, 3}, lsm)}));

  // layer_norm: row 0 finite, row 1 holds +inf, row 2 a NaN. Rows 1 and 2 have mean or
  // variance NaN, so all of their dx is NaN, and every column of dweight sums a NaN from
  // them; dbias = sum(grad) stays finite.
  {
    std::vector<double> r0 = {1, 2, 4, 7}, w = {1, 2, -1, 0.5}, dy = {1, -1, 2, 0.5};
    HostTensor xs = D({3, 4}, {1, 2, 4, 7, 1, kInf, 2, 3, kNan, 1, 2, 3});
    HostTensor dys = D({3, 4}, {1, -1, 2, 0.5, 1, -1, 2, 0.5, 1, -1, 2, 0.5});
    std::vector<double> dx = torch_layer_norm_dx(r0, w, dy, 1e-5);
    for (int i = 0; i < 8; ++i) dx.push_back(kNan);
    cs.push_back(one_op("layer_norm", "native_layer_norm_backward (CPU kernel's a/b/c form)", Op::LayerNorm,
                        {xs, D({4}, w), D({4}, {0, 0, 0, 0})}, {{"normalized_shape", IntList{4}}}, dys,
                        {D({3, 4}, dx), D({4}, repeat(kNan, 4)), D({4}, {3, -3, 6, 1.5})}));
    // A NaN weight: dx of every row is NaN (ds and db sum it), dweight and dbias do not read
    // the weight and stay finite.
    std::vector<double> w_nan = {1, kNan, -1, 0.5};
    std::vector<double> dw = torch_layer_norm_dw_row(r0, dy, 1e-5);
    cs.push_back(one_op("layer_norm_nan_weight", "native_layer_norm_backward: dgamma = sum(dy * (x - mean) * rstd)", Op::LayerNorm,
                        {D({1, 4}, r0), D({4}, w_nan), D({4}, {0, 0, 0, 0})}, {{"normalized_shape", IntList{4}}}, D({1, 4}, dy),
                        {D({1, 4}, repeat(kNan, 4)), D({4}, dw), D({4}, dy)}));
  }

  // cross_entropy = nll_loss(log_softmax(x)). nll_loss_backward writes -grad/total_weight at
  // each counted row's target only; log_softmax_backward then gives g - exp(logp) * sum(g).
  const double e = std::exp(1.0);
  {
    // Row 0: -inf logit, target 0; row 1 ignored (finite: its gradient is 0 - p * 0 = 0);
    // row 2: +inf logit, so log_softmax is NaN and so is the whole row's gradient. mean over
    // the 2 counted rows.
    HostTensor logits = D({3, 3}, {0, -kInf, 1, 1, 2, 3, kInf, 0, 0});
    HostTensor target = Longs({3}, {0, -100, 1});
    std::vector<double> want = {(1 / (1 + e) - 1) / 2, 0, e / (1 + e) / 2, 0, 0, 0, kNan, kNan, kNan};
    cs.push_back(one_op("cross_entropy", "nll_loss_backward then _log_softmax_backward_data", Op::CrossEntropy, {logits, target}, {},
                        D({}, {1}), {D({3, 3}, want)}));
  }
  // Every row ignored under "mean": the loss is 0/0 = NaN, but nll_loss_backward writes no
  // row, so the gradient is 0 (a product with the mask would make it 0 * inf = NaN).
  cs.push_back(one_op("cross_entropy_all_ignored", "nll_loss_backward writes no row: zeros", Op::CrossEntropy,
                      {D({2, 3}, {1, 2, 3, 4, 5, 6}), Longs({2}, {-100, -100})}, {}, D({}, {1}), {D({2, 3}, repeat(0, 6))}));
  cs.push_back(one_op("cross_entropy_smoothing_all_ignored",
                      "label smoothing: smooth_loss.masked_fill_(ignore_mask, 0) zeroes the inf from sum / 0", Op::CrossEntropy,
                      {D({2, 3}, {1, 2, 3, 4, 5, 6}), Longs({2}, {-100, -100})}, {{"label_smoothing", 0.1}}, D({}, {1}),
                      {D({2, 3}, repeat(0, 6))}));
  cs.push_back(one_op("nll_loss_all_ignored", "nll_loss_backward writes no row: zeros", Op::NllLoss,
                      {D({2, 3}, {-1, -2, -3, -1, -2, -3}), Longs({2}, {-100, -100})}, {}, D({}, {1}), {D({2, 3}, repeat(0, 6))}));
  // reduction="none": an ignored row's gradient is 0 even where its upstream gradient is NaN.
  cs.push_back(one_op("cross_entropy_none_nan_grad", "nll_loss_backward skips ignored rows whatever grad_output holds",
                      Op::CrossEntropy, {D({2, 2}, {1, 2, 3, 4}), Longs({2}, {0, -100})}, {{"reduction", std::string("none")}},
                      D({2}, {1, kNan}), {D({2, 2}, {1 / (1 + e) - 1, e / (1 + e), 0, 0})}));
  // nll_loss writes only the target's entry: an infinite upstream gradient leaves the other
  // entries 0 (a product with the one-hot would make them 0 * inf = NaN).
  cs.push_back(one_op("nll_loss_sum_inf_grad", "nll_loss_backward: grad_input[i][target[i]] = -grad, nothing else",
                      Op::NllLoss, {D({2, 3}, {-1, -2, -3, -1, -2, -3}), Longs({2}, {2, -100})}, {{"reduction", std::string("sum")}},
                      D({}, {kInf}), {D({2, 3}, {0, 0, -kInf, 0, 0, 0})}));
}

}  // namespace

std::vector<NonfiniteGradCase> nonfinite_grad_cases() {
  std::vector<NonfiniteGradCase> cs;
  pointwise(cs);
  reductions(cs);
  composites(cs);
  return cs;
}

}  // namespace kiln::testing
