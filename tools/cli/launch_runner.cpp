// kiln launch's logic (launch.h). The ranks are started with posix_spawnp, each in a process
// group of its own, so that signalling the group also reaches whatever the rank started (a
// compiler, a data loader). Their stdout and stderr come back through pipes that one thread
// reads with poll() and writes out a whole line at a time; being the only writer, it can never
// interleave two ranks' lines. Signals reach the poll loop through a pipe (the self-pipe trick).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"
#include "tools/cli/launch.h"

extern char** environ;

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kKillAfterS = 5;                 // from SIGTERM to SIGKILL
constexpr int kPollCapMs = 250;                   // reaping does not rely on SIGCHLD alone
constexpr size_t kMaxLineBytes = size_t{1} << 20;  // a longer "line" is cut, not buffered forever
const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

std::string signal_name(int sig) {
  static const std::pair<int, const char*> names[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"}};
  for (const auto& [n, name] : names)
    if (n == sig) return name;
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return fmt::format("SIGRTMIN+{}", sig - SIGRTMIN);
  return fmt::format("signal {}", sig);
}

// now + s seconds (at most a year: a longer wait is forever, and must not overflow).
Clock::time_point after(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(s, 3.2e7)));
}

// Writes all of s, or gives up quietly when the reader has gone away (`kiln launch ... | head`):
// the ranks must still be run to the end and reaped.
void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n > 0) {
      s.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (!(n < 0 && errno == EINTR)) {
      return;
    }
  }
}

// A descriptor numbered 3 or more: a pipe end that landed on 0, 1 or 2 (a launcher started with
// its stdio closed) would be overwritten by the child's own redirections.
int above_stdio(int fd) {
  if (fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

struct Pipe {
  int read = -1;
  int write = -1;
};

// Both ends close-on-exec (a rank must not hold another rank's pipes, or their EOF would wait on
// it); the read end nonblocking, the write end not (the rank's writes must block, not fail).
std::optional<Pipe> make_pipe(bool nonblocking_write = false) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  Pipe p{above_stdio(fds[0]), above_stdio(fds[1])};
  if (p.read < 0 || p.write < 0) return std::nullopt;
  ::fcntl(p.read, F_SETFL, ::fcntl(p.read, F_GETFL) | O_NONBLOCK);
  if (nonblocking_write) ::fcntl(p.write, F_SETFL, ::fcntl(p.write, F_GETFL) | O_NONBLOCK);
  return p;
}

// The length of the first line of s from `from` (terminator included), or npos when s holds no
// whole line yet. A line ends at "\n", "\r\n" or a lone "\r": a progress bar redraws its line
// with "\r", and ending the line there shows each redraw, prefixed, as it comes. A "\r" that is
// the last byte may be the first half of "\r\n", so it waits for the next byte.
size_t line_end(std::string_view s, size_t from) {
  size_t i = s.find_first_of("\r\n", from);
  if (i == std::string_view::npos) return i;
  if (s[i] == '\n') return i + 1;
  if (i + 1 == s.size()) return std::string_view::npos;
  return s[i + 1] == '\n' ? i + 2 : i + 1;
}

// One of a rank's output pipes, relayed a whole line at a time to `dest`.
struct Stream {
  int fd = -1;  // the read end; -1 once closed
  int dest = -1;
  std::string prefix;
  std::string pending;  // what came after the last whole line

  // Writes out every whole line received (all of it at the end, with a newline added).
  void emit(bool at_end) {
    std::string out;
    size_t start = 0;
    for (size_t end; (end = line_end(pending, start)) != std::string::npos; start = end)
      out.append(prefix).append(pending, start, end - start);
    pending.erase(0, start);
    if (!pending.empty() && (at_end || pending.size() >= kMaxLineBytes)) {
      out.append(prefix).append(pending).push_back('\n');
      pending.clear();
    }
    write_all(dest, out);
  }

  // One read; at EOF (or an error) the rest is written out and the pipe closed.
  // Returns false when nothing more can be read now.
  bool read_some() {
    if (fd < 0) return false;
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      pending.append(buf, static_cast<size_t>(n));
      emit(false);
      return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
    close();
    return false;
  }

  // Everything already in the pipe: after its rank has exited, so that the rank's last words
  // are printed before the launcher's line about how it ended. Bounded, because something the
  // rank left running may hold the pipe and keep writing.
  void drain() {
    for (int reads = 0; reads < 64 && read_some(); ++reads) {
    }
  }

  void close() {
    if (fd < 0) return;
    emit(true);
    ::close(fd);
    fd = -1;
  }
};

int g_wake_fd = -1;  // the self-pipe's write end: all the signal handler touches

void wake_on_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  (void)!::write(g_wake_fd, &byte, 1);
  errno = saved;
}

// While it lives, the forwarded signals and SIGCHLD are written to a pipe that the poll loop
// watches, and SIGPIPE is ignored (an output reader that went away must not kill the launcher
// and orphan its ranks). The previous handlers come back when it goes.
class SignalRelay {
 public:
  SignalRelay() {
    std::optional<Pipe> p = make_pipe(/*nonblocking_write=*/true);  // a handler must never block
    if (!p) fail("cannot create a pipe: {}", std::strerror(errno));
    pipe_ = *p;
    g_wake_fd = pipe_.write;
    struct sigaction wake {};
    wake.sa_handler = wake_on_signal;
    wake.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&wake.sa_mask);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    for (int sig : kForwarded) install(sig, wake);
    install(SIGCHLD, wake);
    install(SIGPIPE, ignore);
  }
  ~SignalRelay() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) ::sigaction(it->first, &it->second, nullptr);
    g_wake_fd = -1;
    ::close(pipe_.read);
    ::close(pipe_.write);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return pipe_.read; }

  // The signals that arrived since the last call, in order.
  std::vector<int> take() {
    std::vector<int> sigs;
    unsigned char buf[64];
    for (ssize_t n; (n = ::read(pipe_.read, buf, sizeof buf)) > 0;) sigs.insert(sigs.end(), buf, buf + n);
    return sigs;
  }

 private:
  void install(int sig, const struct sigaction& action) {
    struct sigaction old {};
    ::sigaction(sig, &action, &old);
    saved_.emplace_back(sig, old);
  }

  Pipe pipe_;
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// A free TCP port on addr: bind port 0 there, read which port the kernel chose, close. (Another
// process may take it before rank 0 binds it; torchrun has the same window.)
int pick_free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int e = ::getaddrinfo(addr.c_str(), "0", &hints, &found); e != 0)
    fail("cannot resolve the master address '{}': {}", addr, ::gai_strerror(e));
  int port = 0;
  std::string why = "no address";
  for (addrinfo* a = found; a && port == 0; a = a->ai_next) {
    int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (::bind(s, a->ai_addr, a->ai_addrlen) == 0 && ::getsockname(s, reinterpret_cast<sockaddr*>(&bound), &len) == 0)
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    else
      why = std::strerror(errno);
    ::close(s);
  }
  ::freeaddrinfo(found);
  if (port == 0) fail("cannot find a free port on {} ({}); choose one with --master-port", addr, why);
  return port;
}

// The launcher's environment, less the variables it sets for the ranks, plus those.
std::vector<std::string> rank_environment(const LaunchOptions& o, int port, int rank) {
  const std::pair<const char*, std::string> set[] = {
      {"RANK", std::to_string(rank)},         {"LOCAL_RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nproc)}, {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"GROUP_RANK", "0"},                    {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view var(*e);
    std::string_view name = var.substr(0, var.find('='));
    if (std::none_of(std::begin(set), std::end(set), [&](const auto& kv) { return name == kv.first; }))
      env.emplace_back(var);
  }
  for (const auto& [name, value] : set) env.push_back(fmt::format("{}={}", name, value));
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;  // -1: never started
  bool running = false;
  Stream out, err;
};

enum class Phase {
  Running,      // no rank has failed
  Grace,        // one has; the others have until the deadline to end by themselves
  Terminating,  // the survivors were sent SIGTERM (or a forwarded signal); SIGKILL at the deadline
  Killed,       // the survivors were sent SIGKILL
};

class Launcher {
 public:
  Launcher(const LaunchOptions& o, int port) : o_(o), port_(port) {}

  int run() {
    start_ranks();
    while (std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; })) {
      poll_once();
      reap();
      if (deadline_ && Clock::now() >= *deadline_) on_deadline();
    }
    // What the ranks wrote last, and anything they left running wrote meanwhile: not waited for.
    for (Rank& r : ranks_)
      for (Stream* s : {&r.out, &r.err}) {
        s->drain();
        s->close();
      }
    if (first_failure_) return *first_failure_;
    return interrupted_by_ ? 128 + interrupted_by_ : 0;
  }

 private:
  void say(const std::string& line) { write_all(o_.err_fd, "kiln launch: " + line + "\n"); }

  void start_ranks() {
    ranks_.resize(static_cast<size_t>(o_.nproc));
    for (int r = 0; r < o_.nproc; ++r) {
      ranks_[static_cast<size_t>(r)].rank = r;
      if (std::optional<std::string> why = spawn(ranks_[static_cast<size_t>(r)])) {
        on_failure(127, fmt::format("rank {} could not start: {}", r, *why));
        if (r + 1 == o_.nproc - 1) say(fmt::format("rank {} was not started", r + 1));
        if (r + 1 < o_.nproc - 1) say(fmt::format("ranks {} to {} were not started", r + 1, o_.nproc - 1));
        return;
      }
    }
  }

  // Starts rank r: stdin /dev/null (a rank in a background process group that read the
  // terminal would be stopped), stdout and stderr into pipes, default signal handling.
  // Returns why it could not be started.
  std::optional<std::string> spawn(Rank& r) {
    std::optional<Pipe> out = make_pipe(), err = make_pipe();
    if (!out || !err) {
      std::string why = fmt::format("cannot create a pipe: {}", std::strerror(errno));
      for (const std::optional<Pipe>& p : {out, err}) {
        if (!p) continue;
        ::close(p->read);
        ::close(p->write);
      }
      return why;
    }
    std::vector<std::string> args = o_.command, env = rank_environment(o_, port_, r.rank);
    std::vector<char*> argv = c_strings(args), envp = c_strings(env);

    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&files, out->write, 1);
    posix_spawn_file_actions_adddup2(&files, err->write, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, numbered by its pid
    sigset_t to_default, none;
    sigemptyset(&to_default);
    for (int sig : kForwarded) sigaddset(&to_default, sig);
    sigaddset(&to_default, SIGCHLD);
    sigaddset(&to_default, SIGPIPE);  // ignored here, and an ignored signal stays so across exec
    posix_spawnattr_setsigdefault(&attr, &to_default);
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);

    pid_t pid = -1;
    int e = ::posix_spawnp(&pid, argv[0], &files, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&files);
    ::close(out->write);
    ::close(err->write);
    if (e != 0) {
      ::close(out->read);
      ::close(err->read);
      const std::string& program = o_.command[0];
      bool on_path = e == ENOENT && program.find('/') == std::string::npos;
      return fmt::format("cannot execute '{}': {}{}", program, std::strerror(e), on_path ? " (not found on PATH)" : "");
    }
    const std::string prefix = o_.prefix_output ? fmt::format("[rank {}] ", r.rank) : "";
    r.pid = pid;
    r.running = true;
    r.out = Stream{out->read, o_.out_fd, prefix, {}};
    r.err = Stream{err->read, o_.err_fd, prefix, {}};
    return std::nullopt;
  }

  // Waits for output, a signal, or the next deadline, and handles what came.
  void poll_once() {
    std::vector<pollfd> fds{{relay_.fd(), POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Rank& r : ranks_)
      for (Stream* s : {&r.out, &r.err})
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
    int timeout_ms = kPollCapMs;
    if (deadline_) {
      double left_ms = std::chrono::duration<double, std::milli>(*deadline_ - Clock::now()).count();
      timeout_ms = std::clamp(static_cast<int>(std::ceil(left_ms)), 0, kPollCapMs);
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // a timeout, or EINTR
    if (fds[0].revents) for (int sig : relay_.take()) on_signal(sig);
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) streams[i - 1]->read_some();
  }

  void reap() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      pid_t got = ::waitpid(r.pid, &status, WNOHANG);
      if (got == 0) continue;
      r.running = false;
      r.out.drain();
      r.err.drain();
      if (got < 0) {
        // Someone else reaped it (a SIGCHLD handler of the embedding program): its status is lost.
        on_failure(1, fmt::format("rank {} (pid {}) vanished: waitpid: {}", r.rank, r.pid, std::strerror(errno)));
      } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        on_failure(128 + sig, fmt::format("rank {} (pid {}) was killed by signal {} ({})", r.rank, r.pid, sig, signal_name(sig)));
      } else if (WEXITSTATUS(status) != 0) {
        on_failure(WEXITSTATUS(status), fmt::format("rank {} (pid {}) exited with status {}", r.rank, r.pid, WEXITSTATUS(status)));
      }
    }
  }

  // A rank failed. The first failure starts the grace period: the others should notice that a
  // peer is gone and fail with an error of their own, which is more use than being killed.
  // Ranks that end once the launcher has signalled them are not reported one by one.
  void on_failure(int exit_code, const std::string& what) {
    if (phase_ >= Phase::Terminating) return;
    say(what);
    if (first_failure_) return;
    first_failure_ = exit_code;
    phase_ = Phase::Grace;
    deadline_ = after(o_.grace_s);
  }

  void on_deadline() {
    if (phase_ == Phase::Grace) {
      say(fmt::format("terminating {} (still running {:g} s after the first failure): SIGTERM", running_ranks(), o_.grace_s));
      terminate(SIGTERM);
    } else if (phase_ == Phase::Terminating) {
      say(fmt::format("{} still running {:g} s after being signalled: SIGKILL", running_ranks(), kKillAfterS));
      kill_all();
    }
  }

  void on_signal(int sig) {
    if (sig == SIGCHLD) return;  // reap() looks at every rank after each poll
    if (phase_ == Phase::Killed) return;
    if (phase_ == Phase::Terminating) {
      say(fmt::format("{} again: SIGKILL to {}", signal_name(sig), running_ranks()));
      kill_all();
      return;
    }
    if (!interrupted_by_) interrupted_by_ = sig;
    say(fmt::format("got {}: forwarding it to {} (a second one sends SIGKILL)", signal_name(sig), running_ranks()));
    terminate(sig);
  }

  void terminate(int sig) {
    signal_running(sig);
    phase_ = Phase::Terminating;
    deadline_ = after(kKillAfterS);
  }

  void kill_all() {
    signal_running(SIGKILL);
    phase_ = Phase::Killed;
    deadline_.reset();
  }

  // To each running rank's process group: the rank and whatever it started.
  void signal_running(int sig) {
    for (const Rank& r : ranks_)
      if (r.running) ::kill(-r.pid, sig);
  }

  std::string running_ranks() const {
    std::vector<int> running;
    for (const Rank& r : ranks_)
      if (r.running) running.push_back(r.rank);
    return fmt::format("rank{} {}", running.size() == 1 ? "" : "s", fmt::join(running, ", "));
  }

  const LaunchOptions& o_;
  const int port_;
  SignalRelay relay_;  // before the ranks start, so that no signal is missed
  std::vector<Rank> ranks_;
  Phase phase_ = Phase::Running;
  std::optional<Clock::time_point> deadline_;
  std::optional<int> first_failure_;  // its exit code
  int interrupted_by_ = 0;            // the first forwarded signal
};

}  // namespace

int run_launch(const LaunchOptions& o) {
  if (o.nproc < 1) fail("-n must be at least 1 (got {})", o.nproc);
  if (o.command.empty() || o.command[0].empty()) fail("no program to launch (kiln launch -n N PROGRAM [ARGS...])");
  if (!(o.grace_s >= 0)) fail("the grace period must be 0 s or more (got {})", o.grace_s);
  if (o.master_port < 0 || o.master_port > 65535) fail("--master-port must be 0 to 65535 (got {})", o.master_port);
  const int port = o.master_port ? o.master_port : pick_free_port(o.master_addr);
  std::fflush(nullptr);  // what the program printed before comes before the ranks' output
  return Launcher(o, port).run();
}

}  // namespace kiln::cli
