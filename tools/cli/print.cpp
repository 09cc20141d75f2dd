// kiln print FILE.kir: the canonical text form of every graph in the file.
#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

void add_print_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("print", "Parse a .kir file and print it in canonical form");
  auto file = std::make_shared<std::string>();
  cmd->add_option("file", *file, "the .kir or .onnx file")->required();
  auto model = std::make_shared<ModelOptions>();
  add_model_options(cmd, *model);
  cmd->callback([file, model] {
    auto graphs = load_graphs(*file, *model);
    for (size_t i = 0; i < graphs.size(); ++i) fmt::print("{}{}", i ? "\n" : "", print_graph(graphs[i]));
  });
}

}  // namespace kiln::cli
