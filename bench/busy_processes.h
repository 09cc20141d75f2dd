#pragma once
// Child processes that each spin on a core until this object goes away (also when a test's
// assertion fails): the "other work" beside kiln in bench/busy_cores.cpp and the busy-core test.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace kiln::bench {

class BusyProcesses {
 public:
  explicit BusyProcesses(int n) {
    for (int i = 0; i < n; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) {
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BusyProcesses() {
    for (pid_t p : pids_) ::kill(p, SIGKILL);
    for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
  }
  BusyProcesses(const BusyProcesses&) = delete;
  BusyProcesses& operator=(const BusyProcesses&) = delete;
  // How many started (fork can fail).
  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace kiln::bench
