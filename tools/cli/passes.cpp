// kiln passes FILE.kir --pipeline dce,cse,... [--dump-dir DIR]
#include "tools/cli/commands.h"
#include "ir/error.h"

namespace kiln::cli {

void add_passes_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("passes", "Run a pipeline of graph passes and print the result");
  auto file = std::make_shared<std::string>();
  cmd->add_option("file", *file, "the .kir file")->required();
  cmd->callback([] { fail("the pass manager is not built yet"); });
}

}  // namespace kiln::cli
