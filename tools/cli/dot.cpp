// kiln dot FILE.kir [-o OUT.{dot,svg,png}]: draw a graph with Graphviz (.dot text to stdout
// without -o). .svg and .png need Graphviz's `dot` program; .dot text never does.
#include <fmt/format.h>

#include "ir/dot.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

void add_dot_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, out, graph;
    bool no_edge_types = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("dot", "Export a graph as Graphviz .dot text, or render it to .svg/.png");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("-o,--output", o->out, "OUT.dot, OUT.svg or OUT.png (the format follows the extension); stdout if absent");
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_flag("--no-edge-types", o->no_edge_types, "leave the types off the edges");
  cmd->callback([o] {
    Graph g = load_graph(o->file, o->graph, o->model);
    DotOptions opts;
    opts.edge_types = !o->no_edge_types;
    if (o->out.empty()) {
      fmt::print("{}", to_dot(g, opts));
      return;
    }
    write_graph_image(g, o->out, opts);
    fmt::print("wrote {}\n", o->out);
  });
}

}  // namespace kiln::cli
