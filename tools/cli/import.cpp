// kiln import MODEL.onnx -o OUT.kir [--weights DIR] [--sizes NAME=N,...] [--params-as-inputs]:
// an ONNX model as a .kir graph, and its weights (the initializers that became graph inputs) as
// DIR/NAME.npy, so that `kiln run OUT.kir --inputs DIR,INPUTS_DIR` runs it as the model would.
#include <fmt/format.h>

#include <filesystem>

#include "frontend/onnx/onnx.h"
#include "ir/error.h"
#include "ir/npy.h"
#include "ir/printer.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

void add_import_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, out, weights;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("import", "Import an ONNX model: write it as .kir, and its weights as .npy files");
  cmd->add_option("file", o->file, "the .onnx file")->required();
  cmd->add_option("-o,--out", o->out, "the .kir file to write")->required();
  cmd->add_option("--weights", o->weights, "the folder for the weights' .npy files (default: OUT without .kir, then _weights)");
  add_model_options(cmd, o->model);
  cmd->callback([o] {
    if (!is_onnx_path(o->file)) fail("kiln import reads .onnx files; '{}' is not one", o->file);
    Model m = load_model(o->file, "", o->model);
    write_text(o->out, print_graph(m.graph));
    const Graph& g = m.graph;
    auto plural = [](size_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
    fmt::print("wrote {}: graph {} ({}, {}, {})\n", o->out, g.name(), plural(g.inputs().size() - m.weights.size(), "input"),
               plural(g.num_nodes(), "node"), plural(g.outputs().size(), "output"));
    if (m.weights.empty()) return;
    namespace fs = std::filesystem;
    std::string dir = o->weights;
    if (dir.empty()) dir = (fs::path(o->out).parent_path() / (fs::path(o->out).stem().string() + "_weights")).string();
    make_dirs(dir);
    int64_t bytes = 0;
    for (const auto& [name, t] : m.weights) {
      write_npy((fs::path(dir) / (file_stem(name) + ".npy")).string(), t);
      bytes += t.nbytes();
    }
    fmt::print("wrote {} ({:.2f} MB) to {}/; run it with: kiln run {} --inputs {},FOLDER_OF_INPUTS\n",
               plural(m.weights.size(), "weight"), static_cast<double>(bytes) / 1e6, dir, o->out, dir);
  });
}

}  // namespace kiln::cli
