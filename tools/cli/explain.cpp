// kiln explain FILE.kir [--device cpu|cuda[:N]] [--svg OUT.svg]: one page on what the compiler
// does to a graph (backend/explain.h): ops before and after decomposition, fusion groups and the
// reason for each merge made or refused, kernels and BLAS calls, what training it would save and
// recompute, planned memory. --svg draws the fused graph with its groups as clusters.
#include <fmt/format.h>

#include "backend/explain.h"
#include "ir/dot.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/device.h"

namespace kiln::cli {

void add_explain_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, device = "cpu", svg;
    bool autotune = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("explain", "One page on what the compiler does to a graph: decomposition, fusion and why, kernels, memory");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N (CUDA compiles with NVRTC, also with no GPU)")->capture_default_str();
  cmd->add_flag("--autotune", o->autotune, "time each kernel's candidate schedules on the device and keep the fastest (also KILN_AUTOTUNE=1; the choice is kept in the kernel cache)");
  cmd->add_option("--svg", o->svg, "draw the fused graph, its groups as clusters, to this .svg (needs Graphviz's dot)");
  cmd->callback([o] {
    Graph g = load_graph(o->file, o->graph, o->model);
    backend::CompileOptions options;
    options.device = parse_device(o->device);
    options.autotune = o->autotune;
    backend::Explanation x = backend::explain(g, options);
    fmt::print("{}", x.text);
    if (!o->svg.empty()) {
      render_dot(x.fused_dot, o->svg, "svg");
      fmt::print("wrote {}\n", o->svg);
    }
  });
}

}  // namespace kiln::cli
