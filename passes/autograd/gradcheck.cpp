#include "passes/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/error.h"
#include "ir/log.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"

namespace kiln::autograd {

namespace {

DType f64_if_floating(DType t) { return is_floating(t) ? DType::F64 : t; }

// "[1,0,2]": the multi-index of row-major element i, for messages.
std::string index_str(const Shape& shape, int64_t i) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return shape_str(idx);
}

// Random values in [-1.25, -0.25] u [0.25, 1.25]: tangents that are never zero.
HostTensor nonzero_random(const TensorMeta& meta, uint64_t seed) {
  HostTensor t = random_tensor(meta.contiguous(), seed).to(DType::F64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = t.get(i);
    t.set(i, u >= 0 ? u + 0.25 : u - 0.25);
  }
  return t;
}

// A random direction of unit length (fast mode).
HostTensor unit_direction(const TensorMeta& meta, uint64_t seed) {
  HostTensor u = nonzero_random(meta, seed);
  double norm = 0;
  for (int64_t i = 0; i < u.numel(); ++i) norm += u.get(i) * u.get(i);
  norm = std::sqrt(norm);
  for (int64_t i = 0; i < u.numel(); ++i) u.set(i, u.get(i) / norm);
  return u;
}

// sum_k <tangent_k, output_k> over the floating outputs: the scalar whose derivative along a
// direction is the projected Jacobian-vector product.
double projected(const Graph& g, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& tangents) {
  std::vector<HostTensor> outs = interpret(g, inputs);
  double s = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!tangents[k].defined()) continue;
    for (int64_t i = 0; i < outs[k].numel(); ++i) s += tangents[k].get(i) * outs[k].get(i);
  }
  return s;
}

class Checker {
 public:
  Checker(const GradcheckOptions& o, GradcheckResult& r) : o_(o), r_(r) {}
  // Compares one analytic value with its numeric estimate; records the first mismatch.
  void compare(GradcheckInputReport& rep, double analytic, double numeric, const std::string& where) {
    double err = std::abs(analytic - numeric);
    double tol = o_.atol + o_.rtol * std::abs(numeric);
    ++rep.checked;
    if (!(err <= tol)) {  // a NaN on either side fails too
      rep.ok = false;
      r_.ok = false;
      if (r_.failure.empty())
        r_.failure = fmt::format("input '%{}' {}: analytic {} vs numeric {} (|difference| {:.3g} > tolerance {:.3g})",
                                 rep.name, where, analytic, numeric, err, tol);
    }
    if (std::isnan(err)) err = INFINITY;
    rep.max_abs_error = std::max(rep.max_abs_error, err);
    rep.max_rel_error = std::max(rep.max_rel_error, err / std::max(std::abs(numeric), o_.atol));
  }

 private:
  const GradcheckOptions& o_;
  GradcheckResult& r_;
};

}  // namespace

Graph to_float64(const Graph& g) {
  Graph out(g.name());
  ValueMap map;
  for (Node* in : g.inputs()) {
    const TensorMeta& m = in->meta();
    map[in->result(0)] = out.add_input(in->name(), m.with_dtype(f64_if_floating(m.dtype)));
  }
  for (Node* n : g.nodes()) {
    Attrs attrs;
    for (const auto& [k, v] : n->attrs().all()) {
      if (auto* dt = std::get_if<DType>(&v)) attrs.set(k, f64_if_floating(*dt));
      else attrs.set(k, v);
    }
    copy_node(out, *n, map, "", &attrs);
  }
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(map.at(v));
  out.set_outputs(std::move(outs));
  return out;
}

GradcheckResult gradcheck(const Graph& forward, std::span<const HostTensor> inputs, const GradcheckOptions& options) {
  Graph g = to_float64(forward);
  if (inputs.size() != g.inputs().size())
    fail("gradcheck: graph '{}' has {} inputs, {} tensors given", g.name(), g.inputs().size(), inputs.size());
  std::vector<HostTensor> x;
  for (size_t i = 0; i < inputs.size(); ++i)
    x.push_back(is_floating(inputs[i].dtype()) ? inputs[i].to(DType::F64) : inputs[i]);

  JointGraph joint = build_joint(g, JointOptions{options.wrt});

  std::vector<HostTensor> tangents(g.outputs().size());  // undefined for integer outputs
  std::vector<HostTensor> joint_inputs = x;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    if (joint.tangent_for_output[k] < 0) continue;
    tangents[k] = nonzero_random(g.outputs()[k].meta(), options.seed * 1000003 + k + 1);
    joint_inputs.push_back(tangents[k]);
  }
  std::vector<HostTensor> joint_outs = interpret(joint.graph, joint_inputs);

  GradcheckResult result;
  Checker check(options, result);
  for (size_t j = 0; j < joint.wrt.size(); ++j) {
    const std::string& name = joint.wrt[j];
    size_t in = static_cast<size_t>(std::find_if(g.inputs().begin(), g.inputs().end(),
                                                 [&](Node* n) { return n->name() == name; }) -
                                    g.inputs().begin());
    const HostTensor& analytic = joint_outs[static_cast<size_t>(joint.num_forward_outputs) + j];
    GradcheckInputReport rep;
    rep.name = name;
    // f(x + eps*d) - f(x - eps*d), over 2 eps.
    auto numeric_along = [&](auto perturb) {
      std::vector<HostTensor> plus = x, minus = x;
      plus[in] = x[in].clone();
      minus[in] = x[in].clone();
      perturb(plus[in], options.eps);
      perturb(minus[in], -options.eps);
      return (projected(g, plus, tangents) - projected(g, minus, tangents)) / (2 * options.eps);
    };
    if (!options.fast) {
      for (int64_t e = 0; e < x[in].numel(); ++e) {
        double numeric = numeric_along([&](HostTensor& t, double step) { t.set(e, t.get(e) + step); });
        check.compare(rep, analytic.get(e), numeric, "element " + index_str(x[in].shape(), e));
      }
    } else {
      for (int d = 0; d < options.directions && x[in].numel() > 0; ++d) {
        HostTensor u = unit_direction(x[in].meta(), options.seed * 7919 + j * 131 + static_cast<uint64_t>(d) + 17);
        double numeric = numeric_along([&](HostTensor& t, double step) {
          for (int64_t e = 0; e < t.numel(); ++e) t.set(e, t.get(e) + step * u.get(e));
        });
        double dot = 0;
        for (int64_t e = 0; e < u.numel(); ++e) dot += analytic.get(e) * u.get(e);
        check.compare(rep, dot, numeric, fmt::format("random direction {}", d));
      }
    }
    result.inputs.push_back(rep);
  }
  // One line per check under KILN_LOGS=gradcheck: what a test run checked, countable.
  if (log_enabled("gradcheck")) {
    int64_t checked = 0;
    for (const auto& r : result.inputs) checked += r.checked;
    log_line("gradcheck", fmt::format("{} {}: {} inputs, {} {} checked", result.ok ? "ok" : "FAILED", forward.name(),
                                      result.inputs.size(), checked, options.fast ? "directions" : "elements"));
  }
  return result;
}

std::string format_gradcheck(const GradcheckResult& r) {
  std::string s = r.ok ? "gradcheck passed\n" : "gradcheck FAILED: " + r.failure + "\n";
  for (const auto& in : r.inputs)
    s += fmt::format("  %{}: {} checked, max abs error {:.3g}, max rel error {:.3g}{}\n", in.name, in.checked,
                     in.max_abs_error, in.max_rel_error, in.ok ? "" : "  MISMATCH");
  return s;
}

}  // namespace kiln::autograd
