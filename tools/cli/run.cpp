// kiln run FILE.kir [--seed N] [--inputs a.npy,b.npy] [--save-outputs DIR]: runs a graph on
// the reference interpreter (the definition of what every op computes) and summarizes each
// output. Random inputs by default; integer inputs stay in range for the ops that index.
// With --device cpu|cuda the graph is compiled and run by that backend instead; --check then
// compares every output with the reference interpreter (exit 1 on a mismatch).
#include <fmt/format.h>

#include <filesystem>

#include "backend/compile.h"
#include "backend/reference_check.h"
#include "ir/error.h"
#include "tools/cli/device.h"

#include "ir/npy.h"
#include "ir/reference/interpreter.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/inputs.h"

namespace kiln::cli {

namespace {

// Prints one line per output (backend/reference_check.h: each element within the rounding a correct
// kernel may make); returns whether every output passed.
bool check_outputs(const Graph& g, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& got) {
  bool all = true;
  for (const backend::OutputCheck& c : backend::check_against_reference(g, inputs, got)) {
    fmt::print("  check {}: {}\n", c.name, c.str());
    all = all && c.ok();
  }
  return all;
}

}  // namespace

void add_run_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, save_outputs, save_inputs;
    std::vector<std::string> inputs;
    std::string device;
    uint64_t seed = 0;
    bool check = false;
    bool autotune = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run a graph on the reference interpreter and summarize its outputs");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--inputs", o->inputs, "one .npy file per graph input, in order (comma-separated), or folders of NAME.npy per input (an .onnx model's weights come with it)")->delimiter(',');
  cmd->add_option("--save-outputs", o->save_outputs, "write each output as DIR/NAME.npy");
  cmd->add_option("--save-inputs", o->save_inputs, "write each input as DIR/NAME.npy (to replay them elsewhere)");
  cmd->add_option("--device", o->device, "compile and run on this device (cpu, cuda, cuda:N) instead of the reference interpreter");
  cmd->add_flag("--autotune", o->autotune, "time each kernel's candidate schedules on the device and keep the fastest (also KILN_AUTOTUNE=1; the choice is kept in the kernel cache)");
  cmd->add_flag("--check", o->check, "with --device: compare every output with the reference interpreter (exit 1 on failure)");
  cmd->callback([o] {
    if (!o->device.empty()) require_runnable(parse_device(o->device), "kiln run");
    Model m = load_model(o->file, o->graph, o->model);
    const Graph& g = m.graph;
    std::vector<HostTensor> inputs = model_inputs(m, o->inputs, o->seed);
    fmt::print("graph {}: {} input{} ({}{})\n", g.name(), inputs.size(), inputs.size() == 1 ? "" : "s",
               o->inputs.empty() ? fmt::format("random, seed {}", o->seed) : "from .npy files",
               m.weights.empty() ? "" : fmt::format("; {} weights from the model", m.weights.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!m.weights.count(g.inputs()[i]->name())) fmt::print("  in  %{}: {}\n", g.inputs()[i]->name(), summarize(inputs[i]));
    std::vector<HostTensor> outputs;
    if (o->device.empty()) {
      if (o->check) fail("--check compares a compiled run with the reference interpreter: give --device cpu or --device cuda");
      outputs = interpret(g, inputs);
    } else {
      backend::CompileOptions options;
      options.device = parse_device(o->device);
      options.autotune = o->autotune;
      options.origin = "kiln run";
      backend::CompiledGraph cg = backend::compile(g, options);
      fmt::print("compiled for {}: {} kernels + {} BLAS calls\n", o->device, cg.report.kernels, cg.report.blas_calls);
      if (!cg.report.autotune.empty()) fmt::print("{}\n", cg.report.autotune);
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
    if (o->check && !check_outputs(g, inputs, outputs))
      fail("--check: compiled outputs differ from the reference interpreter beyond what rounding explains");
    if (!o->save_inputs.empty()) save(o->save_inputs, [&](size_t i) { return g.inputs()[i]->name(); }, inputs);
    if (!o->save_outputs.empty()) save(o->save_outputs, [&](size_t i) { return m.output_names[i]; }, outputs);
  });
}

}  // namespace kiln::cli
