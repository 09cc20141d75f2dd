// kiln launch -n N PROGRAM [ARGS...]: N processes of one program as the ranks of a process
// group, like torchrun --nproc-per-node N (the logic is launch_runner.cpp's).
#include <cstdlib>
#include <memory>

#include "tools/cli/commands.h"
#include "tools/cli/launch.h"

namespace kiln::cli {

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand("launch", "Start N processes of a program as the ranks of a process group (like torchrun)");
  cmd->add_option("-n,--nproc", o->nproc, "ranks to start")->capture_default_str();
  cmd->add_option("--master-addr", o->master_addr, "MASTER_ADDR for the ranks")->capture_default_str();
  cmd->add_option("--master-port", o->master_port, "MASTER_PORT for the ranks (0: a free port)")->capture_default_str();
  cmd->add_option("--grace", o->grace_s, "seconds the other ranks get to fail on their own after one fails")->capture_default_str();
  cmd->add_flag("!--no-prefix", o->prefix_output, "do not prefix each output line with \"[rank R] \"");
  // Everything from PROGRAM on is the ranks' own (their -n, --help): not kiln's to parse.
  cmd->add_option("command", o->command, "the program and its arguments (after -- if it starts with -)");
  cmd->positionals_at_end();
  cmd->callback([o] { std::exit(run_launch(*o)); });
}

}  // namespace kiln::cli
