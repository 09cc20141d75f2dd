#include "backend/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "backend/backend.h"
#include "backend/registry.h"
#include "ir/bytes.h"
#include "ir/error.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "passes/fusion/fusion.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"

namespace kiln::backend {

namespace {

// "add x2, exp, mylib::scaled_swish": each op once, with its count, in order of first use.
std::string op_counts(const Graph& g) {
  std::vector<std::string> order;
  std::map<std::string, int> count;
  for (const Node* n : g.nodes()) {
    std::string name(op_name(n->op()));
    if (!count[name]++) order.push_back(name);
  }
  std::string out;
  for (const std::string& n : order) out += fmt::format("{}{}{}", out.empty() ? "" : ", ", n, count[n] > 1 ? fmt::format(" x{}", count[n]) : "");
  return out.empty() ? "(none)" : out;
}

// A training step's graph (frontend/optim.h's make_train_step, as a debug dump or a saved .kir
// holds it): a 0-d `step` input, and optimizer state inputs named after a parameter input of the
// same shape ("fc_weight_exp_avg", "_exp_avg_sq", "_momentum_buffer"). Fills its parameters and
// state (the tensors kept between steps); false when `g` is not one.
bool is_train_step(const Graph& g, std::vector<const Node*>& params, std::vector<const Node*>& state) {
  std::map<std::string, const Node*> by_name;
  bool has_step = false;
  for (const Node* in : g.inputs()) {
    by_name[in->name()] = in;
    has_step = has_step || (in->name() == "step" && in->meta().rank() == 0);
  }
  if (!has_step) return false;
  for (const Node* in : g.inputs()) {
    for (const char* suffix : {"_exp_avg_sq", "_exp_avg", "_momentum_buffer"}) {
      const std::string& n = in->name();
      const std::string sfx(suffix);
      if (n.size() <= sfx.size() || n.compare(n.size() - sfx.size(), sfx.size(), sfx) != 0) continue;
      auto p = by_name.find(n.substr(0, n.size() - sfx.size()));
      if (p == by_name.end() || p->second->meta().shape != in->meta().shape) continue;
      state.push_back(in);
      if (std::find(params.begin(), params.end(), p->second) == params.end()) params.push_back(p->second);
      break;
    }
  }
  return !state.empty();
}

// What training through `g` would keep: its joint graph split by the min-cut partitioner; for a
// training step, which differentiates itself already, what it keeps between steps instead.
std::string training_section(const Graph& g) {
  std::vector<const Node*> params, state;
  if (is_train_step(g, params, state)) {
    auto bytes_of = [](const std::vector<const Node*>& ns) {
      int64_t b = 0;
      for (const Node* n : ns) b += n->meta().nbytes();
      return b;
    };
    std::string out = fmt::format(
        "training: this graph is a training step (forward, loss, backward and the optimizer's update in one graph), "
        "not differentiated again. It updates {} parameter{} ({}) with {} optimizer state tensor{} ({}), returning the loss, "
        "the new parameters and the new state: {} kept between steps.\n",
        params.size(), params.size() == 1 ? "" : "s", format_bytes(bytes_of(params)), state.size(), state.size() == 1 ? "" : "s",
        format_bytes(bytes_of(state)), format_bytes(bytes_of(params) + bytes_of(state)));
    for (const Node* p : params) out += fmt::format("  parameter %{}: {}\n", p->name(), p->meta().str());
    return out;
  }
  try {
    autograd::JointGraph joint = autograd::build_joint(g);
    autograd::Partition p = autograd::partition(joint, autograd::PartitionKind::MinCut);
    std::string out = fmt::format("training (joint graph, min-cut partition): the backward reads {} saved tensor{} ({}), recomputes {} node{}\n",
                                  p.saved.size(), p.saved.size() == 1 ? "" : "s", format_bytes(p.saved_bytes), p.recomputed_nodes,
                                  p.recomputed_nodes == 1 ? "" : "s");
    for (const autograd::SavedTensor& s : p.saved) out += fmt::format("  saved %{}: {} ({})\n", s.name, s.meta.str(), format_bytes(s.bytes));
    return out;
  } catch (const Error& e) {
    return fmt::format("training: not differentiable as it is ({})\n", e.what());
  }
}

}  // namespace

Explanation explain(const Graph& input, const CompileOptions& options) {
  Explanation x;
  std::string& out = x.text;
  out += fmt::format("graph {}: {} inputs, {} outputs, {} nodes\n", input.name(), input.inputs().size(), input.outputs().size(),
                     input.num_nodes());
  out += fmt::format("ops: {}\n", op_counts(input));

  // compile()'s own stages, run here to show the graph between them.
  Graph g = input.clone();
  run_compile_passes(g, options);
  out += fmt::format("after decomposition and optimization: {} nodes\nops: {}\n", g.num_nodes(), op_counts(g));
  fusion::FusionPlan plan = fusion::fuse(g, compile_fusion_options(options, backend_for(options.device).target(options)));
  x.fused_dot = fusion::fused_to_dot(g, plan);
  out += fmt::format("\nfusion: {} groups, {} of them kernels or calls\n", plan.groups.size(), plan.num_kernels());
  for (const fusion::FusionGroup& grp : plan.groups) {
    out += fmt::format("  {}\n", grp.label());
    for (const std::string& r : grp.reasons) out += fmt::format("      {}\n", r);
  }

  CompiledGraph c = compile(input, options);
  const codegen::LoweredGraph& lg = c.executable.lowered();
  out += fmt::format("\nschedule for {}: {} kernels, {} BLAS calls, {} custom-op calls\n", c.report.device, c.report.kernels,
                     c.report.blas_calls, c.report.opaque_calls);
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const codegen::Step& s = lg.steps[i];
    switch (s.kind) {
      case codegen::Step::Kind::Kernel: {
        const codegen::Kernel& k = lg.kernels[s.kernel];
        out += fmt::format("  {:3} kernel {}: {}\n", i, k.name, k.comment);
        // How it maps to the machine and why (the CUDA schedule's record; the CPU's is empty).
        if (!k.schedule.mapping.empty()) out += fmt::format("        schedule: {}\n", codegen::print_schedule(k.schedule, k.launch));
        break;
      }
      case codegen::Step::Kind::Matmul: out += fmt::format("  {:3} {}: {}\n", i, c.report.device == "cpu" ? "BLAS" : "cuBLASLt", s.matmul.label); break;
      case codegen::Step::Kind::Opaque: out += fmt::format("  {:3} custom op {}: {}\n", i, op_name(s.opaque.op), s.opaque.label); break;
      case codegen::Step::Kind::Collective: out += fmt::format("  {:3} collective {}: {}\n", i, op_name(s.opaque.op), s.opaque.label); break;
    }
  }
  out += fmt::format("\nmemory: {} intermediate buffers in a planned arena of {} (each in its own memory: {})\n", c.report.buffers,
                     format_bytes(c.report.arena_bytes), format_bytes(c.report.naive_bytes));
  out += "\n" + training_section(input);
  return x;
}

}  // namespace kiln::backend
