// The compile driver (see compile.h): the stages every backend shares, timed and dumped.
#include "backend/compile.h"
#include "codegen/arena_plan.h"
#include "codegen/collective_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "backend/autotune.h"
#include "backend/backend.h"
#include "backend/debug_dump.h"
#include "backend/executable_state.h"
#include "backend/registry.h"
#include "codegen/schedule.h"
#include "codegen/schedule_candidates.h"
#include "ir/bytes.h"
#include "ir/error.h"
#include "ir/log.h"
#include "ir/printer.h"
#include "passes/decompose.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"

namespace kiln::backend {

namespace {

class Stopwatch {
 public:
  double lap() {
    auto now = std::chrono::steady_clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - t_).count();
    t_ = now;
    return ms;
  }

 private:
  std::chrono::steady_clock::time_point t_ = std::chrono::steady_clock::now();
};

void write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::filesystem::path p = std::filesystem::path(dir) / name;
  std::ofstream f(p, std::ios::binary);
  if (!f) fail("cannot write {}", p.string());
  f << text;
}


// Bytes, added or multiplied without overflow: past 2^63 they stay at the maximum, which the
// messages below print as such (a graph that large fits nowhere).
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
int64_t add_bytes(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kMaxBytes : r;
}
std::string bytes_str(int64_t bytes) { return bytes == kMaxBytes ? "more than 2^63 bytes" : format_bytes(bytes); }

// The storage a graph input's layout addresses (its strides may skip memory), in bytes.
int64_t storage_bytes(const TensorMeta& m) {
  const int64_t extent = storage_extent(m);
  int64_t bytes;
  return __builtin_mul_overflow(extent, static_cast<int64_t>(dtype_size(m.dtype)), &bytes) ? kMaxBytes : bytes;
}

// What a run holds besides the arena: the inputs' storage, and each returned buffer once.
void count_run_memory(ExecutableState& s) {
  s.input_bytes = 0;
  for (const TensorMeta& m : s.input_metas) s.input_bytes = add_bytes(s.input_bytes, storage_bytes(m));
  s.output_bytes = 0;
  const std::vector<int>& outs = s.lowered.outputs;
  for (size_t o = 0; o < outs.size(); ++o)
    if (std::find(outs.begin(), outs.begin() + static_cast<long>(o), outs[o]) == outs.begin() + static_cast<long>(o))
      s.output_bytes = add_bytes(s.output_bytes, s.lowered.buffers[outs[o]].meta.contiguous().nbytes());
}

// Per kernel, the graph nodes it computes (its fusion group's), for errors of the device
// compiler; a copy the lowering added has no group and keeps its own comment.
std::vector<std::string> kernel_nodes(const codegen::LoweredGraph& lg, const fusion::FusionPlan& plan) {
  std::vector<std::string> out(lg.kernels.size());
  for (size_t k = 0; k < lg.kernels.size(); ++k) out[k] = lg.kernels[k].comment;
  for (const codegen::Step& st : lg.steps) {
    if (st.kind != codegen::Step::Kind::Kernel || st.group < 0 || st.group >= static_cast<int>(plan.groups.size())) continue;
    const std::vector<Node*>& nodes = plan.groups[static_cast<size_t>(st.group)].nodes;
    std::string text;
    constexpr size_t kShown = 6;  // a fused group may hold a hundred nodes: the first few name it
    for (size_t i = 0; i < nodes.size() && i < kShown; ++i) {
      text += (i ? "; " : "") + print_node(*nodes[i]);
      if (!nodes[i]->origin().empty()) text += " (from " + nodes[i]->origin() + ")";
    }
    if (nodes.size() > kShown) text += fmt::format("; and {} more node{}", nodes.size() - kShown, nodes.size() - kShown == 1 ? "" : "s");
    out[static_cast<size_t>(st.kernel)] = text;
  }
  return out;
}

}  // namespace

PassReport run_compile_passes(Graph& g, const CompileOptions& options, const std::string& dump_dir) {
  PassOptions po;
  po.fixpoint = true;
  po.max_rounds = 4;
  po.dump_dir = dump_dir;
  return run_pipeline(g, compile_pipeline(options.decompose, options.optimize), po);
}

fusion::FusionOptions compile_fusion_options(const CompileOptions& options, const codegen::Target& target) {
  fusion::FusionOptions fo = options.fusion;
  fo.matmul_epilogues = target.matmul_epilogues;  // fusion decides the fold, as far as the target's GEMM goes
  fo.recompute_from_statistics = fo.recompute_from_statistics || target.recompute_from_statistics;
  fo.column_partials_in_rows = fo.column_partials_in_rows || target.column_partials_in_rows;
  if (!options.fuse) {
    fo.vertical = fo.horizontal = fo.reductions = false;
    fo.max_group_nodes = 1;
  }
  return fo;
}

void check_memory(const ExecutableState& s, bool with_inputs, int64_t budget, const std::string& budget_what) {
  int64_t inputs = with_inputs ? s.input_bytes : 0;
  int64_t need = add_bytes(add_bytes(inputs, s.arena_bytes), s.output_bytes);
  if (need <= budget) return;
  fail("graph {} needs {} to run ({}intermediates {} in its arena, outputs {}), more than {}", s.graph_name, bytes_str(need),
       with_inputs ? "inputs " + bytes_str(inputs) + ", " : "", bytes_str(s.arena_bytes), bytes_str(s.output_bytes), budget_what);
}

std::string CompileReport::str() const {
  std::string s = fmt::format("graph {} ({}): {} nodes, {} groups -> {} kernels + {} BLAS calls{}\n", graph, device, nodes, groups,
                              kernels, blas_calls, (opaque_calls ? fmt::format(" + {} custom-op kernels", opaque_calls) : "") +
                                  (collective_calls ? fmt::format(" + {} collectives", collective_calls) : ""));
  s += fmt::format("memory: {} intermediate buffers, {} unplanned -> {} planned peak\n", buffers, format_bytes(naive_bytes),
                   format_bytes(arena_bytes));
  double total = 0;
  s += "stages:";
  for (auto& [name, ms] : stage_ms) {
    s += fmt::format(" {} {:.2f} ms,", name, ms);
    total += ms;
  }
  s += fmt::format(" total {:.2f} ms\n", total);
  if (!compiler.empty()) s += compiler + "\n";
  if (!autotune.empty()) s += autotune + "\n";
  return s;
}

namespace {

// The stages of one compile, dumped into options.dump_dir when it is given.
CompiledGraph compile_stages(const Graph& input, const CompileOptions& options) {
  const Backend& be = backend_for(options.device);
  auto state = std::make_shared<ExecutableState>();
  CompiledGraph out;
  CompileReport& report = out.report;
  report.graph = input.name();
  state->device = options.device;
  state->target = options.schedule_knobs.empty() ? be.target(options) : codegen::with_knobs(be.target(options), options.schedule_knobs);
  report.device = state->target.name;
  bool dump = !options.dump_dir.empty();
  if (dump) std::filesystem::create_directories(options.dump_dir);
  for (Node* n : input.inputs()) {
    state->input_metas.push_back(n->meta());
    state->input_names.push_back(n->name());
  }

  Stopwatch sw;
  Graph g = input.clone();
  report.passes = run_compile_passes(g, options, dump ? (std::filesystem::path(options.dump_dir) / "passes").string() : "");
  double decompose_ms = 0, optimize_ms = 0;
  for (const PassRun& r : report.passes.runs) (r.name == "decompose" ? decompose_ms : optimize_ms) += r.ms;
  check_primitive(g);
  double passes_ms = sw.lap();
  // The pass manager's own work (verifying, dumping) goes with the optimization passes.
  report.stage_ms.emplace_back("decompose", decompose_ms);
  report.stage_ms.emplace_back("optimize", std::max(0.0, passes_ms - decompose_ms));
  report.nodes = static_cast<int>(g.num_nodes());  // inputs are not nodes of the graph's body
  if (dump) write_file(options.dump_dir, "decomposed.kir", print_graph(g));

  fusion::FusionPlan plan = fusion::fuse(g, compile_fusion_options(options, state->target));
  report.groups = static_cast<int>(plan.groups.size());
  report.stage_ms.emplace_back("fuse", sw.lap());
  if (dump) {
    write_file(options.dump_dir, "fused.kir", fusion::print_fused(g, plan));
    write_file(options.dump_dir, "fused.dot", fusion::fused_to_dot(g, plan));
  }

  state->lowered = codegen::lower(g, plan, state->target);
  const bool tune = autotune_requested(options);
  std::vector<codegen::Kernel> unscheduled;
  if (tune) unscheduled = state->lowered.kernels;
  codegen::schedule(state->lowered, state->target);
  // Collectives as early as their inputs allow, to overlap the kernels after them (KILN_LOGS=ddp
  // shows where each one runs).
  for (const codegen::CollectiveWindow& w : codegen::schedule_collectives_early(state->lowered))
    if (log_enabled("ddp")) log_line("ddp", fmt::format("graph {}: {}", g.name(), codegen::describe_window(state->lowered, w)));
  for (const codegen::Step& s : state->lowered.steps)
    (s.kind == codegen::Step::Kind::Kernel       ? report.kernels
     : s.kind == codegen::Step::Kind::Matmul     ? report.blas_calls
     : s.kind == codegen::Step::Kind::Collective ? report.collective_calls
                                                 : report.opaque_calls)++;
  report.stage_ms.emplace_back("lower", sw.lap());
  if (tune) {
    // Before the memory plan and the emitter: the tuned kernels replace the defaults.
    report.autotune = autotune(state->lowered, unscheduled, state->target, be, options, g.name()).str();
    report.stage_ms.emplace_back("autotune", sw.lap());
  }
  const codegen::ArenaPlan arena = codegen::plan_arena(state->lowered, state->target.buffer_alignment);
  report.buffers = arena.buffers;
  report.arena_bytes = arena.arena_bytes;
  report.naive_bytes = arena.naive_bytes;
  state->arena_bytes = report.arena_bytes;
  state->graph_name = g.name();
  count_run_memory(*state);
  // Resource limits: a graph whose tensors cannot fit in the device's memory is refused now,
  // before the device compiler runs and before anything is allocated (a run would fail in the
  // allocator at best, and at worst be killed when the kernels touch memory the OS promised).
  if (std::optional<MemoryBudget> budget = be.memory_budget(options))
    check_memory(*state, /*with_inputs=*/true, budget->bytes, budget->what);
  report.stage_ms.emplace_back("memory plan", sw.lap());
  if (dump) write_file(options.dump_dir, "kernels.txt", codegen::print_schedule(state->lowered));

  state->emitted = emit(be, state->lowered.kernels);
  state->source = state->emitted.text();
  report.stage_ms.emplace_back("emit", sw.lap());
  if (dump) write_file(options.dump_dir, be.source_file_name(), state->source);

  for (Value v : g.outputs()) state->output_names.push_back(v.name());
  state->kernel_nodes = kernel_nodes(state->lowered, plan);
  state->program = be.compile(*state, options, report);
  report.stage_ms.emplace_back(options.device.kind == Device::Kind::CPU ? "jit" : "nvrtc", sw.lap());
  if (dump) write_file(options.dump_dir, "report.txt", report.str());
  out.executable = Executable(std::move(state));
  return out;
}

}  // namespace

CompiledGraph compile(const Graph& g, const CompileOptions& options) {
  // Every compile comes through here, so every compiled graph gets its debug folder and its log
  // lines, whoever asked. A caller that keeps a folder of its own (kiln::compile's stages) gives
  // dump_dir; the others get a folder of their own under $KILN_DEBUG_DIR.
  const std::string origin = options.origin.empty() ? "backend::compile" : options.origin;
  CompiledGraph out;
  DebugDump debug;
  if (options.dump_dir.empty()) debug = DebugDump::open(DebugDump::root_from(""), g.name());
  if (debug.active()) {
    debug.origin(origin);
    debug.graph("graph", g);
    CompileOptions in_folder = options;
    in_folder.dump_dir = debug.compile_folder("graph");
    out = compile_stages(g, in_folder);
    debug.compiled("graph", out.report);
    debug.finish();
    out.report.debug_folder = debug.folder().string();
  } else {
    out = compile_stages(g, options);
  }
  if (log_enabled("output_code"))
    log_line("output_code", fmt::format("{} '{}' for {}:\n{}", origin, g.name(), out.report.device, out.executable.source()));
  if (log_enabled("perf")) log_line("perf", fmt::format("{}: {}", origin, out.report.str()));
  return out;
}

CompiledGraph compile_cpu(const Graph& g, CompileOptions options) {
  options.device = Device::cpu();
  return compile(g, options);
}

Tolerance tolerance_of(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1e-5};
    case DType::F64: return {1e-9, 1e-9};
    case DType::F16: return {1e-2, 1e-2};
    case DType::BF16: return {2e-2, 2e-2};
    default: return {0, 0};
  }
}

// ---------------------------------------------------------------- Executable

const ExecutableState& Executable::state() const {
  if (!s_) fail("this executable was not compiled (default-constructed Executable)");
  return *s_;
}
const codegen::LoweredGraph& Executable::lowered() const { return state().lowered; }
const std::string& Executable::source() const { return state().source; }
const Device& Executable::device() const { return state().device; }

namespace {

// kiln::Error unless `inputs` match the graph's inputs in number, dtype and shape (any strides).
template <class T, class MetaOf>
void check_inputs(const ExecutableState& s, std::span<const T> inputs, MetaOf meta_of) {
  if (inputs.size() != s.input_metas.size())
    fail("graph {} takes {} input{}, got {}", s.graph_name, s.input_metas.size(), s.input_metas.size() == 1 ? "" : "s", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = s.input_metas[i];
    const TensorMeta* got = meta_of(inputs[i]);
    if (!got) fail("input {} (%{}) of graph {} is an undefined tensor", i, s.input_names[i], s.graph_name);
    if (got->dtype != want.dtype || got->shape != want.shape)
      fail("input {} (%{}) of graph {}: expected {}{}, got {}{}", i, s.input_names[i], s.graph_name, dtype_name(want.dtype),
           shape_str(want.shape), dtype_name(got->dtype), shape_str(got->shape));
  }
}

}  // namespace

std::vector<HostTensor> Executable::run(std::span<const HostTensor> inputs) const {
  const ExecutableState& s = state();
  check_inputs(s, inputs, [](const HostTensor& t) { return t.defined() ? &t.meta() : nullptr; });
  return s.program->run(s, inputs);
}

std::vector<StoragePtr> run_on_device(const Executable& exe, std::span<const StoragePtr> inputs) {
  const ExecutableState& s = exe.state();
  if (s.device.kind == Device::Kind::CPU)
    fail("graph {} was compiled for the CPU, whose tensors are in host memory: run it with Executable::run", s.graph_name);
  check_inputs(s, inputs, [](const StoragePtr& t) { return t ? &t->meta() : nullptr; });
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->meta().device != s.device)
      fail("input {} (%{}) of graph {} is on {}, the graph runs on {}", i, s.input_names[i], s.graph_name, inputs[i]->meta().device.str(),
           s.device.str());
  return s.program->run_on_device(s, inputs);
}

}  // namespace kiln::backend
