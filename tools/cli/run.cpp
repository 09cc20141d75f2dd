// kiln run FILE.kir [--seed N] [--inputs a.npy,b.npy] [--save-outputs DIR]: runs a graph on
// the reference interpreter (the definition of what every op computes) and summarizes each
// output. Random inputs by default; integer inputs stay in range for the ops that index.
// With --device cpu|cuda the graph is compiled and run by that backend instead; --check then
// compares every output with the reference interpreter (exit 1 on a mismatch).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "backend/compile.h"
#include "ir/error.h"
#include "tools/cli/device.h"

#include "ir/npy.h"
#include "ir/reference/interpreter.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/inputs.h"

namespace kiln::cli {

namespace {

using backend::Tolerance;
using backend::tolerance_of;

// Prints one line per output; returns whether every output is within tolerance.
bool check_outputs(const Graph& g, const std::vector<HostTensor>& got, const std::vector<HostTensor>& want) {
  bool all = true;
  for (size_t i = 0; i < want.size(); ++i) {
    Tolerance tol = tolerance_of(want[i].dtype());
    double max_abs = 0, max_rel = 0;
    bool ok = got[i].shape() == want[i].shape() && got[i].dtype() == want[i].dtype();
    for (int64_t j = 0; ok && j < want[i].numel(); ++j) {
      double a = got[i].get(j), e = want[i].get(j);
      if (std::isnan(a) && std::isnan(e)) continue;
      if (!is_floating(want[i].dtype()) && got[i].get_int(j) != want[i].get_int(j)) {
        ok = false;
        max_abs = std::abs(a - e);
        break;
      }
      double d = a == e ? 0 : std::abs(a - e);
      if (std::isnan(d)) d = INFINITY;
      max_abs = std::max(max_abs, d);
      if (e != 0) max_rel = std::max(max_rel, d / std::abs(e));
      if (d > tol.atol + tol.rtol * std::abs(e)) ok = false;
    }
    fmt::print("  check %{}: {}  max abs err {:.3g}, max rel err {:.3g} (tolerance {:.0e} abs + {:.0e} rel)\n", g.outputs()[i].name(),
               ok ? "PASS" : "FAIL", max_abs, max_rel, tol.atol, tol.rtol);
    all = all && ok;
  }
  return all;
}

}  // namespace

void add_run_command(CLI::App& app) {
  struct Opts {
    std::string file, graph, save_outputs, save_inputs;
    std::vector<std::string> inputs;
    std::string device;
    uint64_t seed = 0;
    bool check = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run a graph on the reference interpreter and summarize its outputs");
  cmd->add_option("file", o->file, "the .kir file")->required();
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--inputs", o->inputs, "one .npy file per graph input, in order (comma-separated), or a folder of NAME.npy per input")->delimiter(',');
  cmd->add_option("--save-outputs", o->save_outputs, "write each output as DIR/NAME.npy");
  cmd->add_option("--save-inputs", o->save_inputs, "write each input as DIR/NAME.npy (to replay them elsewhere)");
  cmd->add_option("--device", o->device, "compile and run on this device (cpu, cuda, cuda:N) instead of the reference interpreter");
  cmd->add_flag("--check", o->check, "with --device: compare every output with the reference interpreter (exit 1 on failure)");
  cmd->callback([o] {
    if (!o->device.empty()) require_runnable(parse_device(o->device), "kiln run");
    Graph g = load_graph(o->file, o->graph);
    std::vector<HostTensor> inputs = o->inputs.empty() ? random_inputs(g, o->seed) : npy_inputs(g, o->inputs);
    fmt::print("graph {}: {} input{} ({})\n", g.name(), inputs.size(), inputs.size() == 1 ? "" : "s",
               o->inputs.empty() ? fmt::format("random, seed {}", o->seed) : "from .npy files");
    for (size_t i = 0; i < inputs.size(); ++i) fmt::print("  in  %{}: {}\n", g.inputs()[i]->name(), summarize(inputs[i]));
    std::vector<HostTensor> outputs;
    if (o->device.empty()) {
      if (o->check) fail("--check compares a compiled run with the reference interpreter: give --device cpu or --device cuda");
      outputs = interpret(g, inputs);
    } else {
      backend::CompileOptions options;
      options.device = parse_device(o->device);
      backend::CompiledGraph cg = backend::compile(g, options);
      fmt::print("compiled for {}: {} kernels + {} BLAS calls\n", o->device, cg.report.kernels, cg.report.blas_calls);
      outputs = cg.run(inputs);
    }
    for (size_t i = 0; i < outputs.size(); ++i) fmt::print("  out %{}: {}\n", g.outputs()[i].name(), summarize(outputs[i]));
    auto save = [](const std::string& dir, auto&& name_of, const std::vector<HostTensor>& ts) {
      make_dirs(dir);
      for (size_t i = 0; i < ts.size(); ++i) {
        std::string path = (std::filesystem::path(dir) / (file_stem(name_of(i)) + ".npy")).string();
        write_npy(path, ts[i]);
        fmt::print("wrote {}\n", path);
      }
    };
    if (o->check && !check_outputs(g, outputs, interpret(g, inputs)))
      fail("--check: compiled outputs differ from the reference interpreter beyond tolerance");
    if (!o->save_inputs.empty()) save(o->save_inputs, [&](size_t i) { return g.inputs()[i]->name(); }, inputs);
    if (!o->save_outputs.empty()) save(o->save_outputs, [&](size_t i) { return g.outputs()[i].name(); }, outputs);
  });
}

}  // namespace kiln::cli
