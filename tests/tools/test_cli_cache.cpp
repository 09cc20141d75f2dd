// One kernel cache folder shared by many kiln processes at once, as on a machine where several
// jobs compile the same models: every process gets results that match the reference
// interpreter, and the folder ends up holding whole entries that a later process loads without
// compiling. CPU objects through `kiln run --device cpu --check`; CUBINs through `kiln compile
// --device cuda` (NVRTC needs no GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/cli_fixture.h"
#include "tests/support/support.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

class CliCache : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    for (const char* name : {"KILN_CACHE_DIR", "KILN_LOGS"})
      if (const char* v = std::getenv(name)) saved_.emplace_back(name, v);
      else saved_.emplace_back(name, std::nullopt);
    ::setenv("KILN_CACHE_DIR", path("cache").c_str(), 1);
    ::unsetenv("KILN_LOGS");
    write("attention.kir",
          "graph attention(%x: f32[16,32], %w: f32[48,32], %b: f32[48]) {\n"
          "  %y = linear(%x, %w, %b) : f32[16,48]\n"
          "  %p = softmax(%y, dim=-1) : f32[16,48]\n"
          "  return (%p)\n"
          "}\n");
    write("norm.kir",
          "graph norm(%x: f32[24,40]) {\n"
          "  %m = mean(%x, dim=[1], keepdim=true) : f32[24,1]\n"
          "  %c = sub(%x, %m) : f32[24,40]\n"
          "  %r = relu(%c) : f32[24,40]\n"
          "  %s = sum(%r, dim=[1]) : f32[24]\n"
          "  return (%r, %s)\n"
          "}\n");
  }
  void TearDown() override {
    for (auto& [name, value] : saved_)
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    CliTest::TearDown();
  }

  // Runs `kiln ARGS` in `n` processes started together (the cache folder from the environment),
  // where "{I}" in ARGS stands for the process's number; returns the exit codes and leaves each
  // process's output in out_I.txt.
  std::vector<int> at_once(int n, const std::string& args) const {
    std::string sh = "cd '" + dir_.string() + "' || exit 1\n";
    for (int i = 0; i < n; ++i) {
      std::string a = args;
      for (size_t at; (at = a.find("{I}")) != std::string::npos;) a.replace(at, 3, std::to_string(i));
      sh += fmt::format("( {} ; echo $? > rc_{}.txt ) > out_{}.txt 2>&1 &\n", a, i, i);
    }
    sh += "wait\n";
    write("at_once.sh", sh);
    EXPECT_EQ(std::system(("sh '" + path("at_once.sh") + "'").c_str()), 0);
    std::vector<int> rcs;
    for (int i = 0; i < n; ++i) {
      std::string rc = read_text(path(fmt::format("rc_{}.txt", i)));
      rcs.push_back(rc.empty() ? -1 : std::stoi(rc));
    }
    return rcs;
  }

  size_t cache_files(const std::string& ext) const {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(path("cache"))) n += e.path().extension() == ext;
    return n;
  }
  size_t temp_files() const {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(path("cache")))
      n += e.path().filename().string().find(".tmp.") != std::string::npos;
    return n;
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(CliCache, ManyProcessesCompileTheSameGraphsOnTheCpu) {
  constexpr int kProcesses = 6;
  // Half run the graphs in one order, half in the other, so that writers and readers meet.
  const std::string kiln_run = "'" KILN_BINARY "' run";
  std::vector<int> rcs = at_once(kProcesses, "if [ $(({I} % 2)) = 0 ]; then set -- attention norm; else set -- norm attention; fi; " +
                                                 kiln_run + " $1.kir --device cpu --check --seed {I} && " + kiln_run +
                                                 " $2.kir --device cpu --check --seed {I}");
  for (int i = 0; i < kProcesses; ++i) {
    std::string out = read_text(path(fmt::format("out_{}.txt", i)));
    EXPECT_EQ(rcs[static_cast<size_t>(i)], 0) << "process " << i << ":\n" << out;
    EXPECT_EQ(occurrences(out, ": PASS "), 3) << "process " << i << ": every output matches the interpreter\n" << out;
    EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  }
  EXPECT_EQ(cache_files(".o"), 2u) << "one object per graph";
  EXPECT_EQ(cache_files(".cpp"), 2u);
  EXPECT_EQ(temp_files(), 0u);

  // A later process finds whole entries: both graphs load from the disk, clang never runs.
  ::setenv("KILN_LOGS", "cache", 1);
  for (const char* graph : {"attention", "norm"}) {
    CliResult warm = kiln(fmt::format("run {}.kir --device cpu --check", graph));
    EXPECT_EQ(warm.rc, 0) << warm.out << warm.err;
    EXPECT_EQ(occurrences(warm.err, "disk hit"), 1) << graph << ":\n" << warm.err;
    EXPECT_EQ(warm.err.find("] compiled"), std::string::npos) << graph << ": clang ran again\n" << warm.err;
    EXPECT_EQ(warm.err.find("corrupt"), std::string::npos) << warm.err;
  }
}

#if KILN_HAVE_CUDA
TEST_F(CliCache, ManyProcessesCompileTheSameGraphsForCuda) {
  constexpr int kProcesses = 6;
  const std::string kiln_compile = "'" KILN_BINARY "' compile";
  std::vector<int> rcs = at_once(kProcesses, kiln_compile + " attention.kir --device cuda && " + kiln_compile + " norm.kir --device cuda");
  for (int i = 0; i < kProcesses; ++i)
    EXPECT_EQ(rcs[static_cast<size_t>(i)], 0) << "process " << i << ":\n" << read_text(path(fmt::format("out_{}.txt", i)));
  size_t cubins = cache_files(".cubin");
  EXPECT_GE(cubins, 2u);
  EXPECT_EQ(cache_files(".cu"), cubins) << "each CUBIN beside its source";
  EXPECT_EQ(temp_files(), 0u);
  for (const char* graph : {"attention", "norm"}) {
    CliResult warm = kiln(fmt::format("compile {}.kir --device cuda", graph));
    EXPECT_EQ(warm.rc, 0) << warm.out << warm.err;
    // "nvrtc 11.8: 3 kernels for sm_90 (3 distinct, 3 from the cache), ...": every kernel loaded, none compiled.
    size_t at = warm.out.find(" kernels for ");
    ASSERT_NE(at, std::string::npos) << warm.out;
    std::string kernels = warm.out.substr(warm.out.rfind(' ', at - 1) + 1, at - warm.out.rfind(' ', at - 1) - 1);
    EXPECT_NE(warm.out.find(", " + kernels + " from the cache)"), std::string::npos) << graph << ":\n" << warm.out;
  }
}
#endif

}  // namespace
}  // namespace kiln::testing
