#pragma once
// A fixture for tests of the kiln program, run as a user would: each test gets its own
// temporary folder, writes small files into it, runs the binary (KILN_BINARY, defined by
// tests/CMakeLists.txt for the tools tests) there and checks exit code, stdout and stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/support.h"

namespace kiln::testing {

struct CliResult {
  int rc;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("kiln_") + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  // A failing test leaves its folder behind to look at.
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  // Runs `kiln ARGS` in the test's folder (arguments pass through the shell as written), with
  // `env` ("NAME=value ...") added to its environment.
  CliResult kiln(const std::string& args, const std::string& env = "") const {
    int status = std::system((command(args, env) + " > '" + path("stdout.txt") + "'").c_str());
    return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(path("stdout.txt")),
                     read_text(path("stderr.txt"))};
  }
  // As kiln(), for long runs: each line the program prints is printed here too as it comes, so
  // that a run ctest stops at its timeout still shows how far it got.
  CliResult kiln_streaming(const std::string& args, const std::string& env = "") const {
    FILE* pipe = ::popen(command(args, env).c_str(), "r");
    if (!pipe) return CliResult{-1, "", "popen failed"};
    std::string out;
    char line[4096];
    while (std::fgets(line, sizeof line, pipe)) {
      out += line;
      std::fputs(line, stdout);
      std::fflush(stdout);
    }
    int status = ::pclose(pipe);
    return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, read_text(path("stderr.txt"))};
  }

 private:
  std::string command(const std::string& args, const std::string& env) const {
    return "cd '" + dir_.string() + "' && " + (env.empty() ? "" : "env " + env + " ") + "'" KILN_BINARY "' " + args +
           " 2> '" + path("stderr.txt") + "'";
  }

 protected:
  std::filesystem::path dir_;
};

}  // namespace kiln::testing
