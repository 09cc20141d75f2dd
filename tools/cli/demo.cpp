// kiln demo
#include "tools/cli/commands.h"
#include "ir/error.h"

namespace kiln::cli {

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Trace a small GPT, optimize it, draw it and run it");
  cmd->callback([] { fail("the frontend is not built yet"); });
}

}  // namespace kiln::cli
