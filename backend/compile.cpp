// The compile driver (see compile.h): the stages every backend shares, timed and dumped.
#include "backend/compile.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "backend/backend.h"
#include "backend/executable_state.h"
#include "codegen/schedule.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "passes/decompose.h"
#include "passes/memory_plan.h"

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

// Places the intermediates (arena buffers that are not graph outputs) so that buffers live
// in the same schedule steps never overlap; outputs get their own memory at run time.
void plan_arena(codegen::LoweredGraph& lg, int64_t alignment, CompileReport& report) {
  std::vector<bool> is_output(lg.buffers.size(), false);
  for (int o : lg.outputs) is_output[o] = true;
  std::vector<BufferInterval> intervals;
  std::vector<int> which;
  for (size_t i = 0; i < lg.buffers.size(); ++i) {
    const codegen::GraphBuffer& b = lg.buffers[i];
    if (b.kind != codegen::GraphBuffer::Kind::Arena || is_output[i]) continue;
    intervals.push_back({b.nbytes(), b.first_step, b.last_step});
    which.push_back(static_cast<int>(i));
  }
  MemoryPlan mp = plan_memory(intervals, alignment);
  for (size_t j = 0; j < which.size(); ++j) lg.buffers[which[j]].offset = mp.offsets[j];
  report.buffers = static_cast<int>(which.size());
  report.arena_bytes = mp.peak_bytes;
  report.naive_bytes = mp.naive_bytes;
}

// The passes before fusion, on the pass manager: decompose composites, then canonicalize,
// cse and dce until nothing changes (at most 4 rounds).
std::vector<std::string> pass_list(const CompileOptions& o) {
  std::vector<std::string> p;
  if (o.decompose) p.push_back("decompose");
  if (o.optimize)
    for (const char* n : {"canonicalize", "cse", "dce"}) p.emplace_back(n);
  return p;
}

}  // namespace

PassReport run_compile_passes(Graph& g, const CompileOptions& options, const std::string& dump_dir) {
  PassOptions po;
  po.fixpoint = true;
  po.max_rounds = 4;
  po.dump_dir = dump_dir;
  return run_pipeline(g, pass_list(options), po);
}

fusion::FusionOptions compile_fusion_options(const CompileOptions& options) {
  fusion::FusionOptions fo = options.fusion;
  if (!options.fuse) {
    fo.vertical = fo.horizontal = fo.reductions = false;
    fo.max_group_nodes = 1;
  }
  return fo;
}

namespace {

}  // namespace

std::string CompileReport::str() const {
  std::string s = fmt::format("graph {} ({}): {} nodes, {} groups -> {} kernels + {} BLAS calls{}\n", graph, device, nodes, groups,
                              kernels, blas_calls, opaque_calls ? fmt::format(" + {} custom-op kernels", opaque_calls) : "");
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
  return s;
}

CompiledGraph compile(const Graph& input, const CompileOptions& options) {
  const Backend& be = backend_for(options.device);
  auto state = std::make_shared<ExecutableState>();
  CompiledGraph out;
  CompileReport& report = out.report;
  report.graph = input.name();
  state->device = options.device;
  state->target = be.target(options);
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

  fusion::FusionPlan plan = fusion::fuse(g, compile_fusion_options(options));
  report.groups = static_cast<int>(plan.groups.size());
  report.stage_ms.emplace_back("fuse", sw.lap());
  if (dump) {
    write_file(options.dump_dir, "fused.kir", fusion::print_fused(g, plan));
    write_file(options.dump_dir, "fused.dot", fusion::fused_to_dot(g, plan));
  }

  state->lowered = codegen::lower(g, plan, state->target);
  codegen::schedule(state->lowered, state->target);
  for (const codegen::Step& s : state->lowered.steps)
    (s.kind == codegen::Step::Kind::Kernel ? report.kernels : s.kind == codegen::Step::Kind::Matmul ? report.blas_calls : report.opaque_calls)++;
  report.stage_ms.emplace_back("lower", sw.lap());
  plan_arena(state->lowered, state->target.buffer_alignment, report);
  state->arena_bytes = report.arena_bytes;
  report.stage_ms.emplace_back("memory plan", sw.lap());
  if (dump) write_file(options.dump_dir, "kernels.txt", codegen::print_schedule(state->lowered));

  state->source = be.emit(state->lowered.kernels);
  report.stage_ms.emplace_back("emit", sw.lap());
  if (dump) write_file(options.dump_dir, be.source_file_name(), state->source);

  state->graph_name = g.name();
  for (Value v : g.outputs()) state->output_names.push_back(v.name());
  state->program = be.compile(*state, options, report);
  report.stage_ms.emplace_back(options.device.kind == Device::Kind::CPU ? "jit" : "nvrtc", sw.lap());
  if (dump) write_file(options.dump_dir, "report.txt", report.str());
  out.executable = Executable(std::move(state));
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

std::vector<HostTensor> Executable::run(std::span<const HostTensor> inputs) const {
  const ExecutableState& s = state();
  if (inputs.size() != s.input_metas.size())
    fail("graph {} takes {} input{}, got {}", s.graph_name, s.input_metas.size(), s.input_metas.size() == 1 ? "" : "s", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = s.input_metas[i];
    if (!inputs[i].defined()) fail("input {} (%{}) of graph {} is an undefined tensor", i, s.input_names[i], s.graph_name);
    if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
      fail("input {} (%{}) of graph {}: expected {}{}, got {}{}", i, s.input_names[i], s.graph_name, dtype_name(want.dtype),
           shape_str(want.shape), dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
  }
  return s.program->run(s, inputs);
}

}  // namespace kiln::backend
