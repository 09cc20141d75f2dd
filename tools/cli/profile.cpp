// kiln profile FILE.kir --device cpu|cuda[:N] [--runs N] [--trace OUT.json] [--seed N]: compiles
// a graph, runs it on random inputs and prints where the time goes, step by step (each kernel
// and each BLAS/cuBLASLt call: time, share, GB/s, what it computes), slowest first; --trace
// writes a Chrome trace of the median run (open it in Perfetto or chrome://tracing).
#include <fmt/format.h>

#include "backend/compile.h"
#include "backend/profile.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/device.h"
#include "tools/cli/inputs.h"

namespace kiln::cli {

void add_profile_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, device = "cpu", trace;
    int runs = 10;
    uint64_t seed = 0;
    bool autotune = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("profile", "Compile a graph, run it, and show the time of every kernel and BLAS call");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_flag("--autotune", o->autotune, "time each kernel's candidate schedules on the device and keep the fastest (also KILN_AUTOTUNE=1; the choice is kept in the kernel cache)");
  cmd->add_option("--runs", o->runs, "timed runs (after one warm-up run); each step's time is its median")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--trace", o->trace, "write a Chrome trace (JSON) of the median run here");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->callback([o] {
    require_runnable(parse_device(o->device), "kiln profile");
    Model m = load_model(o->file, o->graph, o->model);
    const Graph& g = m.graph;
    std::vector<HostTensor> inputs = model_inputs(m, {}, o->seed);
    backend::CompileOptions options;
    options.device = parse_device(o->device);
    options.autotune = o->autotune;
    options.origin = "kiln profile";
    backend::CompiledGraph cg = backend::compile(g, options);
    fmt::print("compiled {} for {}: {} kernels + {} BLAS calls\n", g.name(), o->device, cg.report.kernels,
               cg.report.blas_calls);
    if (!cg.report.autotune.empty()) fmt::print("{}\n", cg.report.autotune);
    backend::Profile p = backend::profile(cg.executable, inputs, o->runs);
    fmt::print("{}", p.table());
    if (!o->trace.empty()) {
      write_text(o->trace, p.chrome_trace());
      fmt::print("wrote {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", o->trace);
    }
  });
}

}  // namespace kiln::cli
