#include "tools/fuzz/differential.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "ir/error.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "tools/fuzz/error_bounds.h"

namespace kiln::fuzz {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Mismatch: return "value mismatch";
    case Verdict::NanMismatch: return "nan/inf mismatch";
    case Verdict::TypeMismatch: return "dtype/shape mismatch";
    case Verdict::CompileError: return "compile error";
    case Verdict::RunError: return "run error";
    case Verdict::InternalError: return "internal error";
  }
  return "?";
}

std::vector<CompileConfig> default_configs() {
  std::vector<CompileConfig> c(3);
  c[0].name = "fused";
  c[1].name = "unfused";
  c[1].options.fuse = false;
  c[2].name = "unoptimized";
  c[2].options.optimize = false;
  return c;
}

namespace {

// PyTorch's torch.testing.assert_close defaults, but for f32's rtol: 1e-5 (kiln's own, as in
// backend::tolerance_of) instead of 1.3e-6. A compiled kernel sums in another order than the
// interpreter and keeps intermediates in registers; through a gradient's cancellations that
// differs by 10-20 ulps (a layer_norm's backward through a division: 1.7e-6 relative), which
// 1.3e-6 (about 11 ulps) counts as wrong.
backend::Tolerance assert_close_tolerance(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1e-5};
    case DType::F64: return {1e-7, 1e-7};
    case DType::F16: return {1e-5, 1e-3};
    case DType::BF16: return {1e-5, 1.6e-2};
    default: return {0, 0};
  }
}

DType widened(DType t) { return is_floating(t) ? DType::F64 : t; }

HostTensor widen(const HostTensor& t) {
  if (!is_floating(t.dtype()) || t.dtype() == DType::F64) return t;
  return HostTensor::from_doubles(DType::F64, t.shape(), t.to_doubles());
}

}  // namespace

std::optional<Finding> compare_tensor(const HostTensor& got, const HostTensor& want, const HostTensor* wide,
                                      const std::string& what, const HostTensor* primitive,
                                      std::optional<DType> tolerance_of, const HostTensor* bound) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return Finding{Verdict::TypeMismatch, "",
                   fmt::format("{}: {} where the reference has {}", what, got.meta().str(), want.meta().str())};
  if (primitive && primitive->shape() != want.shape()) primitive = nullptr;
  const int64_t n = want.numel();
  const bool fl = is_floating(want.dtype());
  const backend::Tolerance tol = assert_close_tolerance(tolerance_of.value_or(want.dtype()));
  auto kind = [](double x) { return std::isnan(x) ? 0 : std::isinf(x) ? (x > 0 ? 1 : 2) : 3; };
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.get(i), w = want.get(i);
    const double w64 = wide ? wide->get(i) : w;
    const double wp = primitive ? primitive->get(i) : w;
    const double b = bound && bound->shape() == want.shape() ? bound->get(i) : 0.0;
    // The evaluations disagree on the kind of value (NaN, an infinity, an integer, a bool):
    // the element is ill-conditioned, and the compiler may land on either side.
    const bool fragile = fl ? (kind(w) != kind(w64) || kind(w) != kind(wp) || !std::isfinite(b)) : (w != w64 || w != wp || b != 0);
    if (!fl) {
      if (g != w && !fragile)
        return Finding{Verdict::Mismatch, "", fmt::format("{}[{}] = {} where the reference has {}", what, i, g, w)};
      continue;
    }
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || (g == w);
      if (!same && !fragile)
        return Finding{Verdict::NanMismatch, "", fmt::format("{}[{}] = {} where the reference has {}", what, i, g, w)};
      continue;
    }
    const double spread = std::max(std::abs(w - w64), std::isfinite(wp) ? std::abs(wp - w64) : 0.0);
    // Four times the spread: in a sum that cancels to about zero the compiled order's error is
    // a few times the reference's (a gradient of -3.8e-5 where float64 says 0 and the
    // reference 1.6e-5); a wrong kernel is off by far more.
    const double allowed = tol.atol + tol.rtol * std::abs(w) + 4 * spread + b;
    if (std::abs(g - w) > allowed && !fragile)
      return Finding{Verdict::Mismatch, "",
                     fmt::format("{}[{}] = {:.9g} where the reference has {:.9g} (float64: {:.9g}; primitives: {:.9g}; "
                                 "rounding bound: {:.3g}; allowed {:.3g})",
                                 what, i, g, w, w64, wp, b, allowed)};
  }
  return std::nullopt;
}

namespace {

// The references: the graph as it is (each op computed in double, rounded once to its dtype),
// widened to f64, decomposed (every primitive rounded to the narrow dtype, as compiled code
// computes), and the decomposed graph's running bound of a compiled kernel's rounding. The
// spread between them is the graph's own conditioning: a layer_norm feeding a division by
// values near zero differs in f32 primitives by far more than one rounding.
struct References {
  std::vector<HostTensor> want;
  std::optional<std::vector<HostTensor>> wide, primitive, bound;
  static const HostTensor* at(const std::optional<std::vector<HostTensor>>& v, size_t k) {
    return v && k < v->size() && (*v)[k].defined() ? &(*v)[k] : nullptr;
  }
};
References references(const Graph& g, const std::vector<HostTensor>& inputs) {
  References r;
  r.want = interpret(g, inputs);
  try {
    Graph d = g.clone();
    backend::run_compile_passes(d, backend::CompileOptions{});
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

// The float dtype with the loosest tolerance among a value and everything it is computed from:
// an f32 sum cast to f64 carries f32's rounding, and is judged by f32's tolerance.
std::optional<DType> narrowest_float_ancestor(Value v) {
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

// Compiles and runs `g` under one config and compares with the references.
std::optional<Finding> check_config(const Graph& g, const std::vector<HostTensor>& inputs, const References& ref,
                                    const CompileConfig& config, Device device) {
  const std::vector<HostTensor>& want = ref.want;
  backend::CompileOptions o = config.options;
  o.device = device;
  std::vector<HostTensor> got;
  try {
    backend::CompiledGraph c = backend::compile(g, o);
    try {
      got = c.run(inputs);
    } catch (const Error& e) {
      return Finding{Verdict::RunError, config.name, e.what()};
    }
  } catch (const Error& e) {
    std::string msg = e.what();
    return Finding{msg.find("internal") != std::string::npos ? Verdict::InternalError : Verdict::CompileError,
                   config.name, msg};
  } catch (const std::exception& e) {
    return Finding{Verdict::InternalError, config.name, e.what()};
  }
  if (got.size() != want.size())
    return Finding{Verdict::TypeMismatch, config.name, fmt::format("{} outputs, the reference has {}", got.size(), want.size())};
  for (size_t i = 0; i < got.size(); ++i) {
    if (auto f = compare_tensor(got[i], want[i], References::at(ref.wide, i), "%" + g.outputs()[i].name(),
                                References::at(ref.primitive, i), narrowest_float_ancestor(g.outputs()[i]),
                                References::at(ref.bound, i))) {
      f->config = config.name;
      return f;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Graph> widened_to_f64(const Graph& g) {
  Graph out(g.name() + "_f64");
  std::unordered_map<const Node*, Node*> map;
  try {
    for (const Node* n : g.inputs()) {
      const TensorMeta& m = n->meta();
      map[n] = out.add_input(n->name(), TensorMeta(widened(m.dtype), m.shape)).node;
    }
    for (const Node* n : g.nodes()) {
      Attrs attrs = n->attrs();
      if (auto dt = attrs.opt_dtype("dtype")) attrs.set("dtype", widened(*dt));
      std::vector<Value> in;
      for (const Value& v : n->inputs()) in.push_back(Value{map.at(v.node), v.index});
      map[n] = out.add_node(n->op(), in, attrs, n->name());
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(Value{map.at(v.node), v.index});
  out.set_outputs(outs);
  return out;
}

FuzzCase merge_cases(const std::vector<FuzzCase>& cases) {
  FuzzCase m;
  m.graph = Graph("fuzz_batch");
  std::vector<Value> outs;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Graph& g = cases[k].graph;
    std::unordered_map<const Node*, Node*> map;
    const std::string prefix = fmt::format("g{}_", k);
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Node* n = g.inputs()[i];
      map[n] = m.graph.add_input(prefix + n->name(), n->meta()).node;
      m.int_bounds.push_back(cases[k].int_bounds.at(i));
      m.input_seeds.push_back(cases[k].input_seeds.at(i));
    }
    for (const Node* n : g.nodes()) {
      if (n->is_input()) continue;
      std::vector<Value> in;
      for (const Value& v : n->inputs()) in.push_back(Value{map.at(v.node), v.index});
      map[n] = m.graph.add_node(n->op(), in, n->attrs(), prefix + n->name());
    }
    for (const Value& v : g.outputs()) outs.push_back(Value{map.at(v.node), v.index});
  }
  m.graph.set_outputs(outs);
  m.seed = cases.empty() ? 0 : cases.front().seed;
  return m;
}

CaseReport check_case(const FuzzCase& c, const CheckOptions& options) {
  CaseReport report;
  const Graph& g = c.graph;
  std::vector<HostTensor> inputs = c.inputs();
  References ref;
  try {
    ref = references(g, inputs);
  } catch (const Error&) {
    report.reference_failed = true;
    return report;
  }
  for (const CompileConfig& config : options.configs)
    if (auto f = check_config(g, inputs, ref, config, options.device))
      report.findings.push_back(*f);
  if (!options.joint || options.configs.empty()) return report;

  // The joint graph: gradients of every floating output with respect to every floating input.
  bool float_in = false, float_out = false;
  for (const Node* n : g.inputs()) float_in |= is_floating(n->meta().dtype);
  for (const Value& v : g.outputs()) float_out |= is_floating(v.meta().dtype);
  if (!float_in || !float_out) {
    report.joint_skipped = "no floating input or output";
    return report;
  }
  autograd::JointGraph joint;
  try {
    joint = autograd::build_joint(g);
  } catch (const Error& e) {
    report.joint_skipped = e.what();  // an op without a derivative rule (argmax feeding a float, say)
    return report;
  }
  std::vector<HostTensor> jin = inputs;
  for (int i = 0; i < joint.num_tangents; ++i)
    jin.push_back(random_tensor(joint.graph.inputs()[static_cast<size_t>(joint.num_primals + i)]->meta(),
                                c.seed * 31 + static_cast<uint64_t>(i) + 1));
  References jref;
  try {
    jref = references(joint.graph, jin);
  } catch (const Error&) {
    report.joint_skipped = "the reference rejected the joint graph";
    return report;
  }
  report.joint_checked = true;
  CompileConfig jc = options.configs.front();
  jc.name = "joint/" + jc.name;
  if (auto f = check_config(joint.graph, jin, jref, jc, options.device))
    report.findings.push_back(*f);
  return report;
}

}  // namespace kiln::fuzz
