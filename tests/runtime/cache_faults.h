#pragma once
// Faults for the kernel cache tests (runtime/kernel_cache.h), made by the operating system rather
// than by a seam in the code: a full disk (RLIMIT_FSIZE: writes past the limit fail with EFBIG
// partway, as they fail with ENOSPC on a full disk), a read-only folder (chmod, with root's
// CAP_DAC_OVERRIDE dropped where the tests run as root), and several processes at once (fork).
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace kiln::runtime::testing {

namespace fs = std::filesystem;

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Regular files under `dir` (entries and any temp file left behind).
inline size_t regular_files_under(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  size_t n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) n += entry.is_regular_file();
  return n;
}

// Temp files left under `dir` (the cache writes NAME.tmp.* and renames it into place).
inline size_t temp_files_under(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  size_t n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    n += entry.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

inline void flip_bytes_in_the_middle(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
  f.write("\xde\xad\xbe\xef", 4);
}

// A full disk for this process while it lives: a file written past `bytes` fails (EFBIG) after
// the first `bytes`. SIGXFSZ, which would kill the process, is ignored meanwhile.
class FullDisk {
 public:
  explicit FullDisk(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FullDisk() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = SIG_DFL;
  bool ok_ = false;
};

// Makes `dir` and every folder under it read-only (0555) while it lives, for this thread: root
// ignores permissions through CAP_DAC_OVERRIDE, so where the tests run as root that capability
// is dropped from this thread's effective set (it stays permitted and comes back after).
// Capabilities are per thread: the cache is written on the compiling thread, this one.
// works() says whether a write into `dir` is refused now; a test skips where it is not.
class ReadOnlyFolder {
 public:
  explicit ReadOnlyFolder(fs::path dir) : dir_(std::move(dir)) {
    set_mode(0555);
    if (::geteuid() == 0) {
      header_.version = _LINUX_CAPABILITY_VERSION_3;
      header_.pid = 0;
      if (::syscall(SYS_capget, &header_, saved_) == 0) {
        __user_cap_data_struct lowered[2] = {saved_[0], saved_[1]};
        lowered[CAP_TO_INDEX(CAP_DAC_OVERRIDE)].effective &= ~CAP_TO_MASK(CAP_DAC_OVERRIDE);
        dropped_ = ::syscall(SYS_capset, &header_, lowered) == 0;
      }
    }
    fs::path probe = dir_ / "write_probe";
    std::ofstream(probe) << "x";
    works_ = !fs::exists(probe);
    std::error_code ignored;
    fs::remove(probe, ignored);
  }
  ~ReadOnlyFolder() {
    if (dropped_) ::syscall(SYS_capset, &header_, saved_);
    set_mode(0755);
  }
  ReadOnlyFolder(const ReadOnlyFolder&) = delete;
  ReadOnlyFolder& operator=(const ReadOnlyFolder&) = delete;
  bool works() const { return works_; }

 private:
  void set_mode(mode_t mode) {
    ::chmod(dir_.c_str(), mode);
    for (const auto& entry : fs::recursive_directory_iterator(dir_))
      if (entry.is_directory()) ::chmod(entry.path().c_str(), mode);
  }
  fs::path dir_;
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool dropped_ = false;
  bool works_ = false;
};

// Runs `child` in `n` forked processes that start together (they wait on a pipe that the parent
// closes once all exist), and returns each one's exit status (0: it succeeded). `child`
// returns whether it succeeded; a child never returns into the test (it ends with _exit).
inline std::vector<int> run_processes(int n, const std::function<bool(int)>& child) {
  int gate[2];
  if (::pipe(gate) != 0) return std::vector<int>(static_cast<size_t>(n), -1);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) > 0) {
      }
      bool ok = false;
      try {
        ok = child(i);
      } catch (...) {
        ok = false;
      }
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // all start now
  std::vector<int> status;
  for (pid_t pid : pids) {
    int s = 0;
    if (pid < 0 || ::waitpid(pid, &s, 0) != pid) status.push_back(-1);
    else status.push_back(WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s));
  }
  return status;
}

}  // namespace kiln::runtime::testing
