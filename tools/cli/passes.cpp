// kiln passes FILE.kir --pipeline dce,cse,... [--dump-dir DIR] [--fixpoint]: runs graph
// passes (verified after each) and prints the resulting graph, then the pass report as
// '#' comments, so that the output is itself a valid .kir file.
#include <fmt/format.h>

#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/pipeline.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

namespace {

std::string as_comments(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += "# " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

std::string pass_list() {
  std::string out;
  for (auto& n : pass_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void add_passes_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, pipeline = "default", dump_dir;
    bool fixpoint = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("passes", "Run a pipeline of graph passes; print the resulting graph and a report");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--pipeline,-p", o->pipeline,
                  "comma-separated pass names, or 'default' (passes: " + pass_list() + ")")
      ->capture_default_str();
  cmd->add_option("--dump-dir", o->dump_dir, "write the graph before and after each pass (00_input.kir, 01_<pass>.kir, ...)");
  cmd->add_flag("--fixpoint", o->fixpoint, "repeat the pipeline until a round changes nothing");
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->callback([o] {
    Graph g = load_graph(o->file, o->graph, o->model);
    PassOptions opts;
    opts.dump_dir = o->dump_dir;
    opts.fixpoint = o->fixpoint;
    if (!o->dump_dir.empty()) make_dirs(o->dump_dir);
    PassReport report = run_pipeline(g, parse_pipeline(o->pipeline), opts);
    fmt::print("{}\n{}", print_graph(g), as_comments(format_report(report)));
  });
}

}  // namespace kiln::cli
