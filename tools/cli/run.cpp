// kiln run FILE.kir [--seed N] [--inputs a.npy,b.npy] [--save-outputs DIR]: runs a graph on
// the reference interpreter (the definition of what every op computes) and summarizes each
// output. Random inputs by default; integer inputs stay in range for the ops that index.
#include <fmt/format.h>

#include <filesystem>

#include "ir/npy.h"
#include "ir/reference/interpreter.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/inputs.h"

namespace kiln::cli {

void add_run_command(CLI::App& app) {
  struct Opts {
    std::string file, graph, save_outputs, save_inputs;
    std::vector<std::string> inputs;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "Run a graph on the reference interpreter and summarize its outputs");
  cmd->add_option("file", o->file, "the .kir file")->required();
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--inputs", o->inputs, "one .npy file per graph input, in order (comma-separated)")->delimiter(',');
  cmd->add_option("--save-outputs", o->save_outputs, "write each output as DIR/NAME.npy");
  cmd->add_option("--save-inputs", o->save_inputs, "write each input as DIR/NAME.npy (to replay them elsewhere)");
  cmd->callback([o] {
    Graph g = load_graph(o->file, o->graph);
    std::vector<HostTensor> inputs = o->inputs.empty() ? random_inputs(g, o->seed) : npy_inputs(g, o->inputs);
    fmt::print("graph {}: {} input{} ({})\n", g.name(), inputs.size(), inputs.size() == 1 ? "" : "s",
               o->inputs.empty() ? fmt::format("random, seed {}", o->seed) : "from .npy files");
    for (size_t i = 0; i < inputs.size(); ++i) fmt::print("  in  %{}: {}\n", g.inputs()[i]->name(), summarize(inputs[i]));
    std::vector<HostTensor> outputs = interpret(g, inputs);
    for (size_t i = 0; i < outputs.size(); ++i) fmt::print("  out %{}: {}\n", g.outputs()[i].name(), summarize(outputs[i]));
    auto save = [](const std::string& dir, auto&& name_of, const std::vector<HostTensor>& ts) {
      make_dirs(dir);
      for (size_t i = 0; i < ts.size(); ++i) {
        std::string path = (std::filesystem::path(dir) / (file_stem(name_of(i)) + ".npy")).string();
        write_npy(path, ts[i]);
        fmt::print("wrote {}\n", path);
      }
    };
    if (!o->save_inputs.empty()) save(o->save_inputs, [&](size_t i) { return g.inputs()[i]->name(); }, inputs);
    if (!o->save_outputs.empty()) save(o->save_outputs, [&](size_t i) { return g.outputs()[i].name(); }, outputs);
  });
}

}  // namespace kiln::cli
