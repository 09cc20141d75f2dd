// Reference kernels of reductions. The input is first converted to the result dtype (sum and
// prod with dtype=, as torch casts before reducing), then each output element folds its slice
// of the input in row-major order: floats accumulate in double, integers exactly in int64.
#include <cmath>
#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "ir/meta/meta.h"
#include "ir/reference/kernels.h"

namespace kiln::reference {

namespace {

using In = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

// Which output element each input element folds into, and its position within that output's
// slice (the row-major index over the reduced dims: argmax's answer).
struct Slices {
  std::vector<int64_t> out, pos;
  int64_t size = 1;  // elements per slice
};

Slices slices(const Shape& shape, const std::vector<bool>& reduced) {
  // Row-major strides of each input dim within the kept dims (0 if reduced) and within the
  // reduced dims (0 if kept); a running multi-index avoids re-dividing per element.
  size_t rank = shape.size();
  std::vector<int64_t> kstride(rank, 0), rstride(rank, 0), idx(rank, 0);
  int64_t ks = 1, rs = 1;
  for (size_t d = rank; d-- > 0;) {
    if (reduced[d]) rstride[d] = rs, rs *= shape[d];
    else kstride[d] = ks, ks *= shape[d];
  }
  Slices s;
  s.size = rs;
  int64_t n = numel(shape), out = 0, pos = 0;
  s.out.resize(n);
  s.pos.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    s.out[i] = out;
    s.pos[i] = pos;
    for (size_t d = rank; d-- > 0;) {  // advance the multi-index by one
      out += kstride[d], pos += rstride[d];
      if (++idx[d] < shape[d]) break;
      out -= kstride[d] * shape[d], pos -= rstride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return s;
}

// The reduced dims of a call: `dim` is an int list (sum, mean, ...) or a single int (prod, argmax).
std::vector<bool> reduced_of(const HostTensor& x, const Attrs& a) {
  std::optional<IntList> dims;
  if (const AttrValue* v = a.find("dim")) dims = std::holds_alternative<int64_t>(*v) ? IntList{std::get<int64_t>(*v)} : std::get<IntList>(*v);
  return meta::reduced_dims(x.meta(), dims);
}

// Folds every slice: `init` gives the starting accumulator, step(acc, x, j, pos) adds input
// element j, finish(out, o, acc) stores it. Acc is double or int64_t.
template <class Acc, class Step, class Finish>
std::vector<HostTensor> fold(const HostTensor& x, const Attrs& a, const TensorMeta& out_meta, Acc init, Step step,
                             Finish finish) {
  Slices s = slices(x.shape(), reduced_of(x, a));
  HostTensor out = HostTensor::empty(out_meta);
  std::vector<Acc> acc(out.numel(), init);
  for (int64_t j = 0; j < x.numel(); ++j) step(acc[s.out[j]], x, j, s.pos[j]);
  for (int64_t o = 0; o < out.numel(); ++o) finish(out, o, acc[o], s.size);
  return {out};
}

HostTensor as(const HostTensor& t, DType dt) { return t.dtype() == dt ? t : t.to(dt); }

// sum (mul=false) and prod (mul=true), computed in the result dtype.
ReferenceFn sum_or_prod(bool mul) {
  return [mul](In in, const Attrs& a, Outs outs) {
    HostTensor x = as(in[0], outs[0].dtype);
    if (is_floating(x.dtype()))
      return fold(x, a, outs[0], mul ? 1.0 : 0.0,
                  [mul](double& acc, const HostTensor& t, int64_t j, int64_t) { acc = mul ? acc * t.get(j) : acc + t.get(j); },
                  [](HostTensor& o, int64_t i, double acc, int64_t) { o.set(i, acc); });
    return fold(x, a, outs[0], int64_t(mul ? 1 : 0),
                [mul](int64_t& acc, const HostTensor& t, int64_t j, int64_t) {
                  auto u = static_cast<uint64_t>(acc), v = static_cast<uint64_t>(t.get_int(j));
                  acc = static_cast<int64_t>(mul ? u * v : u + v);  // wraps, as int64 does in torch
                },
                [](HostTensor& o, int64_t i, int64_t acc, int64_t) { o.set_int(i, acc); });
  };
}

std::vector<HostTensor> mean_kernel(In in, const Attrs& a, Outs outs) {
  HostTensor x = as(in[0], outs[0].dtype);
  return fold(x, a, outs[0], 0.0, [](double& acc, const HostTensor& t, int64_t j, int64_t) { acc += t.get(j); },
              [](HostTensor& o, int64_t i, double acc, int64_t n) { o.set(i, acc / static_cast<double>(n)); });  // 0/0 = nan
}

// amax/amin: NaN wins (it propagates); ints and bools compare exactly.
ReferenceFn extremum(bool is_max) {
  return [is_max](In in, const Attrs& a, Outs outs) {
    const HostTensor& x = in[0];
    auto better = [is_max](auto v, auto best) { return is_max ? v > best : v < best; };
    if (is_floating(x.dtype()))
      return fold(x, a, outs[0], std::numeric_limits<double>::quiet_NaN(),
                  [better](double& acc, const HostTensor& t, int64_t j, int64_t pos) {
                    double v = t.get(j);
                    if (pos == 0 || std::isnan(v) || (!std::isnan(acc) && better(v, acc))) acc = v;
                  },
                  [](HostTensor& o, int64_t i, double acc, int64_t) { o.set(i, acc); });
    return fold(x, a, outs[0], int64_t(0),
                [better](int64_t& acc, const HostTensor& t, int64_t j, int64_t pos) {
                  int64_t v = t.get_int(j);
                  if (pos == 0 || better(v, acc)) acc = v;
                },
                [](HostTensor& o, int64_t i, int64_t acc, int64_t) { o.set_int(i, acc); });
  };
}

// argmax: the first position of the maximum; a NaN counts as larger than everything.
std::vector<HostTensor> argmax_kernel(In in, const Attrs& a, Outs outs) {
  struct Best {
    double f = 0;   // the max so far, for floats
    int64_t i = 0;  // ...and for ints and bools, compared exactly
    int64_t pos = -1;
  };
  const HostTensor& x = in[0];
  bool fl = is_floating(x.dtype());
  return fold(x, a, outs[0], Best{},
              [fl](Best& b, const HostTensor& t, int64_t j, int64_t pos) {
                bool wins = b.pos < 0;
                if (fl) {
                  double v = t.get(j);
                  wins = wins || (std::isnan(v) && !std::isnan(b.f)) || (!std::isnan(b.f) && v > b.f);
                  if (wins) b = {v, 0, pos};
                } else {
                  int64_t v = t.get_int(j);
                  if (wins || v > b.i) b = {0, v, pos};
                }
              },
              [](HostTensor& o, int64_t i, const Best& b, int64_t) { o.set_int(i, b.pos); });
}

// var = sum((x - mean)^2) / max(0, N - correction), as torch's Welford projection: a zero
// divisor gives nan (all equal) or inf.
std::vector<HostTensor> var_kernel(In in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  double correction = a.get_float("correction");
  // Two passes in double: the slice totals (for the means), then the squared deviations.
  Slices s = slices(x.shape(), reduced_of(x, a));
  HostTensor out = HostTensor::empty(outs[0]);
  std::vector<double> total(out.numel(), 0.0), m2(out.numel(), 0.0);
  for (int64_t j = 0; j < x.numel(); ++j) total[s.out[j]] += x.get(j);
  for (int64_t j = 0; j < x.numel(); ++j) {
    double d = x.get(j) - total[s.out[j]] / static_cast<double>(s.size);
    m2[s.out[j]] += d * d;
  }
  double divisor = std::max(0.0, static_cast<double>(s.size) - correction);
  for (int64_t o = 0; o < out.numel(); ++o) out.set(o, m2[o] / divisor);
  return {out};
}

// logsumexp = m + log(sum(exp(x - m))), m the slice's max, or 0 where that max is +-inf (as
// PyTorch: a slice of -inf gives log(0) = -inf, one holding +inf gives +inf); NaN propagates;
// an empty slice is log(0) = -inf. (A composite: registered here for the slicing helpers.)
std::vector<HostTensor> logsumexp_kernel(In in, const Attrs& a, Outs outs) {
  const HostTensor& x = in[0];
  Slices s = slices(x.shape(), reduced_of(x, a));
  HostTensor out = HostTensor::empty(outs[0]);
  const auto n = static_cast<size_t>(out.numel());
  std::vector<double> m(n, -std::numeric_limits<double>::infinity()), total(n, 0.0);
  std::vector<bool> nan(n, false);
  for (int64_t j = 0; j < x.numel(); ++j) {
    double v = x.get(j);
    auto o = static_cast<size_t>(s.out[j]);
    if (std::isnan(v)) nan[o] = true;
    else m[o] = std::max(m[o], v);
  }
  for (double& v : m)
    if (std::isinf(v)) v = 0;
  for (int64_t j = 0; j < x.numel(); ++j) {
    auto o = static_cast<size_t>(s.out[j]);
    total[o] += std::exp(x.get(j) - m[o]);
  }
  for (size_t o = 0; o < n; ++o)
    out.set(static_cast<int64_t>(o), nan[o] ? std::numeric_limits<double>::quiet_NaN() : m[o] + std::log(total[o]));
  return {out};
}

}  // namespace

void install_reductions(const Setter& set) {
  set(Op::Logsumexp, logsumexp_kernel);
  set(Op::Sum, sum_or_prod(false));
  set(Op::Prod, sum_or_prod(true));
  set(Op::Mean, mean_kernel);
  set(Op::Amax, extremum(true));
  set(Op::Amin, extremum(false));
  set(Op::Argmax, argmax_kernel);
  set(Op::Var, var_kernel);
}

}  // namespace kiln::reference
