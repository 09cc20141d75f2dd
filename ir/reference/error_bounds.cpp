#include "ir/reference/error_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "ir/reference/interpreter.h"

namespace kiln {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Values of every float dtype but f64 are computed and summed in f32.
double compute_roundoff(DType t) { return t == DType::F64 ? 0x1p-53 : 0x1p-24; }
// Storing an f16/bf16 result: the reference rounds the exact value once, compiled code rounds
// its f32 value (or keeps it in f32, fused), so the two may sit an ulp apart, and a later
// cancellation makes that ulp large (te + g * a / b^2 in f16, found by kiln fuzz).
double narrow_ulp(DType t) {
  switch (t) {
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    default: return 0.0;
  }
}

// The absolute error of a computed value near zero: the dtype's smallest normal (compiled code
// may flush subnormals to zero), or f16's subnormal spacing.
double underflow(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-1022;
    case DType::F16: return 0x1p-24;
    default: return 0x1p-126;
  }
}

enum class Rule { Exact, Linear, Summation, Lipschitz, MatmulRule, AttentionRule, SortRule, Sign, Probe };

Rule rule_of(const Node& n) {
  switch (n.info().category) {
    case OpCategory::View:
    case OpCategory::Gather: return Rule::Linear;
    case OpCategory::Creation:
    case OpCategory::Placeholder: return Rule::Exact;
    case OpCategory::Matmul: return Rule::MatmulRule;
    case OpCategory::Attention: return Rule::AttentionRule;
    case OpCategory::Sort: return Rule::SortRule;
    default: break;
  }
  if (n.op() == Op::ScatterReduce || n.op() == Op::ScatterFold) {
    // A max or min is one of its arguments; sums and means are sums; a product is probed.
    const std::string& reduce = n.attrs().get_string("reduce");
    return reduce == "amax" || reduce == "amin" ? Rule::Linear : reduce == "prod" ? Rule::Probe : Rule::Summation;
  }
  switch (n.op()) {
    case Op::Amax: case Op::Amin: case Op::Where: case Op::Maximum: case Op::Minimum:
    case Op::MaskedFill: case Op::To: case Op::Scatter: return Rule::Linear;
    case Op::Sum: case Op::Mean: case Op::ScatterAdd: case Op::AvgPool: return Rule::Summation;
    case Op::MaxPool: return Rule::Linear;
    case Op::Convolution: return Rule::MatmulRule;
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Clamp: case Op::Sin: case Op::Cos:
    case Op::Tanh: case Op::Sigmoid: case Op::Erf: return Rule::Lipschitz;
    case Op::Sign: return Rule::Sign;
    default: return Rule::Probe;
  }
}

// The rounding an op adds, as a multiple of the compute dtype's unit roundoff.
double local_ulps(Op op) {
  switch (op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Sqrt: case Op::Rsqrt:
    case Op::Reciprocal: case Op::Square: case Op::Remainder: return 2;  // 1 ulp (remainder: fmod's exact result + b)
    // Exact: an integral value of the argument, or fmod's remainder (always representable). Their
    // jumps (floor(x) as x crosses an integer) are the probe's: a bound that crosses one grows.
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Clamp: case Op::Prod:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Trunc: case Op::Fmod: return 0;
    case Op::Erfinv: return 16;  // f32: Giles' approximation, a few ulps (codegen/prelude_math.cpp)
    // 6 ulps: exp's 2, 1 + e's half, CUDA's div.full.f32 of 1 by it 2 (kiln_inv_1p), silu's product's half.
    case Op::Sigmoid: case Op::Silu: return 12;
    default: return 8;  // 4 ulps: exp, log, pow, erf, tanh, sigmoid, gelu, silu, var, ...
  }
}

std::vector<double> doubles(const HostTensor& t) { return t.to_doubles(); }

// A float64 tensor of logical-order values, laid out like `like` (view kernels compute their
// results' strides from their argument's layout).
HostTensor laid_out_like(const HostTensor& like, const std::vector<double>& v) {
  HostTensor flat = HostTensor::from_doubles(DType::F64, like.shape(), v);
  return like.is_contiguous() ? flat : flat.laid_out(like.strides(), DType::F64);
}
HostTensor widened(const HostTensor& t) {
  return is_floating(t.dtype()) ? laid_out_like(t, doubles(t)) : t;
}
HostTensor absolute(const HostTensor& t) {
  if (t.dtype() == DType::Bool) return t;
  if (!is_floating(t.dtype())) {
    // Integers keep their dtype (the op's kernel takes them as they are), made non-negative:
    // a sum(ints, dtype=f32) of negative values gave a negative rounding bound (kiln fuzz,
    // seed 3302). The most negative value becomes the largest, 1 short of its magnitude.
    HostTensor out = t.clone();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const int64_t v = out.get_int(i);
      if (v >= 0) continue;
      out.set_int(i, v == INT64_MIN ? INT64_MAX : -v);
      if (out.get_int(i) < 0) out.set_int(i, -(v + 1));
    }
    return out;
  }
  std::vector<double> v = doubles(t);
  for (double& x : v) x = std::abs(x);
  return laid_out_like(t, v);
}

class Tracker {
 public:
  void after(const Node& n, std::span<const HostTensor> args, const std::vector<HostTensor>& results) {
    const Rule rule = rule_of(n);
    if (rule == Rule::Exact) return;
    std::vector<HostTensor> bounds_in;
    bool any_float_result = false, any_float_bound = false, any_unsure_integer = false;
    for (int r = 0; r < n.num_results(); ++r) any_float_result |= is_floating(results[r].dtype());
    for (size_t j = 0; j < args.size(); ++j) {
      auto it = bounds_.find({n.input(static_cast<int>(j)).node, n.input(static_cast<int>(j)).index});
      bounds_in.push_back(it != bounds_.end() ? it->second : HostTensor());
      if (bounds_in.back().defined()) (is_floating(args[j].dtype()) ? any_float_bound : any_unsure_integer) = true;
    }
    std::vector<std::vector<double>> e;
    if (any_float_result) e = propagate(n, rule, args, results, bounds_in, any_float_bound);
    for (int r = 0; r < n.num_results(); ++r) {
      std::vector<double> b;
      if (is_floating(results[r].dtype())) {
        if (e[r].empty()) e[r].assign(static_cast<size_t>(results[r].numel()), 0.0);
        b = std::move(e[r]);
        // Views and selections add no rounding of their own: only their inputs' bounds.
        const bool rounds = rule != Rule::Linear && rule != Rule::SortRule;
        // A cast to a narrower float rounds: values within their bounds may land an ulp apart
        // (cos(log_softmax(f16)), whose f32 result is cast to f16: kiln fuzz, seed 3504).
        const bool narrows = n.op() == Op::To && is_floating(args[0].dtype()) && args[0].dtype() != results[r].dtype();
        const bool rounds_result = rounds || narrows;
        const std::vector<double> y = rounds_result ? doubles(results[r]) : std::vector<double>(b.size(), 0.0);
        const double local = local_ulps(n.op()) * compute_roundoff(results[r].dtype());
        const double store = rounds_result ? narrow_ulp(results[r].dtype()) : 0.0;
        const double tiny = rounds_result ? underflow(results[r].dtype()) : 0.0;
        // gelu as PyTorch computes it, x * (1 + erf(x / sqrt 2)) / 2, loses everything in
        // 1 + erf in the far negative tail (0 where the exact value is -6e-9 at x = -6): its
        // error is up to |x| * u absolute (found by kiln fuzz through sign(gelu(x))).
        std::vector<double> x;
        if ((n.op() == Op::Gelu || n.op() == Op::Silu) && args[0].numel() == static_cast<int64_t>(b.size())) x = doubles(args[0]);
        // A variance is computed around a computed mean, off by up to ~count * u * max|x|; its
        // square stays in the result however the deviations cancel: 52 copies of 0.001f have a
        // variance of 1e-21 in f32 where the exact one is 0 (found by kiln fuzz through sign(var)).
        double mean_error_squared = 0;
        if (n.op() == Op::Var && args[0].numel() > 0) {
          double count = static_cast<double>(args[0].numel()) / static_cast<double>(std::max<size_t>(b.size(), 1));
          double largest = 0;
          for (double v : doubles(args[0])) largest = std::max(largest, std::abs(v));
          const double mean_error = count * compute_roundoff(results[r].dtype()) * largest;
          mean_error_squared = 2 * mean_error * mean_error;  // 2: the correction's n / (n - 1)
        }
        for (size_t i = 0; i < b.size(); ++i) {
          if (rounds && rule != Rule::Summation) b[i] += local * std::abs(y[i]);
          b[i] += store * std::abs(y[i]) + tiny + mean_error_squared;
          if (!x.empty() && n.op() == Op::Gelu) b[i] += 2 * compute_roundoff(results[r].dtype()) * std::abs(x[i]);
          // silu as PyTorch computes it, x / (1 + exp(-x)), is -0 once exp(-x) overflows the
          // compute type (x below -88.7 in f32), where the exact value is as large as -2.4e-37 at
          // x = -88.8 (found by kiln fuzz through silu(x) / silu(x)): the whole value may be lost.
          if (!x.empty() && n.op() == Op::Silu && x[i] < (results[r].dtype() == DType::F64 ? -700.0 : -80.0)) b[i] += std::abs(y[i]);
          if (std::isnan(b[i])) b[i] = kInf;
        }
        if (any_unsure_integer) b = unsure_selection(n, args, bounds_in, results[r], b);
      } else {
        b = integer_doubt(n, r, args, bounds_in, results[r], any_float_bound, any_unsure_integer);
      }
      if (std::any_of(b.begin(), b.end(), [](double x) { return x != 0; }))
        bounds_[{&n, r}] = laid_out_like(results[r], b);
    }
  }

  HostTensor bound_of(Value v) const {
    auto it = bounds_.find({v.node, v.index});
    return it != bounds_.end() ? it->second : HostTensor();
  }

 private:
  std::vector<HostTensor> run(const Node& n, const std::vector<HostTensor>& args, const Attrs& attrs) const {
    std::vector<TensorMeta> metas;
    for (int r = 0; r < n.num_results(); ++r) {
      TensorMeta m = n.meta(r);
      if (is_floating(m.dtype)) m.dtype = DType::F64;
      metas.push_back(m);
    }
    return n.info().reference(args, attrs, metas);
  }
  // A min's bound is the larger of its arguments' bounds: the max kernel applied to them.
  std::vector<HostTensor> run_on_bounds(const Node& n, const std::vector<HostTensor>& bounds, const Attrs& attrs) const {
    if (n.op() != Op::Minimum && n.op() != Op::Amin) return run(n, bounds, attrs);
    std::vector<TensorMeta> metas{n.meta(0)};
    metas[0].dtype = DType::F64;
    return op_info(n.op() == Op::Minimum ? Op::Maximum : Op::Amax).reference(bounds, attrs, metas);
  }
  // The arguments with every float one replaced: by its bound (zeros where it has none), its
  // absolute value, or widened as it is.
  enum class Arg { Bound, Absolute, Value };
  // Integer arguments pass unchanged (indices, masks), unless `int_values` says they are values
  // summed or multiplied (sum(ints, dtype=f32), an integer matmul): then Absolute takes their
  // magnitudes too (kiln fuzz, seed 3302: sum(sub(ints), dtype=f32) gave a negative bound).
  std::vector<HostTensor> with(std::span<const HostTensor> args, const std::vector<HostTensor>& bounds,
                               std::vector<Arg> how, bool int_values = false) const {
    std::vector<HostTensor> out;
    for (size_t j = 0; j < args.size(); ++j) {
      const HostTensor& a = args[j];
      if (!is_floating(a.dtype())) {
        out.push_back(int_values && how[std::min(j, how.size() - 1)] == Arg::Absolute ? absolute(a) : a);
        continue;
      }
      switch (how[std::min(j, how.size() - 1)]) {
        case Arg::Bound:
          out.push_back(bounds[j].defined() ? bounds[j] : laid_out_like(a, std::vector<double>(a.numel(), 0.0)));
          break;
        case Arg::Absolute: out.push_back(absolute(a)); break;
        case Arg::Value: out.push_back(widened(a)); break;
      }
    }
    return out;
  }

  // A float result computed with an integer or bool argument that may differ in compiled code
  // (a comparison of near-equal values, an argmax of near ties): where(cond, a, b) may take the
  // other side where cond is unsure; any other op (a gather at an unsure index) is unsure all
  // over. Unsure elements get an infinite bound: they are not judged.
  std::vector<double> unsure_selection(const Node& n, std::span<const HostTensor> args,
                                       const std::vector<HostTensor>& bounds_in, const HostTensor& result,
                                       std::vector<double> b) const {
    if (n.op() == Op::Where && bounds_in[0].defined()) {
      std::vector<double> c = doubles(bounds_in[0]);
      std::vector<int64_t> unsure(c.size());
      for (size_t i = 0; i < c.size(); ++i) unsure[i] = c[i] != 0;
      HostTensor mask = HostTensor::from_ints(DType::Bool, args[0].shape(), unsure);
      std::vector<HostTensor> w{mask, HostTensor::scalar(DType::F64, kInf), laid_out_like(result, b)};
      return doubles(run(n, w, n.attrs()).front());
    }
    return std::vector<double>(b.size(), kInf);
  }

  // Which elements of an integer or bool result may differ in compiled code (infinite there,
  // 0 elsewhere). From float arguments: the op run again with them moved by their bounds, up
  // and down, each element weighted by its position so that near ties resolve both ways (an
  // argmax's later candidate wins going up, the earlier going down); where either run differs,
  // the element is unsure. From unsure integer arguments: views move the doubt along; any
  // other op is unsure all over.
  std::vector<double> integer_doubt(const Node& n, int r, std::span<const HostTensor> args,
                                    const std::vector<HostTensor>& bounds_in, const HostTensor& result,
                                    bool any_float_bound, bool any_unsure_integer) const {
    std::vector<double> d(static_cast<size_t>(result.numel()), 0.0);
    if (any_unsure_integer) {
      if (n.info().category != OpCategory::View) return std::vector<double>(d.size(), kInf);
      std::vector<HostTensor> doubt;
      for (size_t j = 0; j < args.size(); ++j)
        doubt.push_back(bounds_in[j].defined() ? bounds_in[j] : laid_out_like(args[j], std::vector<double>(args[j].numel(), 0.0)));
      std::vector<TensorMeta> metas;
      for (int k = 0; k < n.num_results(); ++k) metas.push_back(TensorMeta(DType::F64, n.meta(k).shape, n.meta(k).strides));
      d = doubles(n.info().reference(doubt, n.attrs(), metas)[static_cast<size_t>(r)]);
    }
    if (!any_float_bound) return d;
    const std::vector<HostTensor> base = with(args, bounds_in, {Arg::Value});
    const std::vector<int64_t> want = run(n, base, n.attrs())[static_cast<size_t>(r)].to_ints();
    // Up, down, and to 0 where the interval holds it: a cast to bool (x != 0) of a value the
    // compiled code may compute as exactly 0 (gelu's far negative tail, 1 + erf cancelling: kiln
    // fuzz, seed 5111015974) is the same at both ends of the interval.
    for (double dir : {1.0, -1.0, 0.0}) {
      std::vector<HostTensor> moved = base;
      double side = dir;  // the first float argument goes one way, the others the other way
      for (size_t j = 0; j < args.size(); ++j) {
        if (!is_floating(args[j].dtype())) continue;
        if (bounds_in[j].defined()) {
          std::vector<double> x = doubles(base[j]), e = doubles(bounds_in[j]);
          const double count = static_cast<double>(x.size());
          for (size_t i = 0; i < x.size(); ++i)
            x[i] = dir == 0 ? (std::abs(x[i]) <= e[i] ? 0.0 : x[i]) : x[i] + side * e[i] * (static_cast<double>(i) + 1) / count;
          moved[j] = laid_out_like(args[j], x);
        }
        side = -dir;
      }
      const std::vector<int64_t> got = run(n, moved, n.attrs())[static_cast<size_t>(r)].to_ints();
      for (size_t i = 0; i < d.size() && i < got.size(); ++i)
        if (got[i] != want[i]) d[i] = kInf;
    }
    return d;
  }

  // Where a / b, its arguments moved anywhere within their bounds, crosses an integer (floor's for
  // remainder, trunc's for fmod): the element's bound is infinite.
  static void mark_quotient_jumps(const Node& n, const std::vector<HostTensor>& base, const std::vector<HostTensor>& bounds_in,
                                  std::vector<double>& e) {
    TensorMeta meta = n.meta(0);
    meta.dtype = DType::F64;
    const std::vector<TensorMeta> metas{meta};
    std::vector<double> lo(e.size(), kInf), hi(e.size(), -kInf);
    for (double sa : {-1.0, 1.0})
      for (double sb : {-1.0, 1.0}) {
        std::vector<HostTensor> corner(base.begin(), base.begin() + 2);
        for (size_t j = 0; j < 2; ++j) {
          if (!bounds_in[j].defined()) continue;
          std::vector<double> x = doubles(base[j]);
          const std::vector<double> b = doubles(bounds_in[j]);
          for (size_t i = 0; i < x.size(); ++i) x[i] += (j == 0 ? sa : sb) * b[i];
          corner[j] = laid_out_like(base[j], x);
        }
        const std::vector<double> q = doubles(op_info(Op::Div).reference(corner, Attrs{}, metas)[0]);
        for (size_t i = 0; i < q.size() && i < e.size(); ++i) {
          lo[i] = std::min(lo[i], q[i]);
          hi[i] = std::max(hi[i], q[i]);
        }
      }
    const bool floor = n.op() == Op::Remainder;
    for (size_t i = 0; i < e.size(); ++i)
      if (!(floor ? std::floor(lo[i]) == std::floor(hi[i]) : std::trunc(lo[i]) == std::trunc(hi[i]))) e[i] = kInf;
  }

  // The backward kernels' own rounding: on tensor cores P and dS reach their matmuls in the
  // inputs' 16-bit dtype, and every sum runs in f32 (f64) over L, S and E terms; so each
  // gradient moves by (u16 + u * sqrt(L + S + E)) times the sum of its terms' magnitudes:
  // dV_jd by sum_i P_ij |dO_id|, dQ_ie by scale * sum_j |dS_ij| |k_je|, dK_je by
  // scale * sum_i |dS_ij| |q_ie|, with P and dS recomputed here as the reference does.
  static void add_attention_backward_rounding(const Node& n, std::span<const HostTensor> args, std::vector<std::vector<double>>& e) {
    const HostTensor &dout = args[0], &q = args[1], &k = args[2], &v = args[3], &lse = args[4], &delta = args[5];
    const int64_t rank = q.rank(), L = q.shape()[rank - 2], E = q.shape().back(), S = k.shape()[rank - 2], Ev = v.shape().back();
    const int64_t B = L > 0 && E > 0 ? q.numel() / (L * E) : 0;
    if (B == 0 || S == 0) return;
    const double scale = n.attrs().get_float("scale");
    const bool causal = n.attrs().get_bool("is_causal");
    const DType dt = q.dtype();
    const double u = narrow_ulp(dt) + compute_roundoff(dt) * std::sqrt(static_cast<double>(L + S + E));
    const std::vector<double> gd = doubles(dout), qd = doubles(q), kd = doubles(k), vd = doubles(v), ld = doubles(lse), dd = doubles(delta);
    auto at = [](const std::vector<double>& x, int64_t i) { return x[static_cast<size_t>(i)]; };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < L; ++i) {
        const double l = at(ld, b * L + i);
        if (l == -kInf) continue;
        for (int64_t j = 0; j < S && !(causal && j > i); ++j) {
          double s = 0, dp = 0;
          for (int64_t c = 0; c < E; ++c) s += at(qd, (b * L + i) * E + c) * at(kd, (b * S + j) * E + c);
          for (int64_t c = 0; c < Ev; ++c) dp += at(gd, (b * L + i) * Ev + c) * at(vd, (b * S + j) * Ev + c);
          const double p = std::exp(s * scale - l), ds = p * std::abs(dp - at(dd, b * L + i)) * scale;
          for (int64_t c = 0; c < E; ++c) {
            e[0][static_cast<size_t>((b * L + i) * E + c)] += u * ds * std::abs(at(kd, (b * S + j) * E + c));
            e[1][static_cast<size_t>((b * S + j) * E + c)] += u * ds * std::abs(at(qd, (b * L + i) * E + c));
          }
          for (int64_t c = 0; c < Ev; ++c) e[2][static_cast<size_t>((b * S + j) * Ev + c)] += u * p * std::abs(at(gd, (b * L + i) * Ev + c));
        }
      }
  }

  std::vector<std::vector<double>> propagate(const Node& n, Rule rule, std::span<const HostTensor> args,
                                             const std::vector<HostTensor>& results,
                                             const std::vector<HostTensor>& bounds_in, bool any_bound) const {
    const size_t nres = results.size();
    std::vector<std::vector<double>> e(nres);
    auto zeros = [&](size_t r) { return std::vector<double>(static_cast<size_t>(results[r].numel()), 0.0); };
    switch (rule) {
      case Rule::Exact: break;
      case Rule::Linear: {
        if (!any_bound) break;
        Attrs attrs = n.attrs();
        if (n.op() == Op::MaskedFill) attrs.set("value", 0.0);  // filled elements are exact
        std::vector<HostTensor> out = run_on_bounds(n, with(args, bounds_in, {Arg::Bound}), attrs);
        for (size_t r = 0; r < nres; ++r) e[r] = doubles(out[r]);
        break;
      }
      case Rule::Summation: {
        // sum(E) + u * sqrt(n) * sum|x| (a scatter's index is not made absolute, and its terms are src's)
        const bool scatters = n.op() == Op::ScatterAdd || n.op() == Op::ScatterReduce;
        std::vector<double> b = any_bound ? doubles(run(n, with(args, bounds_in, {Arg::Bound}), n.attrs())[0]) : zeros(0);
        std::vector<double> magnitude =
            doubles(run(n, with(args, bounds_in, {Arg::Absolute}, !scatters), n.attrs())[0]);
        const HostTensor& summed = scatters ? args[2] : args[0];
        const double terms = static_cast<double>(summed.numel()) / static_cast<double>(std::max<int64_t>(results[0].numel(), 1)) + 1;
        const double gamma = compute_roundoff(results[0].dtype()) * std::sqrt(terms);
        for (size_t i = 0; i < b.size(); ++i)
          b[i] += gamma * magnitude[i];
        e[0] = b;
        break;
      }
      case Rule::MatmulRule: {
        // |A| E_B + E_A |B| + u * sqrt(K) * |A||B|
        std::vector<double> magnitude = doubles(run(n, with(args, bounds_in, {Arg::Absolute}, true), n.attrs())[0]);
        std::vector<double> b = zeros(0);
        if (any_bound) {
          std::vector<double> ab = doubles(run(n, with(args, bounds_in, {Arg::Absolute, Arg::Bound}), n.attrs())[0]);
          std::vector<double> ea = doubles(run(n, with(args, bounds_in, {Arg::Bound, Arg::Absolute}), n.attrs())[0]);
          for (size_t i = 0; i < b.size(); ++i) b[i] = ab[i] + ea[i];
        }
        // terms a result sums: a matmul's inner dim; a convolution's channels of a group times
        // its kernel (its weight's elements over the first dim)
        const double k = n.op() == Op::Convolution ? static_cast<double>(args[1].numel()) / static_cast<double>(std::max<int64_t>(args[1].shape()[0], 1))
                         : args[0].shape().empty() ? 1.0 : static_cast<double>(args[0].shape().back());
        const double gamma = compute_roundoff(results[0].dtype()) * std::sqrt(k);
        for (size_t i = 0; i < b.size(); ++i) b[i] += gamma * magnitude[i];
        e[0] = b;
        break;
      }
      case Rule::AttentionRule: {
        if (n.op() == Op::FlashAttentionBackward) {
          e = propagate(n, Rule::Probe, args, results, bounds_in, any_bound);
          add_attention_backward_rounding(n, args, e);
          break;
        }
        // The inputs' errors as Probe finds them, then the kernels' own rounding of the output:
        // the weights reach the matmul with v rounded to the inputs' 16-bit dtype on tensor
        // cores (FlashAttention's P), and every sum runs over S keys and E features in f32 (f64):
        // (u16 + u * sqrt(S + E)) * sum_j p_ij |v_jd|, the output computed with |v|.
        e = propagate(n, Rule::Probe, args, results, bounds_in, any_bound);
        const DType dt = args[0].dtype();
        const double S = static_cast<double>(args[1].shape()[args[1].rank() - 2]), E = static_cast<double>(args[0].shape().back());
        const double u = narrow_ulp(dt) + compute_roundoff(dt) * std::sqrt(S + E);
        std::vector<double> magnitude = doubles(run(n, with(args, bounds_in, {Arg::Value, Arg::Value, Arg::Absolute}), n.attrs())[0]);
        for (size_t i = 0; i < magnitude.size() && i < e[0].size(); ++i) e[0][i] += u * magnitude[i];
        break;
      }
      case Rule::SortRule: {
        // Sorting moves no value by more than the largest bound of its row (|sort(x) - sort(y)|
        // <= max |x - y|): each of the row's results gets that. The indices' doubt is
        // integer_doubt's (values moved within their bounds that reorder the row).
        e[0] = zeros(0);
        if (!bounds_in[0].defined()) break;
        const std::vector<double> in = doubles(bounds_in[0]);
        const Shape& shape = args[0].shape();
        const int64_t rank = args[0].rank();
        const size_t dim = static_cast<size_t>(normalize_dim(n.attrs().get_int("dim"), std::max<int64_t>(rank, 1)));
        const int64_t len = rank == 0 ? 1 : shape[dim], kept = rank == 0 ? 1 : results[0].shape()[dim];
        int64_t inner = 1;
        for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
        const int64_t outer = len == 0 || inner == 0 ? 0 : args[0].numel() / (len * inner);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            double most = 0;
            for (int64_t j = 0; j < len; ++j) most = std::max(most, in[static_cast<size_t>((o * len + j) * inner + i)]);
            for (int64_t j = 0; j < kept; ++j) e[0][static_cast<size_t>((o * kept + j) * inner + i)] = most;
          }
        break;
      }
      case Rule::Lipschitz: {
        // One float argument of the result's shape; slope <= 1 (sigmoid 1/4, erf 2/sqrt(pi)),
        // and the result's range caps the bound.
        e[0] = zeros(0);
        if (!bounds_in[0].defined()) break;
        const double slope = n.op() == Op::Sigmoid ? 0.25 : n.op() == Op::Erf ? 1.1284 : 1.0;
        const double range = n.op() == Op::Sigmoid ? 1.0
                             : (n.op() == Op::Sin || n.op() == Op::Cos || n.op() == Op::Tanh || n.op() == Op::Erf) ? 2.0
                                                                                                                   : kInf;
        std::vector<double> in = doubles(bounds_in[0]);
        if (in.size() != e[0].size()) return propagate(n, Rule::Probe, args, results, bounds_in, any_bound);
        for (size_t i = 0; i < in.size(); ++i) e[0][i] = std::min(slope * in[i], range);
        break;
      }
      case Rule::Sign: {
        // Exact unless the argument may cross zero.
        e[0] = zeros(0);
        if (!bounds_in[0].defined()) break;
        std::vector<double> x = doubles(args[0]), b = doubles(bounds_in[0]);
        if (x.size() != e[0].size()) break;
        for (size_t i = 0; i < x.size(); ++i) e[0][i] = b[i] > 0 && std::abs(x[i]) <= b[i] ? 2.0 : 0.0;
        break;
      }
      case Rule::Probe: {
        // Each float argument with a bound moved by +-E (var: by +-E with alternating signs, as
        // a shift of all elements leaves it unchanged; prod: |x| + E, as it is monotone there).
        for (size_t r = 0; r < nres; ++r) e[r] = zeros(r);
        if (!any_bound) break;
        std::vector<HostTensor> base = with(args, bounds_in, {Arg::Value});
        if (n.op() == Op::Prod) base = with(args, bounds_in, {Arg::Absolute});
        const std::vector<HostTensor> f0 = run(n, base, n.attrs());
        for (size_t j = 0; j < args.size(); ++j) {
          if (!bounds_in[j].defined()) continue;
          const std::vector<double> x = doubles(base[j]), b = doubles(bounds_in[j]);
          // Up, down, and to 0 where the interval holds it: a division by a value that may be 0
          // may be inf or NaN (gelu(x) / gelu(x) in gelu's tail, found by kiln fuzz).
          for (double dir : {1.0, -1.0, 0.0}) {
            if (n.op() == Op::Prod && dir < 0) continue;
            std::vector<double> moved(x.size());
            for (size_t i = 0; i < x.size(); ++i)
              moved[i] = dir == 0 ? (std::abs(x[i]) <= b[i] ? 0.0 : x[i])
                                  : x[i] + dir * b[i] * (n.op() == Op::Var && (i & 1) ? -1.0 : 1.0);
            std::vector<HostTensor> probe = base;
            probe[j] = laid_out_like(args[j], moved);
            const std::vector<HostTensor> f = run(n, probe, n.attrs());
            for (size_t r = 0; r < nres; ++r) {
              if (!is_floating(results[r].dtype())) continue;
              const std::vector<double> a = doubles(f0[r]), c = doubles(f[r]);
              for (size_t i = 0; i < a.size(); ++i) {
                const double d = std::isfinite(a[i]) && !std::isfinite(c[i]) ? kInf : std::abs(c[i] - a[i]);
                if (dir == 0 && d == 0) continue;
                if (!std::isnan(d)) e[r][i] += d;
              }
            }
          }
        }
        // Each argument moved alone misses what the arguments' errors do together: mul(s, s)
        // at s = 0 with s unsure moves by E * E, not at all when one moves (sign(var) squared,
        // found by kiln fuzz). So a product adds E_a * E_b.
        if (n.op() == Op::Mul && bounds_in.size() == 2 && bounds_in[0].defined() && bounds_in[1].defined()) {
          const std::vector<double> cross = doubles(run(n, with(args, bounds_in, {Arg::Bound}), n.attrs())[0]);
          for (size_t i = 0; i < cross.size() && i < e[0].size(); ++i) e[0][i] += cross[i];
        }
        // remainder and fmod are sawtooths: where a / b over the arguments' intervals holds an
        // integer, the result jumps by |b| in between, and the probe's two ends may both land near
        // the value while compiled code lands anywhere in the range (a / b = -908.3 with b off by
        // 3.6e-6 sweeps five periods: kiln fuzz, seed 7001850). Those elements are not judged.
        if ((n.op() == Op::Remainder || n.op() == Op::Fmod) && is_floating(results[0].dtype()))
          mark_quotient_jumps(n, base, bounds_in, e[0]);
        break;
      }
    }
    return e;
  }

  std::map<std::pair<const Node*, int>, HostTensor> bounds_;
};

}  // namespace

std::vector<HostTensor> error_bounds(const Graph& decomposed, const std::vector<HostTensor>& inputs) {
  auto tracker = std::make_shared<Tracker>();
  interpret(decomposed, inputs, [tracker](const Node& n, std::span<const HostTensor> args, std::vector<HostTensor>& results) {
    tracker->after(n, args, results);
  });
  std::vector<HostTensor> out;
  for (const Value& v : decomposed.outputs()) {
    HostTensor b = tracker->bound_of(v);
    out.push_back(b.defined() || !is_floating(v.meta().dtype)
                      ? b
                      : HostTensor::from_doubles(DType::F64, v.meta().shape, std::vector<double>(static_cast<size_t>(v.meta().numel()), 0.0)));
  }
  return out;
}

}  // namespace kiln
