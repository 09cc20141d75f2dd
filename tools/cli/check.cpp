// kiln check FILE.kir: parse and verify; one "ok: ..." line per graph, or the first error.
#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

void add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Parse and verify a .kir file (exit code 1 and the error if it is invalid)");
  auto file = std::make_shared<std::string>();
  cmd->add_option("file", *file, "the .kir or .onnx file")->required();
  auto model = std::make_shared<ModelOptions>();
  add_model_options(cmd, *model);
  cmd->callback([file, model] {
    auto graphs = load_graphs(*file, *model);  // the parser verifies each graph; errors carry file:line:column
    for (auto& g : graphs) {
      verify_or_throw(g);
      auto plural = [](size_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
      fmt::print("ok: graph {} ({}, {}, {})\n", g.name(), plural(g.inputs().size(), "input"),
                 plural(g.num_nodes(), "node"), plural(g.outputs().size(), "output"));
    }
  });
}

}  // namespace kiln::cli
