#pragma once
// Shared by the CUDA runtime tests: a private kernel cache folder per test (KILN_CACHE_DIR), and
// a fixture for the tests that need a GPU, skipped with the driver's reason where none is.
#if KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "runtime/cuda/driver.h"

namespace kiln::runtime::cuda::testing {

class CacheDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("KILN_CACHE_DIR")) saved_ = old;
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / ("kiln_cuda_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
    ::setenv("KILN_CACHE_DIR", dir_.string().c_str(), 1);
  }
  void TearDown() override {
    if (saved_) ::setenv("KILN_CACHE_DIR", saved_->c_str(), 1);
    else ::unsetenv("KILN_CACHE_DIR");
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::filesystem::path dir_;

 private:
  std::optional<std::string> saved_;
};

// For tests that run on a GPU: skipped (with the reason) where the driver sees none.
class GpuTest : public CacheDirTest {
 protected:
  void SetUp() override {
    std::string why;
    if (!driver_available(&why)) GTEST_SKIP() << why;
    CacheDirTest::SetUp();
  }
};

}  // namespace kiln::runtime::cuda::testing
#endif
