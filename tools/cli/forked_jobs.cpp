#include "tools/cli/forked_jobs.h"

#include <execinfo.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ir/error.h"
#include "tools/cli/device.h"

namespace kiln::cli {

namespace {

// A job that crashes says where on stderr: its signal and the stack, raw addresses with the
// binary's offsets (`addr2line -e kiln` names them), before dying of the signal as it would
// have. Only async-signal-safe calls in the handler.
int crash_job = -1;
char crash_command[32] = "kiln";
void on_crash(int sig) {
  char head[128];
  int n = std::snprintf(head, sizeof head, "%s: job %d crashed with signal %d; its stack:\n", crash_command, crash_job, sig);
  if (n > 0) (void)!::write(STDERR_FILENO, head, static_cast<size_t>(n));
  void* frames[64];
  int depth = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
void print_a_backtrace_on_a_crash(const std::string& command, int job) {
  crash_job = job;
  std::snprintf(crash_command, sizeof crash_command, "%s", command.c_str());
  void* warm[1];
  ::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, on_crash);
}

}  // namespace

std::string escape_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\t') ch = ' ';
  return s;
}

std::vector<std::string> run_forked_jobs(const std::string& command, int jobs, const std::function<void(int job)>& body) {
  // Each job compiles its NVRTC programs on its share of the cores (unless the user chose), so
  // that J jobs do not start J x cores compiles at once: fewer, larger programs are cheaper.
  if (const char* set = std::getenv("KILN_COMPILE_THREADS"); jobs > 1 && !(set && *set)) {
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    ::setenv("KILN_COMPILE_THREADS", std::to_string(std::max(1u, cores / static_cast<unsigned>(jobs))).c_str(), 1);
  }
  std::fflush(nullptr);  // nothing buffered is printed twice by the children
  std::vector<pid_t> pids;
  for (int j = 0; j < jobs; ++j) {
    pid_t pid = fork();
    if (pid < 0) fail("{}: fork failed", command);
    if (pid == 0) {
      print_a_backtrace_on_a_crash(command, j);
      int rc = 0;
      try {
        body(j);
      } catch (const std::exception& e) {
        fmt::print(stderr, "{}: job {}: {}\n", command, j, e.what());
        rc = 3;
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<std::string> endings;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) endings.emplace_back();
    else endings.push_back(WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status)) : fmt::format("exit {}", WEXITSTATUS(status)));
  }
  return endings;
}

void require_runnable_in_a_child(const Device& device, const std::string& command) {
  int fds[2];
  if (::pipe(fds) != 0) fail("{}: pipe failed", command);
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) fail("{}: fork failed", command);
  if (pid == 0) {
    ::close(fds[0]);
    std::string message;
    try {
      require_runnable(device, command);
    } catch (const std::exception& e) {
      message = e.what();
    }
    if (!message.empty()) (void)!::write(fds[1], message.data(), message.size());
    ::close(fds[1]);
    _exit(message.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(got));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!message.empty()) throw kiln::Error(message);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("{}: checking that {} can run graphs crashed", command, device.str());
}

}  // namespace kiln::cli
