#pragma once
// `kiln launch -n N PROGRAM ARGS...`: starts N processes of one program as the ranks of a
// process group on this machine, like `torchrun --nproc-per-node N`. Each rank gets the
// environment torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR, MASTER_PORT) on top of the launcher's own, so NCCL_* settings pass through.
// Its output comes back line by line, "[rank R] "-prefixed; when one rank fails, the others
// get a grace period to fail on their own (and say why) before they are terminated.
#include <string>
#include <vector>

namespace kiln::cli {

struct LaunchOptions {
  int nproc = 1;                         // -n: ranks to start, at least 1
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                   // 0: a free port, found by binding port 0 on master_addr
  double grace_s = 30;                   // after the first rank fails, how long the others get to
                                         // fail on their own before they are sent SIGTERM
  bool prefix_output = true;             // "[rank R] " before each line of a rank's output
  std::vector<std::string> command;      // the program (looked up on PATH) and its arguments
  // Where the ranks' stdout and stderr lines, and the launcher's own messages (on err_fd), go.
  // The program's are 1 and 2; tests point them at files to read what was printed.
  int out_fd = 1;
  int err_fd = 2;
};

// Runs the group until every rank has been reaped, and returns the exit status `kiln launch`
// should exit with: 0 when every rank exits 0; otherwise the first failing rank's exit code
// (128+N for signal N; 127 for a program that cannot be executed). SIGINT or SIGTERM sent to
// the launcher while it runs is forwarded to every rank (a second one sends SIGKILL), and the
// result is then 128+that signal unless a rank had failed first.
// Bad options (nproc < 1, an empty command, no free port) are kiln::Error.
// Not reentrant: it installs process-wide handlers for SIGINT, SIGTERM and SIGCHLD (and
// ignores SIGPIPE) while it runs, and restores the previous ones before it returns.
int run_launch(const LaunchOptions& o);

}  // namespace kiln::cli
