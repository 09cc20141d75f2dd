// Reference kernels of composite ops, written out directly (not through other kernels), so
// they can check the decompositions that later lower these ops to primitives. Arithmetic is in
// double, rounded once into the result dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/random.h"
#include "ir/reference/kernels.h"
#include "ir/selu.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- tril / triu

// Keeps element (i, j) of each matrix in the last two dims where `keep(j - i - diagonal)`;
// others are zero. Without an input (the size= form) the kept elements are ones.
template <typename Keep>
std::vector<HostTensor> triangle(Ins in, const Attrs& a, Outs outs, Keep keep) {
  const TensorMeta& m = outs[0];
  HostTensor out = HostTensor::empty(m);
  int64_t rows = m.shape[m.rank() - 2], cols = m.shape.back(), diagonal = a.get_int("diagonal");
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t r = (i / cols) % rows, c = i % cols;
    if (!keep(c - r - diagonal)) continue;  // already zero
    if (in.empty()) out.set_int(i, 1);
    else if (is_floating(m.dtype)) out.set(i, in[0].get(i));
    else out.set_int(i, in[0].get_int(i));
  }
  return {out};
}

// ---- softmax / log_softmax

// A tensor seen as [outer, n, inner] around one dim: element (o, k, j) has logical index
// (o * n + k) * inner + j.
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
  AroundDim(const Shape& s, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      (d < dim ? outer : d == dim ? n : inner) *= s[d];
  }
  int64_t at(int64_t o, int64_t k, int64_t j) const { return (o * n + k) * inner + j; }
};

std::vector<HostTensor> softmax_kernel(Ins in, const Attrs& a, Outs outs, bool log) {
  // dtype= casts the input first, so values are rounded to it before the arithmetic.
  HostTensor x = a.opt_dtype("dtype") ? in[0].to(outs[0].dtype) : in[0];
  HostTensor out = HostTensor::empty(outs[0]);
  AroundDim g(x.shape(), normalize_dim(a.get_int("dim"), x.rank()));
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t j = 0; j < g.inner; ++j) {
      // Subtracting the row max keeps exp() from overflowing; a row of -inf gives
      // -inf - -inf = nan, as in PyTorch.
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < g.n; ++k) mx = std::max(mx, x.get(g.at(o, k, j)));
      double sum = 0;
      for (int64_t k = 0; k < g.n; ++k) sum += std::exp(x.get(g.at(o, k, j)) - mx);
      for (int64_t k = 0; k < g.n; ++k) {
        double shifted = x.get(g.at(o, k, j)) - mx;
        out.set(g.at(o, k, j), log ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    }
  return {out};
}

// ---- layer_norm

std::vector<HostTensor> layer_norm(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  const HostTensor* weight = in.size() > 1 ? &in[1] : nullptr;
  const HostTensor* bias = in.size() > 2 ? &in[2] : nullptr;
  int64_t row = numel(a.get_ints("normalized_shape"));  // the normalized dims are the last ones
  double eps = a.get_float("eps");
  HostTensor out = HostTensor::empty(outs[0]);
  for (int64_t base = 0; base < x.numel(); base += row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < row; ++i) mean += x.get(base + i);
    mean /= static_cast<double>(row);
    for (int64_t i = 0; i < row; ++i) var += (x.get(base + i) - mean) * (x.get(base + i) - mean);
    var /= static_cast<double>(row);  // biased, as PyTorch normalizes
    double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < row; ++i) {
      double y = (x.get(base + i) - mean) * rstd;
      if (weight) y *= weight->get(i);
      if (bias) y += bias->get(i);
      out.set(base + i, y);
    }
  }
  return {out};
}

// ---- embedding

std::vector<HostTensor> embedding(Ins in, const Attrs&, Outs outs) {
  const HostTensor &w = in[0], &idx = in[1];
  int64_t rows = w.shape()[0], dim = w.shape()[1];
  HostTensor out = HostTensor::empty(outs[0]);
  bool exact = !is_floating(w.dtype());
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t r = idx.get_int(i);
    if (r < 0 || r >= rows) fail("index {} is out of range for an embedding of {} rows (expected in [0, {}))", r, rows, rows);
    for (int64_t c = 0; c < dim; ++c) {
      if (exact) out.set_int(i * dim + c, w.get_int(r * dim + c));
      else out.set(i * dim + c, w.get(r * dim + c));
    }
  }
  return {out};
}

// ---- nll_loss / cross_entropy

// Per-row losses of scores [N,C] (or [C], one row) against class targets, then reduced.
// With `log_softmax` the scores are logits (cross_entropy), else log-probabilities (nll_loss).
// Label smoothing follows PyTorch: (1-eps)*nll + eps*(-sum_c logp_c)/C, with ignored rows 0,
// and "mean" divides both terms by the number of rows not ignored.
std::vector<HostTensor> class_loss(Ins in, const Attrs& a, Outs outs, bool log_softmax, double smoothing) {
  const HostTensor &x = in[0], &target = in[1];
  int64_t classes = x.shape().back(), rows = x.rank() == 2 ? x.shape()[0] : 1;
  int64_t ignore = a.get_int("ignore_index");
  const std::string& reduction = a.get_string("reduction");
  std::vector<double> loss(static_cast<size_t>(rows), 0.0);
  int64_t counted = 0;
  std::vector<double> logp(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = target.get_int(r);
    if (t == ignore) continue;
    if (t < 0 || t >= classes) fail("target {} is out of range for {} classes (expected in [0, {}))", t, classes, classes);
    ++counted;
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t c = 0; c < classes; ++c) logp[c] = x.get(r * classes + c), mx = std::max(mx, logp[c]);
    if (log_softmax) {
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(logp[c] - mx);
      for (int64_t c = 0; c < classes; ++c) logp[c] = logp[c] - mx - std::log(sum);
    }
    double nll = -logp[t], smooth = 0;
    if (smoothing > 0) {
      for (double v : logp) smooth -= v;
      smooth /= static_cast<double>(classes);
    }
    loss[r] = smoothing > 0 ? (1 - smoothing) * nll + smoothing * smooth : nll;
  }
  HostTensor out = HostTensor::empty(outs[0]);
  if (reduction == "none") {
    for (int64_t r = 0; r < rows; ++r) out.set(r, loss[r]);
    return {out};
  }
  double total = 0;
  for (double v : loss) total += v;
  // All rows ignored under "mean" is 0/0: nan, as in PyTorch.
  out.set(0, reduction == "sum" ? total : counted ? total / static_cast<double>(counted) : kNan);
  return {out};
}

// ---- dropout

// Counter-based: element i (logical row-major) is kept iff random_uniform(seed, i) >= p, so a
// mask is reproducible on any backend. As PyTorch computes input * mask / (1 - p), a dropped
// element is x * 0 (nan stays nan) and p = 1 gives x * 0.
std::vector<HostTensor> dropout(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  double p = a.get_float("p");
  if (!a.get_bool("train")) return {x.contiguous()};
  auto seed = static_cast<uint64_t>(a.get_int("seed"));
  double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
  HostTensor out = HostTensor::empty(outs[0]);
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool keep = random_uniform(seed, static_cast<uint64_t>(i)) >= p;
    out.set(i, x.get(i) * (keep ? scale : 0.0));
  }
  return {out};
}

// ---- activations (torch.nn.functional's formulas, in double)

// y[i] = f(x[i], attributes), rounded once into the result dtype.
template <class F>
ReferenceFn activation(F f) {
  return [f](Ins in, const Attrs& a, Outs outs) {
    HostTensor out = HostTensor::empty(outs[0]);
    for (int64_t i = 0; i < out.numel(); ++i) out.set(i, f(in[0].get(i), a));
    return std::vector<HostTensor>{out};
  };
}

// relu6(x + 3) / 6 as PyTorch writes it: min(max(x + 3, 0), 6), so a NaN stays NaN.
double relu6_plus3(double x) { return std::min(std::max(x + 3, 0.0), 6.0); }


double elu_of(double x, double alpha, double scale, double input_scale) {
  return x > 0 ? x * scale : std::expm1(x * input_scale) * alpha * scale;
}

double softplus_of(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

// ---- non-finite values

// isnan / isinf: bool results; integers are never either.
ReferenceFn finite_test(bool (*test)(double)) {
  return [test](Ins in, const Attrs&, Outs outs) {
    HostTensor out = HostTensor::empty(outs[0]);
    const bool fl = is_floating(in[0].dtype());
    for (int64_t i = 0; i < out.numel(); ++i) out.set_int(i, fl && test(in[0].get(i)) ? 1 : 0);
    return std::vector<HostTensor>{out};
  };
}

// nan -> `nan` (0), +inf -> `posinf`, -inf -> `neginf` (the dtype's largest and lowest finite
// values); integers are copied.
std::vector<HostTensor> nan_to_num(Ins in, const Attrs& a, Outs outs) {
  HostTensor out = HostTensor::empty(outs[0]);
  const DType dt = outs[0].dtype;
  if (!is_floating(dt)) {
    for (int64_t i = 0; i < out.numel(); ++i) out.set_int(i, in[0].get_int(i));
    return {out};
  }
  const double nan = a.opt_float("nan").value_or(0.0), big = max_finite(dt);
  const double posinf = a.opt_float("posinf").value_or(big), neginf = a.opt_float("neginf").value_or(-big);
  for (int64_t i = 0; i < out.numel(); ++i) {
    double v = in[0].get(i);
    out.set(i, std::isnan(v) ? nan : v == kInf ? posinf : v == -kInf ? neginf : v);
  }
  return {out};
}

// ~x of an integer (two's complement), not x of a bool.
std::vector<HostTensor> bitwise_not(Ins in, const Attrs&, Outs outs) {
  HostTensor out = HostTensor::empty(outs[0]);
  const bool boolean = in[0].dtype() == DType::Bool;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t v = in[0].get_int(i);
    out.set_int(i, boolean ? (v == 0 ? 1 : 0) : ~v);
  }
  return {out};
}

}  // namespace

void install_composites(const Setter& set) {
  set(Op::BitwiseNot, bitwise_not);
  set(Op::Isnan, finite_test([](double v) { return std::isnan(v); }));
  set(Op::Isinf, finite_test([](double v) { return std::isinf(v); }));
  set(Op::NanToNum, nan_to_num);
  set(Op::Hardsigmoid, activation([](double x, const Attrs&) { return relu6_plus3(x) / 6; }));
  set(Op::Hardswish, activation([](double x, const Attrs&) { return x * relu6_plus3(x) / 6; }));
  set(Op::LeakyRelu, activation([](double x, const Attrs& a) { return x > 0 ? x : x * a.get_float("negative_slope"); }));
  set(Op::Elu, activation([](double x, const Attrs& a) {
        return elu_of(x, a.get_float("alpha"), a.get_float("scale"), a.get_float("input_scale"));
      }));
  set(Op::Selu, activation([](double x, const Attrs&) { return elu_of(x, kSeluAlpha, kSeluScale, 1.0); }));
  set(Op::Softplus, activation([](double x, const Attrs& a) { return softplus_of(x, a.get_float("beta"), a.get_float("threshold")); }));
  // PyTorch's mish: x * tanh(softplus(x)), softplus without a threshold.
  set(Op::Mish, activation([](double x, const Attrs&) { return x * std::tanh(std::log1p(std::exp(x))); }));
  set(Op::Tril, [](Ins in, const Attrs& a, Outs o) { return triangle(in, a, o, [](int64_t d) { return d <= 0; }); });
  set(Op::Triu, [](Ins in, const Attrs& a, Outs o) { return triangle(in, a, o, [](int64_t d) { return d >= 0; }); });
  set(Op::Softmax, [](Ins in, const Attrs& a, Outs o) { return softmax_kernel(in, a, o, false); });
  set(Op::LogSoftmax, [](Ins in, const Attrs& a, Outs o) { return softmax_kernel(in, a, o, true); });
  set(Op::LayerNorm, layer_norm);
  set(Op::Embedding, embedding);
  set(Op::CrossEntropy,
      [](Ins in, const Attrs& a, Outs o) { return class_loss(in, a, o, true, a.get_float("label_smoothing")); });
  set(Op::NllLoss, [](Ins in, const Attrs& a, Outs o) { return class_loss(in, a, o, false, 0.0); });
  set(Op::Dropout, dropout);
}

}  // namespace kiln::reference
