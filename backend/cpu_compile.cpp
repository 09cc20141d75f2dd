// compile_cpu: the stages of the CPU backend, timed and optionally dumped (see cpu_compile.h).
#include "backend/cpu_compile.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "backend/executable_state.h"
#include "codegen/cpp_emitter.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "passes/canonicalize.h"
#include "passes/cse.h"
#include "passes/dce.h"
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
  std::ofstream f(p);
  if (!f) fail("cannot write {}", p.string());
  f << text;
}

// Places the intermediates (arena buffers that are not graph outputs) so that buffers live
// in the same schedule steps never overlap; outputs get their own memory at run time.
void plan_arena(codegen::LoweredGraph& lg, CompileReport& report) {
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
  MemoryPlan mp = plan_memory(intervals, 64);
  for (size_t j = 0; j < which.size(); ++j) lg.buffers[which[j]].offset = mp.offsets[j];
  report.buffers = static_cast<int>(which.size());
  report.arena_bytes = mp.peak_bytes;
  report.naive_bytes = mp.naive_bytes;
}

}  // namespace

std::string CompileReport::str() const {
  std::string s = fmt::format("graph {}: {} nodes, {} groups -> {} kernels + {} BLAS calls\n", graph, nodes, groups, kernels, blas_calls);
  s += fmt::format("memory: {} intermediate buffers, {} unplanned -> {} planned peak\n", buffers, format_bytes(naive_bytes),
                   format_bytes(arena_bytes));
  double total = 0;
  s += "stages:";
  for (auto& [name, ms] : stage_ms) {
    s += fmt::format(" {} {:.2f} ms,", name, ms);
    total += ms;
  }
  s += fmt::format(" total {:.2f} ms\n", total);
  s += fmt::format("jit: clang {:.2f} ms, codegen {:.2f} ms, link {:.2f} ms{}\n", jit.frontend_ms, jit.codegen_ms, jit.link_ms,
                   jit.cache_hit ? " (cache hit)" : "");
  return s;
}

CompiledGraph compile_cpu(const Graph& input, const CpuCompileOptions& options) {
  auto state = std::make_shared<ExecutableState>();
  CompiledGraph out;
  CompileReport& report = out.report;
  report.graph = input.name();
  bool dump = !options.dump_dir.empty();
  if (dump) std::filesystem::create_directories(options.dump_dir);
  for (Node* n : input.inputs()) {
    state->input_metas.push_back(n->meta());
    state->input_names.push_back(n->name());
  }

  Stopwatch sw;
  Graph g = input.clone();
  if (options.decompose) run_decompose(g);
  report.stage_ms.emplace_back("decompose", sw.lap());
  if (options.optimize) {
    for (int round = 0; round < 4; ++round) {
      bool changed = run_canonicalize(g);
      changed = run_cse(g) || changed;
      changed = run_dce(g) || changed;
      if (!changed) break;
    }
  }
  check_primitive(g);
  report.stage_ms.emplace_back("optimize", sw.lap());
  report.nodes = static_cast<int>(g.num_nodes() - g.inputs().size());
  if (dump) write_file(options.dump_dir, "decomposed.kir", print_graph(g));

  fusion::FusionOptions fo = options.fusion;
  if (!options.fuse) {
    fo.vertical = fo.horizontal = fo.reductions = false;
    fo.max_group_nodes = 1;
  }
  fusion::FusionPlan plan = fusion::fuse(g, fo);
  report.groups = static_cast<int>(plan.groups.size());
  report.stage_ms.emplace_back("fuse", sw.lap());
  if (dump) {
    write_file(options.dump_dir, "fused.kir", fusion::print_fused(g, plan));
    write_file(options.dump_dir, "fused.dot", fusion::fused_to_dot(g, plan));
  }

  state->lowered = codegen::lower(g, plan);
  for (const codegen::Step& s : state->lowered.steps) (s.kind == codegen::Step::Kind::Kernel ? report.kernels : report.blas_calls)++;
  report.stage_ms.emplace_back("lower", sw.lap());
  plan_arena(state->lowered, report);
  state->arena_bytes = report.arena_bytes;
  report.stage_ms.emplace_back("memory plan", sw.lap());
  if (dump) write_file(options.dump_dir, "kernels.txt", codegen::print_schedule(state->lowered));

  state->source = codegen::emit_cpp_module(state->lowered.kernels);
  report.stage_ms.emplace_back("emit", sw.lap());
  if (dump) write_file(options.dump_dir, "kernels.cpp", state->source);

  if (!state->lowered.kernels.empty()) {
    state->module = runtime::cpu::compile(state->source, options.jit);
    report.jit = state->module->stats();
    for (const codegen::Kernel& k : state->lowered.kernels)
      state->kernels.push_back(reinterpret_cast<KernelFn>(state->module->symbol(k.name)));
  }
  report.stage_ms.emplace_back("jit", sw.lap());
  if (dump) write_file(options.dump_dir, "report.txt", report.str());
  state->graph_name = g.name();
  state->output_names.clear();
  for (Value v : g.outputs()) state->output_names.push_back(v.name());
  out.executable = Executable(std::move(state));
  return out;
}

}  // namespace kiln::backend
