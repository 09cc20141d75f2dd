#pragma once
// Each JIT test gets a kernel cache folder of its own (KILN_CACHE_DIR) and an empty in-memory
// cache, so that tests do not see each other's kernels; the environment is restored after.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "runtime/cpu/jit.h"

namespace kiln::runtime::cpu::testing {

class JitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!jit_available()) GTEST_SKIP() << "kiln was built without the LLVM CPU path";
    if (const char* old = std::getenv("KILN_CACHE_DIR")) saved_ = old;
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / ("kiln_jit_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
    set_cache_dir(dir_.string());
    clear_in_memory_cache();
  }
  void TearDown() override {
    if (saved_) ::setenv("KILN_CACHE_DIR", saved_->c_str(), 1);
    else ::unsetenv("KILN_CACHE_DIR");
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
    clear_in_memory_cache();
  }
  static void set_cache_dir(const std::string& dir) { ::setenv("KILN_CACHE_DIR", dir.c_str(), 1); }

  std::filesystem::path dir_;

 private:
  std::optional<std::string> saved_;
};

}  // namespace kiln::runtime::cpu::testing
