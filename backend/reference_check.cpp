#include "backend/reference_check.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "backend/compile.h"
#include "ir/error.h"
#include "ir/reference/error_bounds.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/gradcheck.h"

namespace kiln::backend {

namespace {

// PyTorch's torch.testing.assert_close defaults, but for f32's rtol: 1e-5 (as backend::tolerance_of)
// instead of 1.3e-6. A compiled kernel sums in another order than the interpreter and keeps
// intermediates in registers; through a gradient's cancellations that differs by 10-20 ulps (a
// layer_norm's backward through a division: 1.7e-6 relative), which 1.3e-6 (about 11 ulps) counts
// as wrong.
Tolerance assert_close_tolerance(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1e-5};
    case DType::F64: return {1e-7, 1e-7};
    case DType::F16: return {1e-5, 1e-3};
    case DType::BF16: return {1e-5, 1.6e-2};
    default: return {0, 0};
  }
}

HostTensor widen(const HostTensor& t) {
  if (!is_floating(t.dtype()) || t.dtype() == DType::F64) return t;
  return HostTensor::from_doubles(DType::F64, t.shape(), t.to_doubles());
}

const HostTensor* at(const std::optional<std::vector<HostTensor>>& v, size_t k) {
  return v && k < v->size() && (*v)[k].defined() ? &(*v)[k] : nullptr;
}

// NaN, +inf, -inf or finite.
int kind_of(double x) { return std::isnan(x) ? 0 : std::isinf(x) ? (x > 0 ? 1 : 2) : 3; }

}  // namespace

ReferenceOutputs reference_outputs(const Graph& g, const std::vector<HostTensor>& inputs) {
  ReferenceOutputs r;
  r.want = interpret(g, inputs);
  try {
    // Decomposed, not optimized: what every config computes before its own optimizations, in
    // particular before constant folding computes a value exactly where unoptimized code
    // rounds (var of equal numbers: 0 folded, 1e-21 computed, and sign() of it 0 or 1).
    Graph d = g.clone();
    CompileOptions decompose_only;
    decompose_only.optimize = false;
    run_compile_passes(d, decompose_only);
    r.primitive = interpret(d, inputs);
    r.bound = error_bounds(d, inputs);
  } catch (const Error&) {
    // A decomposition the interpreter cannot run: no primitive allowance (the compile will say).
  }
  if (std::optional<Graph> g64 = widened_to_f64(g)) {
    std::vector<HostTensor> in64;
    for (const HostTensor& t : inputs) in64.push_back(widen(t));
    try {
      r.wide = interpret(*g64, in64);
    } catch (const Error&) {
      // The widened graph may fail where the narrow one did not (an index computed in floats,
      // say): the comparison then has no float64 allowance.
    }
  }
  return r;
}

std::optional<Graph> widened_to_f64(const Graph& g) {
  try {
    return autograd::to_float64(g);
  } catch (const Error&) {
    return std::nullopt;  // an op whose rule rejects the widened call
  }
}

std::optional<DType> tolerance_dtype(Value v) {
  std::optional<DType> best;
  std::set<const Node*> seen;
  std::vector<const Node*> stack{v.node};
  auto consider = [&](DType t) {
    if (!is_floating(t)) return;
    if (!best || assert_close_tolerance(t).rtol > assert_close_tolerance(*best).rtol) best = t;
  };
  consider(v.meta().dtype);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    for (int r = 0; r < n->num_results(); ++r) consider(n->meta(r).dtype);
    for (const Value& in : n->inputs()) stack.push_back(in.node);
  }
  return best;
}

OutputCheck check_output(const HostTensor& got, const HostTensor& want, const std::string& name, const HostTensor* wide,
                         const HostTensor* primitive, std::optional<DType> tolerance_of, const HostTensor* bound) {
  OutputCheck r;
  r.name = name;
  r.shape = want.shape();
  r.numel = want.numel();
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    r.kind = OutputCheck::Kind::TypeMismatch;
    r.type_detail = fmt::format("{} where the reference has {}", got.meta().str(), want.meta().str());
    return r;
  }
  if (primitive && primitive->shape() != want.shape()) primitive = nullptr;
  if (wide && wide->shape() != want.shape()) wide = nullptr;
  if (bound && bound->shape() != want.shape()) bound = nullptr;
  const bool fl = is_floating(want.dtype());
  const Tolerance tol = assert_close_tolerance(tolerance_of.value_or(want.dtype()));
  // The worst element so far: a NaN/infinity mismatch ranks above any value mismatch, then the
  // ratio of its difference to what it was allowed.
  bool worst_failed = false, worst_nan = false;
  double worst_ratio = -1;
  auto consider = [&](int64_t i, bool failed, bool nan, double ratio, double g, double w, double w64, double wp,
                      double allowed, double tolerance, double rounding, double conditioning) {
    const bool better = failed != worst_failed ? failed : nan != worst_nan ? nan : ratio > worst_ratio;
    if (r.worst >= 0 && !better) return;
    worst_failed = failed;
    worst_nan = nan;
    worst_ratio = ratio;
    r.worst = i;
    r.got = g, r.want = w, r.wide = w64, r.primitive = wp;
    r.allowed = allowed, r.tolerance = tolerance, r.rounding = rounding, r.conditioning = conditioning;
  };
  bool any_nan_mismatch = false;
  for (int64_t i = 0; i < r.numel; ++i) {
    const double g = got.get(i), w = want.get(i);
    const double w64 = wide ? wide->get(i) : w;
    const double wp = primitive ? primitive->get(i) : w;
    const double b = bound ? bound->get(i) : 0.0;
    const bool fragile = fl ? (kind_of(w) != kind_of(w64) || kind_of(w) != kind_of(wp) || !std::isfinite(b))
                            : (w != w64 || w != wp || b != 0);
    if (!fl) {
      if (g == w) continue;
      if (fragile) {
        ++r.not_judged;
        continue;
      }
      ++r.failed;
      consider(i, true, false, std::abs(g - w), g, w, w64, wp, 0, 0, 0, 0);
      continue;
    }
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
      if ((std::isnan(w) && std::isnan(g)) || g == w) continue;
      if (fragile) {
        ++r.not_judged;
        continue;
      }
      ++r.failed;
      any_nan_mismatch = true;
      consider(i, true, true, std::numeric_limits<double>::infinity(), g, w, w64, wp, 0, 0, 0, 0);
      continue;
    }
    const double d = std::abs(g - w);
    r.max_abs = std::max(r.max_abs, d);
    if (w != 0) r.max_rel = std::max(r.max_rel, d / std::abs(w));
    // Four times the spread: in a sum that cancels to about zero the compiled order's error is a
    // few times the reference's (a gradient of -3.8e-5 where float64 says 0 and the reference
    // 1.6e-5); a wrong kernel is off by far more.
    const double spread = std::max(std::abs(w - w64), std::isfinite(wp) ? std::abs(wp - w64) : 0.0);
    const double tolerance = tol.atol + tol.rtol * std::abs(w);
    const double allowed = tolerance + 4 * spread + b;
    const double ratio = allowed > 0 ? d / allowed : (d > 0 ? std::numeric_limits<double>::infinity() : 0);
    const bool failed = d > allowed;
    if (failed && fragile) {
      ++r.not_judged;
      continue;
    }
    if (failed) ++r.failed;
    consider(i, failed, false, ratio, g, w, w64, wp, allowed, tolerance, b, 4 * spread);
  }
  if (r.failed > 0) r.kind = any_nan_mismatch ? OutputCheck::Kind::NanMismatch : OutputCheck::Kind::Mismatch;
  return r;
}

std::string OutputCheck::worst_index() const {
  if (worst < 0) return "";
  std::vector<int64_t> index(shape.size());
  int64_t rest = worst;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t size = std::max<int64_t>(shape[d], 1);
    index[d] = rest % size;
    rest /= size;
  }
  return fmt::format("[{}]", fmt::join(index, ","));
}

std::string OutputCheck::str() const {
  if (kind == Kind::TypeMismatch) return "FAIL  " + type_detail;
  const std::string errors = fmt::format("max abs err {:.3g}, max rel err {:.3g}", max_abs, max_rel);
  const std::string unjudged =
      not_judged ? fmt::format("; {} ill-conditioned element{} not judged", not_judged, not_judged == 1 ? "" : "s") : "";
  if (kind == Kind::Pass) {
    if (worst < 0) return fmt::format("PASS  {}{}", errors, unjudged);
    return fmt::format("PASS  {}; every element within its bound (the closest: {}, |diff| {:.2g} of {:.2g} allowed = "
                       "tolerance {:.2g} + rounding bound {:.2g} + conditioning {:.2g}){}",
                       errors, worst_index(), std::abs(got - want), allowed, tolerance, rounding, conditioning, unjudged);
  }
  std::string head = fmt::format("FAIL  {} of {} element{} beyond {} bound", failed, numel, numel == 1 ? "" : "s",
                                 failed == 1 ? "its" : "their");
  std::string element;
  if (kind == Kind::NanMismatch || allowed == 0) {
    element = fmt::format("got {}, reference {}", got, want);
  } else {
    element = fmt::format("got {:.9g}, reference {:.9g} (float64 {:.9g}), |diff| {:.3g} > allowed {:.3g} (tolerance {:.2g} "
                          "+ rounding bound {:.2g} + conditioning {:.2g})",
                          got, want, wide, std::abs(got - want), allowed, tolerance, rounding, conditioning);
  }
  return fmt::format("{}; worst at {}: {}; {}{}", head, worst_index(), element, errors, unjudged);
}

std::vector<OutputCheck> check_outputs(const Graph& g, const std::vector<HostTensor>& got, const ReferenceOutputs& ref) {
  KILN_CHECK(got.size() == ref.want.size() && got.size() == g.outputs().size(),
             "check: {} compiled outputs, the reference has {}", got.size(), ref.want.size());
  std::vector<OutputCheck> out;
  for (size_t i = 0; i < got.size(); ++i)
    out.push_back(check_output(got[i], ref.want[i], "%" + g.outputs()[i].name(), at(ref.wide, i), at(ref.primitive, i),
                               tolerance_dtype(g.outputs()[i]), at(ref.bound, i)));
  return out;
}

std::vector<OutputCheck> check_against_reference(const Graph& g, const std::vector<HostTensor>& inputs,
                                                 const std::vector<HostTensor>& got) {
  return check_outputs(g, got, reference_outputs(g, inputs));
}

}  // namespace kiln::backend
