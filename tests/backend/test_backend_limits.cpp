// Resource limits: a graph whose tensors cannot fit in memory is refused with the numbers before
// anything is compiled or allocated, sizes past 2^63 bytes are errors rather than overflows, and
// a kernel the device compiler rejects is reported with the compiler's message, the kernel and
// the graph nodes it computes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "ir/error.h"
#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Each test compiles into a kernel cache folder of its own, to see whether a compiler ran.
class ResourceLimits : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (const char* old = std::getenv("KILN_CACHE_DIR")) saved_ = old;
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("kiln_limits_" + std::to_string(rd()) + std::to_string(rd()));
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_) ::setenv("KILN_CACHE_DIR", saved_->c_str(), 1);
    else ::unsetenv("KILN_CACHE_DIR");
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    DeviceTest::TearDown();
  }
  bool compiler_ran() const { return fs::exists(dir_) && !fs::is_empty(dir_); }

  // The message of compiling `g` for the test device, or nullopt when it compiles: a CUDA
  // compile where no GPU is present knows no device memory to check against.
  std::optional<std::string> refusal(const Graph& g, backend::CompileOptions options = {}) {
    try {
      compile_for_test(g, options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::nullopt;
  }

  // The end of a refusal: the memory it did not fit in.
  static std::string budget_words() { return on_cuda() ? " of memory of cuda:0 (" : " of memory"; }

  fs::path dir_;

 private:
  std::optional<std::string> saved_;
};
KILN_DEVICE_TESTS(ResourceLimits);

#define KILN_SKIP_WITHOUT_DEVICE_MEMORY(message)                                                          \
  do {                                                                                                     \
    if (!(message)) {                                                                                      \
      ASSERT_TRUE(on_cuda()) << "the CPU always knows its memory";                                         \
      std::string why_;                                                                                    \
      ASSERT_FALSE(device_can_run(&why_)) << "a CUDA device's memory is checked at compile time";          \
      GTEST_SKIP() << "compiled without a memory check: " << why_;                                        \
    }                                                                                                      \
  } while (0)

// A 3.6 TB intermediate between two small inputs and a scalar output.
TEST_P(ResourceLimits, AnIntermediateTooLargeForMemoryIsRefusedBeforeCompiling) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(
      "graph huge(%a: f32[1000000,1], %b: f32[1,1000000]) {\n"
      "  %p = matmul(%a, %b) : f32[1000000,1000000]\n"
      "  %s = sum(%p) : f32[]\n"
      "  return (%s)\n"
      "}\n");
  std::optional<std::string> message = refusal(g);
  KILN_SKIP_WITHOUT_DEVICE_MEMORY(message);
  EXPECT_EQ(message->rfind("graph huge needs 3.6 TB to run (inputs 7.6 MB, intermediates 3.6 TB in its arena, outputs 4 B), "
                           "more than ",
                           0),
            0u)
      << *message;
  EXPECT_NE(message->find(budget_words()), std::string::npos) << *message;
  EXPECT_FALSE(compiler_ran()) << "refused before the device compiler ran";
}

// Inputs and outputs count too: a fused graph with no intermediate at all.
TEST_P(ResourceLimits, InputsAndOutputsTooLargeForMemoryAreRefused) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(
      "graph big(%x: f32[1000000,1000000]) {\n"
      "  %e = exp(%x) : f32[1000000,1000000]\n"
      "  %y = mul(%e, %x) : f32[1000000,1000000]\n"
      "  return (%y, %y)\n"
      "}\n");
  std::optional<std::string> message = refusal(g);
  KILN_SKIP_WITHOUT_DEVICE_MEMORY(message);
  // One output buffer, returned twice: its memory counts once.
  EXPECT_EQ(message->rfind("graph big needs 7.3 TB to run (inputs 3.6 TB, intermediates 0 B in its arena, outputs 3.6 TB), more than ", 0), 0u)
      << *message;
  EXPECT_FALSE(compiler_ran());
}

// A graph that fits is compiled and runs as before (the check refuses nothing it should not).
TEST_P(ResourceLimits, AGraphThatFitsRuns) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(
      "graph small(%a: f32[64,1], %b: f32[1,64]) {\n"
      "  %p = matmul(%a, %b) : f32[64,64]\n"
      "  %s = sum(%p) : f32[]\n"
      "  return (%s)\n"
      "}\n");
  expect_matches_reference(g);
}

// Sizes past int64: a tensor's bytes are an error where the text declares it; storage that a
// strided input addresses past 2^63 bytes is refused by the memory check, never wrapped around.
TEST_P(ResourceLimits, SizesPast2To63BytesAreErrors) {
  KILN_REQUIRE_JIT();
  try {
    parse_graph(
        "graph overflow(%x: f64[2305843009213693952]) {\n"
        "  %y = exp(%x) : f64[2305843009213693952]\n"
        "  return (%y)\n"
        "}\n");
    FAIL() << "a tensor of 2^64 bytes parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a f64[2305843009213693952] tensor holds more than 2^63 bytes"), std::string::npos)
        << e.what();
  }
  Graph g = parse_graph(
      "graph strided(%x: f32[2,2]{4611686018427387904,1}) {\n"
      "  %y = exp(%x) : f32[2,2]\n"
      "  return (%y)\n"
      "}\n");
  std::optional<std::string> message = refusal(g);
  KILN_SKIP_WITHOUT_DEVICE_MEMORY(message);
  EXPECT_EQ(message->rfind("graph strided needs more than 2^63 bytes to run (inputs more than 2^63 bytes, intermediates 0 B in its "
                           "arena, outputs 16 B), more than ",
                           0),
            0u)
      << *message;
}

// A kernel that fails to compile: the error names the kernel, the graph nodes it computes, and
// carries the compiler's own message. The CPU's clang is made to fail inside kernel k3 only (a
// macro that turns its name into a number; the prelude's own k0 and k1 are Philox keys);
// NVRTC rejects every kernel for an architecture it does not know, and the first in the
// schedule (k0) is reported.
TEST_P(ResourceLimits, AKernelThatFailsToCompileNamesItsNodes) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(
      "graph f(%x: f32[4,4]) {\n"
      "  %e = exp(%x) : f32[4,4]\n"
      "  %n = neg(%e) : f32[4,4]\n"
      "  %s = sigmoid(%n) : f32[4,4]\n"
      "  %t = tanh(%s) : f32[4,4]\n"
      "  return (%t)\n"
      "}\n");
  backend::CompileOptions options;
  options.fuse = false;  // one kernel per node: k0 computes %e, ..., k3 computes %t
  if (on_cuda()) options.arch = "sm_99";
  else options.jit.extra_args = {"-Dk3=1"};
  std::optional<std::string> message = refusal(g, options);
  ASSERT_TRUE(message) << "compiled";
  if (on_cuda()) {
    EXPECT_EQ(message->rfind("graph f: kernel k0 (%e = exp(%x) : f32[4,4]) failed to compile: NVRTC could not compile CUDA program "
                             "'f_k0' for sm_99",
                             0),
              0u)
        << *message;
    EXPECT_NE(message->find("error: invalid value for --gpu-architecture"), std::string::npos) << *message;
  } else {
    EXPECT_EQ(message->rfind("graph f: kernel k3 (%t = tanh(%s) : f32[4,4]) failed to compile: CPU JIT: the generated kernel does not "
                             "compile:\n",
                             0),
              0u)
        << *message;
    EXPECT_NE(message->find("error: expected unqualified-id"), std::string::npos) << "clang's diagnostic: " << *message;
    EXPECT_NE(message->find("extern \"C\" void k3("), std::string::npos) << "the source around it: " << *message;
  }
}

}  // namespace
}  // namespace kiln::testing
