// NVRTC compiles (no GPU needed): CUBINs for sm_80 and sm_90, errors quoting the source, the
// parallel driver, and the disk cache (hits, corrupt entries recompiled).
#if KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "ir/error.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/kernel_cache.h"
#include "tests/runtime/cuda_test_env.h"

namespace kiln::runtime::cuda::testing {
namespace {

namespace fs = std::filesystem;

std::string add_kernel(int value) {
  return "extern \"C\" __global__ void add(float* x, long n) {\n"
         "  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) x[i] += " +
         std::to_string(value) + ".0f;\n}\n";
}

bool is_elf(const std::string& bytes) { return bytes.size() > 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

NvrtcOptions no_cache() {
  NvrtcOptions options;
  options.use_cache = false;
  return options;
}

using NvrtcTest = CacheDirTest;

TEST_F(NvrtcTest, VersionIsMajorDotMinor) {
  std::string v = nvrtc_version();
  EXPECT_NE(v.find('.'), std::string::npos) << v;
  EXPECT_GE(std::stoi(v), 11);
}

TEST_F(NvrtcTest, CompilesAHeaderlessKernelForSm90AndSm80) {
  for (std::string arch : {"sm_90", "sm_80"}) {
    NvrtcOptions options;
    options.arch = arch;
    options.use_cache = false;
    NvrtcOutput out = compile_cuda(add_kernel(1), "add_" + arch, options);
    EXPECT_TRUE(is_elf(out.cubin)) << arch;
    EXPECT_NE(out.ptx.find(".entry add"), std::string::npos) << out.ptx;
    EXPECT_NE(out.ptx.find(".target " + arch), std::string::npos);
    EXPECT_FALSE(out.cache_hit);
    EXPECT_GT(out.compile_ms, 0.0);
    EXPECT_EQ(out.key.size(), 32u);
  }
}

TEST_F(NvrtcTest, SyntaxErrorQuotesTheLogAndTheSourceLine) {
  std::string source =
      "extern \"C\" __global__ void broken(float* x) {\n"
      "  float y = x[0]\n"
      "  x[1] = y + undefined_name;\n"
      "}\n";
  try {
    compile_cuda(source, "broken_kernel", no_cache());
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("broken_kernel.cu(3): error"), std::string::npos) << msg;  // NVRTC's log
    EXPECT_NE(msg.find("undefined_name"), std::string::npos) << msg;
    EXPECT_NE(msg.find("    3 |   x[1] = y + undefined_name;"), std::string::npos) << msg;  // the quoted line
  }
}

TEST_F(NvrtcTest, ParallelCompileKeepsTheOrder) {
  std::vector<std::pair<std::string, std::string>> programs;
  for (int i = 0; i < 8; ++i) programs.emplace_back("add" + std::to_string(i), add_kernel(i));
  std::vector<NvrtcOutput> outs = compile_cuda_parallel(programs, no_cache());
  ASSERT_EQ(outs.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(is_elf(outs[i].cubin));
    // The same program compiled alone gives the same key: results are in the order given.
    EXPECT_EQ(outs[i].key, compile_cuda(programs[i].second, programs[i].first, no_cache()).key);
  }
}

TEST_F(NvrtcTest, ParallelCompileRaisesTheFirstError) {
  std::vector<std::pair<std::string, std::string>> programs = {
      {"good", add_kernel(1)}, {"bad", "__global__ void k() { nope }"}, {"good2", add_kernel(2)}};
  try {
    compile_cuda_parallel(programs, no_cache());
    FAIL() << "expected a kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bad'"), std::string::npos) << e.what();
  }
}

TEST_F(NvrtcTest, SecondCompileIsACacheHitWithTheSameCubin) {
  NvrtcOutput cold = compile_cuda(add_kernel(3), "add3");
  EXPECT_FALSE(cold.cache_hit);
  KernelCache cache(dir_);
  EXPECT_TRUE(fs::is_regular_file(cache.path(cold.key, "cubin")));
  EXPECT_EQ(read_file(cache.path(cold.key, "cu")), add_kernel(3));
  EXPECT_EQ(read_file(cache.path(cold.key, "ptx")), cold.ptx);

  NvrtcOutput warm = compile_cuda(add_kernel(3), "add3");
  EXPECT_TRUE(warm.cache_hit);
  EXPECT_EQ(warm.compile_ms, 0.0);
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.ptx, cold.ptx);
  EXPECT_EQ(warm.key, cold.key);

  NvrtcOptions sm80;
  sm80.arch = "sm_80";
  EXPECT_NE(compile_cuda(add_kernel(3), "add3", sm80).key, cold.key) << "the architecture is in the key";
  NvrtcOptions lineinfo;
  lineinfo.lineinfo = true;
  EXPECT_FALSE(compile_cuda(add_kernel(3), "add3", lineinfo).cache_hit) << "so are the flags";
}

TEST_F(NvrtcTest, CorruptCachedCubinIsRecompiled) {
  NvrtcOutput cold = compile_cuda(add_kernel(4), "add4");
  fs::path cubin = KernelCache(dir_).path(cold.key, "cubin");
  std::string good = read_file(cubin);
  {
    std::fstream f(cubin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(cubin) / 2));
    f.write("\xde\xad\xbe\xef", 4);
  }
  NvrtcOutput again = compile_cuda(add_kernel(4), "add4");
  EXPECT_FALSE(again.cache_hit);
  EXPECT_EQ(again.cubin, cold.cubin);
  EXPECT_EQ(read_file(cubin), good) << "the entry is rewritten";
  EXPECT_TRUE(compile_cuda(add_kernel(4), "add4").cache_hit);
}

TEST_F(NvrtcTest, CacheOffWritesNothing) {
  ::setenv("KILN_CACHE_DIR", "off", 1);
  EXPECT_FALSE(compile_cuda(add_kernel(5), "add5").cache_hit);
  EXPECT_FALSE(compile_cuda(add_kernel(5), "add5").cache_hit);
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace kiln::runtime::cuda::testing
#endif
