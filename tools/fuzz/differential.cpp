#include "tools/fuzz/differential.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "ir/error.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "backend/reference_check.h"

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
  // Recomputing from row statistics and folding row groups into column partials, whatever
  // the target's defaults (both targets' today): the rules are checked wherever kiln fuzz runs.
  c[2].options.fusion.recompute_from_statistics = true;
  c[2].options.fusion.column_partials_in_rows = true;
  // And every CUDA kernel under schedule knobs other than the defaults, one per mapping, as the
  // tuner may choose them (codegen/schedule_candidates.h): persistent grids, unrolled flat
  // loops. The CPU reads one of them: column sums of 64 kept points or more as a thread per
  // kept point (the GPU's form above 1024 an SM), so that both targets check that lowering.
  c[2].options.schedule_knobs =
      "pointwise_block 128, blocks_per_sm 16, pointwise_unroll 2, tile_blocks_per_sm 4, warp_rows_per_block 4, "
      "reduction_block 128, held_bytes_per_thread 64, chunk_held_bytes_per_thread 512, attention_rows_per_warp 16, "
      "attention_key_tile 32, column_thread_min_points 64";
  return c;
}

namespace {

// Compiles and runs `g` under one config and compares with the references.
std::optional<Finding> check_config(const Graph& g, const std::vector<HostTensor>& inputs, const backend::ReferenceOutputs& ref,
                                    const CompileConfig& config, Device device) {
  const std::vector<HostTensor>& want = ref.want;
  backend::CompileOptions o = config.options;
  o.origin = "kiln fuzz (" + config.name + ")";
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
  for (const backend::OutputCheck& c : backend::check_outputs(g, got, ref)) {
    if (c.ok()) continue;
    Verdict v = c.kind == backend::OutputCheck::Kind::TypeMismatch ? Verdict::TypeMismatch
                : c.kind == backend::OutputCheck::Kind::NanMismatch ? Verdict::NanMismatch
                                                                     : Verdict::Mismatch;
    return Finding{v, config.name, c.name + ": " + (v == Verdict::TypeMismatch ? c.type_detail : c.str())};
  }
  return std::nullopt;
}

}  // namespace

FuzzCase merge_cases(const std::vector<FuzzCase>& cases) {
  FuzzCase m;
  m.graph = Graph("fuzz_batch");
  std::vector<Value> outs;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Graph& g = cases[k].graph;
    ValueMap map;
    const std::string prefix = fmt::format("g{}_", k);
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Node* n = g.inputs()[i];
      map[n->result(0)] = m.graph.add_input(prefix + n->name(), n->meta());
      m.int_bounds.push_back(cases[k].int_bounds.at(i));
      m.input_seeds.push_back(cases[k].input_seeds.at(i));
    }
    for (const Node* n : g.nodes())
      if (!n->is_input()) copy_node(m.graph, *n, map, prefix + n->name());
    for (const Value& v : g.outputs()) outs.push_back(map.at(v));
  }
  m.graph.set_outputs(outs);
  m.seed = cases.empty() ? 0 : cases.front().seed;
  return m;
}

CaseReport check_case(const FuzzCase& c, const CheckOptions& options) {
  CaseReport report;
  const Graph& g = c.graph;
  std::vector<HostTensor> inputs = c.inputs();
  backend::ReferenceOutputs ref;
  try {
    ref = backend::reference_outputs(g, inputs);
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
  backend::ReferenceOutputs jref;
  try {
    jref = backend::reference_outputs(joint.graph, jin);
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
