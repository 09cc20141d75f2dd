// NVRTC compiles (no GPU needed): CUBINs for sm_80 and sm_90, errors quoting the source, the
// parallel driver, and the disk cache: hits, and the same faults as the CPU's objects
// (tests/runtime/test_kernel_cache.cpp) ending in a recompile with the same CUBIN: corrupt,
// empty and non-ELF CUBINs, a missing or damaged .cu or .ptx, a read-only or uncreatable
// folder, a full disk, and several processes compiling the same kernels at once.
#if KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <random>

#include "ir/error.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/kernel_cache.h"
#include "tests/runtime/cache_faults.h"
#include "tests/runtime/cuda_test_env.h"

namespace kiln::runtime::cuda::testing {
namespace {

namespace fs = std::filesystem;
using runtime::testing::flip_bytes_in_the_middle;
using runtime::testing::FullDisk;
using runtime::testing::ReadOnlyFolder;
using runtime::testing::regular_files_under;
using runtime::testing::run_processes;
using runtime::testing::temp_files_under;

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

// Damages the entry of a cold compile, then checks that the next compile misses, gives the same
// CUBIN and PTX, rewrites the entry whole, and that the one after hits.
template <typename Damage>
void check_cubin_repaired(const fs::path& dir, int value, Damage damage) {
  std::string name = "add" + std::to_string(value);
  NvrtcOutput cold = compile_cuda(add_kernel(value), name);
  ASSERT_FALSE(cold.cache_hit);
  KernelCache cache(dir);
  std::map<std::string, std::string> before;
  for (const char* ext : {"cubin", "cu", "ptx"}) before[ext] = read_file(cache.path(cold.key, ext));
  damage(cache, cold.key);
  NvrtcOutput again = compile_cuda(add_kernel(value), name);
  EXPECT_FALSE(again.cache_hit);
  EXPECT_EQ(again.cubin, cold.cubin);
  EXPECT_EQ(again.ptx, cold.ptx);
  for (const char* ext : {"cubin", "cu", "ptx"}) EXPECT_EQ(read_file(cache.path(cold.key, ext)), before[ext]) << ext << " rewritten";
  EXPECT_EQ(temp_files_under(dir), 0u);
  NvrtcOutput warm = compile_cuda(add_kernel(value), name);
  EXPECT_TRUE(warm.cache_hit);
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.ptx, cold.ptx);
}

TEST_F(NvrtcTest, EmptyCubinIsRecompiled) {
  check_cubin_repaired(dir_, 20, [](KernelCache& c, const std::string& key) { fs::resize_file(c.path(key, "cubin"), 0); });
}

TEST_F(NvrtcTest, TruncatedCubinIsRecompiled) {
  check_cubin_repaired(dir_, 21, [](KernelCache& c, const std::string& key) {
    fs::resize_file(c.path(key, "cubin"), fs::file_size(c.path(key, "cubin")) - 1);
  });
}

TEST_F(NvrtcTest, IntactHeaderAroundANonElfIsRecompiled) {
  // Bytes that pass every checksum but are no ELF image: refused before a driver sees them.
  check_cubin_repaired(dir_, 22, [](KernelCache& c, const std::string& key) {
    std::string cu = read_file(c.path(key, "cu")), ptx = read_file(c.path(key, "ptx"));
    ASSERT_TRUE(c.store(key, {{"cu", cu, true}, {"cubin", "not an ELF image"}, {"ptx", ptx, true}}));
  });
}

TEST_F(NvrtcTest, MissingSourceOrPtxVoidsTheEntry) {
  check_cubin_repaired(dir_, 23, [](KernelCache& c, const std::string& key) { fs::remove(c.path(key, "cu")); });
  check_cubin_repaired(dir_, 24, [](KernelCache& c, const std::string& key) { fs::remove(c.path(key, "ptx")); });
  check_cubin_repaired(dir_, 25, [](KernelCache& c, const std::string& key) { fs::remove(c.path(key, "cubin")); });
}

TEST_F(NvrtcTest, DamagedPtxVoidsTheEntry) {
  check_cubin_repaired(dir_, 26, [](KernelCache& c, const std::string& key) { flip_bytes_in_the_middle(c.path(key, "ptx")); });
  check_cubin_repaired(dir_, 27, [](KernelCache& c, const std::string& key) { fs::resize_file(c.path(key, "ptx"), 0); });
}

TEST_F(NvrtcTest, ReadOnlyFolder) {
  NvrtcOutput kept = compile_cuda(add_kernel(30), "add30");
  NvrtcOutput damaged = compile_cuda(add_kernel(31), "add31");
  KernelCache cache(dir_);
  flip_bytes_in_the_middle(cache.path(damaged.key, "cubin"));
  {
    ReadOnlyFolder read_only(dir_);
    if (!read_only.works()) GTEST_SKIP() << "cannot make a folder read-only here (root without capset?)";
    NvrtcOutput hit = compile_cuda(add_kernel(30), "add30");
    EXPECT_TRUE(hit.cache_hit) << "a read-only cache still serves its entries";
    EXPECT_EQ(hit.cubin, kept.cubin);
    NvrtcOutput recompiled = compile_cuda(add_kernel(31), "add31");
    EXPECT_FALSE(recompiled.cache_hit);
    EXPECT_EQ(recompiled.cubin, damaged.cubin);
    NvrtcOutput fresh = compile_cuda(add_kernel(32), "add32");
    EXPECT_FALSE(fresh.cache_hit);
    EXPECT_TRUE(is_elf(fresh.cubin));
    EXPECT_FALSE(fs::exists(cache.path(fresh.key, "cubin")));
  }
  EXPECT_EQ(regular_files_under(dir_), 6u) << "two entries, no temp files";
  EXPECT_FALSE(compile_cuda(add_kernel(31), "add31").cache_hit) << "repaired once writable";
  EXPECT_TRUE(compile_cuda(add_kernel(31), "add31").cache_hit);
}

TEST_F(NvrtcTest, UncreatableFolderStillCompiles) {
  fs::path file = dir_ / "a_file";
  std::ofstream(file) << "not a folder";
  ::setenv("KILN_CACHE_DIR", (file / "cache").c_str(), 1);
  for (int round = 0; round < 2; ++round) {
    NvrtcOutput out = compile_cuda(add_kernel(33), "add33");
    EXPECT_FALSE(out.cache_hit);
    EXPECT_TRUE(is_elf(out.cubin));
  }
}

TEST_F(NvrtcTest, FullDiskLeavesNoPartialEntry) {
  NvrtcOutput reference = compile_cuda(add_kernel(34), "add34", no_cache());
  for (rlim_t room : {rlim_t{0}, static_cast<rlim_t>(add_kernel(34).size() + 40)}) {
    SCOPED_TRACE("room for " + std::to_string(room) + " bytes per file");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    NvrtcOutput out;
    {
      FullDisk full(room);
      ASSERT_TRUE(full.ok());
      out = compile_cuda(add_kernel(34), "add34");
    }
    EXPECT_FALSE(out.cache_hit);
    EXPECT_EQ(out.cubin, reference.cubin);
    EXPECT_FALSE(fs::exists(KernelCache(dir_).path(out.key, "cubin"))) << "no partial CUBIN";
    EXPECT_LE(regular_files_under(dir_), 2u) << "texts at most, and no temp file";
    NvrtcOutput again = compile_cuda(add_kernel(34), "add34");
    EXPECT_FALSE(again.cache_hit);
    EXPECT_EQ(regular_files_under(dir_), 3u);
    EXPECT_TRUE(compile_cuda(add_kernel(34), "add34").cache_hit);
  }
}

TEST_F(NvrtcTest, ManyProcessesCompileTheSameKernelsAtOnce) {
  constexpr int kProcesses = 6, kKernels = 4;
  std::vector<std::string> cubins;
  for (int i = 0; i < kKernels; ++i) cubins.push_back(compile_cuda(add_kernel(40 + i), "add", no_cache()).cubin);
  std::vector<int> status = run_processes(kProcesses, [&](int child) {
    std::vector<int> order = {0, 1, 2, 3};
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(child)));
    for (int i : order)
      if (compile_cuda(add_kernel(40 + i), "add").cubin != cubins[static_cast<size_t>(i)]) return false;
    return true;
  });
  EXPECT_EQ(status, std::vector<int>(kProcesses, 0)) << "every process got the right CUBINs";
  EXPECT_EQ(regular_files_under(dir_), 3u * kKernels) << "whole entries, no temp files";
  for (int i = 0; i < kKernels; ++i) {
    NvrtcOutput warm = compile_cuda(add_kernel(40 + i), "add");
    EXPECT_TRUE(warm.cache_hit) << i;
    EXPECT_EQ(warm.cubin, cubins[static_cast<size_t>(i)]);
  }
}

TEST_F(NvrtcTest, CacheOffWritesNothing) {
  ::setenv("KILN_CACHE_DIR", "off", 1);
  EXPECT_FALSE(compile_cuda(add_kernel(5), "add5").cache_hit);
  EXPECT_FALSE(compile_cuda(add_kernel(5), "add5").cache_hit);
  EXPECT_TRUE(fs::is_empty(dir_));
}


// ---- kernels that share a prelude, dealt into few programs (compile_cuda_kernels)

constexpr const char* kPrelude = "__device__ __forceinline__ float twice(float x) { return 2.0f * x; }\n";

// A kernel named `name` that adds `value` (twice'd, so it needs the prelude).
CudaKernelSource prelude_kernel(const std::string& name, int value) {
  return {"graph_" + name, "extern \"C\" __global__ void " + name + "(float* x, long n) {\n"
                               "  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "  if (i < n) x[i] += twice(" + std::to_string(value) + ".0f);\n}\n"};
}

// KILN_COMPILE_THREADS set for one test.
class CompileThreads {
 public:
  explicit CompileThreads(const char* n) {
    if (const char* old = std::getenv("KILN_COMPILE_THREADS")) saved_ = old;
    ::setenv("KILN_COMPILE_THREADS", n, 1);
  }
  ~CompileThreads() {
    if (saved_) ::setenv("KILN_COMPILE_THREADS", saved_->c_str(), 1);
    else ::unsetenv("KILN_COMPILE_THREADS");
  }

 private:
  std::optional<std::string> saved_;
};

bool has_entry(const std::string& ptx, const std::string& name) { return ptx.find(".entry " + name + "(") != std::string::npos; }

TEST_F(NvrtcTest, KernelsShareAProgramPerCompileThread) {
  std::vector<CudaKernelSource> kernels;
  for (int i = 0; i < 5; ++i) kernels.push_back(prelude_kernel("k" + std::to_string(i), i));
  {
    CompileThreads one("1");
    CompiledKernels c = compile_cuda_kernels(kPrelude, kernels, no_cache());
    ASSERT_EQ(c.programs.size(), 1u) << "one thread: one program";
    EXPECT_EQ(c.programs[0].kernels, 5);
    EXPECT_EQ(c.program_of, std::vector<int>(5, 0));
    EXPECT_TRUE(is_elf(c.programs[0].cubin));
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(has_entry(c.programs[0].ptx, "k" + std::to_string(i))) << c.programs[0].ptx;
  }
  // NVRTC 13 compiles one program at a time in a process: there the kernels make one program.
  const bool parallel = std::stoi(nvrtc_version()) < 13;
  {
    CompileThreads two("2");
    CompiledKernels c = compile_cuda_kernels(kPrelude, kernels, no_cache());
    ASSERT_EQ(c.programs.size(), parallel ? 2u : 1u);
    for (int i = 0; i < 5; ++i) {
      const NvrtcOutput& p = c.programs[static_cast<size_t>(c.program_of[static_cast<size_t>(i)])];
      EXPECT_TRUE(has_entry(p.ptx, "k" + std::to_string(i))) << "k" << i << " is in the program it is said to be in";
    }
    int total = 0;
    for (const NvrtcOutput& p : c.programs) total += p.kernels;
    EXPECT_EQ(total, 5);
  }
  {
    CompileThreads many("64");
    CompiledKernels c = compile_cuda_kernels(kPrelude, kernels, no_cache());
    EXPECT_EQ(c.programs.size(), parallel ? 5u : 1u) << "never more programs than kernels";
  }
}

TEST_F(NvrtcTest, EachKernelOfAProgramIsFoundAgainInTheCache) {
  CompileThreads one("1");
  std::vector<CudaKernelSource> abc = {prelude_kernel("ka", 1), prelude_kernel("kb", 2), prelude_kernel("kc", 3)};
  CompiledKernels cold = compile_cuda_kernels(kPrelude, abc, NvrtcOptions{});
  ASSERT_EQ(cold.programs.size(), 1u);
  EXPECT_FALSE(cold.programs[0].cache_hit);
  KernelCache cache(dir_);
  // Each kernel's entry is under the key its source alone would have, and names the program.
  for (const CudaKernelSource& k : abc) {
    std::string alone_key = compile_cuda(std::string(kPrelude) + "\n" + k.code, k.name, no_cache()).key;
    EXPECT_EQ(cache.load(alone_key, "program"), cold.programs[0].key) << k.name;
  }
  CompiledKernels warm = compile_cuda_kernels(kPrelude, abc, NvrtcOptions{});
  ASSERT_EQ(warm.programs.size(), 1u) << "the three hits load one program";
  EXPECT_TRUE(warm.programs[0].cache_hit);
  EXPECT_EQ(warm.programs[0].cubin, cold.programs[0].cubin);

  // A kernel met again beside new ones: it comes from the old program, the new one compiles.
  std::vector<CudaKernelSource> bd = {prelude_kernel("kb", 2), prelude_kernel("kd", 4)};
  CompiledKernels mixed = compile_cuda_kernels(kPrelude, bd, NvrtcOptions{});
  ASSERT_EQ(mixed.programs.size(), 2u);
  const NvrtcOutput& b = mixed.programs[static_cast<size_t>(mixed.program_of[0])];
  const NvrtcOutput& d = mixed.programs[static_cast<size_t>(mixed.program_of[1])];
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(b.cubin, cold.programs[0].cubin);
  EXPECT_FALSE(d.cache_hit);
  EXPECT_EQ(d.kernels, 1);
  EXPECT_TRUE(has_entry(d.ptx, "kd"));
  EXPECT_EQ(d.key, compile_cuda(std::string(kPrelude) + "\n" + bd[1].code, "kd", no_cache()).key)
      << "a program of one kernel is an ordinary entry";
  EXPECT_TRUE(compile_cuda(std::string(kPrelude) + "\n" + bd[1].code, "kd").cache_hit);
}

TEST_F(NvrtcTest, ADamagedProgramIsAMissForEachOfItsKernels) {
  CompileThreads one("1");
  std::vector<CudaKernelSource> ab = {prelude_kernel("ka", 5), prelude_kernel("kb", 6)};
  CompiledKernels cold = compile_cuda_kernels(kPrelude, ab, NvrtcOptions{});
  ASSERT_EQ(cold.programs.size(), 1u);
  KernelCache cache(dir_);
  for (int round = 0; round < 3; ++round) {
    fs::path damaged = round == 0 ? cache.path(cold.programs[0].key, "cubin")
                     : round == 1 ? cache.path(cold.programs[0].key, "cu")
                                  : cache.path(compile_cuda(std::string(kPrelude) + "\n" + ab[1].code, "kb", no_cache()).key, "program");
    flip_bytes_in_the_middle(damaged);
    CompiledKernels again = compile_cuda_kernels(kPrelude, ab, NvrtcOptions{});
    bool any_compiled = false;
    for (const NvrtcOutput& p : again.programs) any_compiled |= !p.cache_hit;
    EXPECT_TRUE(any_compiled) << "round " << round << ": a damaged " << damaged.extension() << " is a miss";
    for (size_t i = 0; i < ab.size(); ++i)
      EXPECT_TRUE(has_entry(again.programs[static_cast<size_t>(again.program_of[i])].ptx, i == 0 ? "ka" : "kb"));
    CompiledKernels warm = compile_cuda_kernels(kPrelude, ab, NvrtcOptions{});
    for (const NvrtcOutput& p : warm.programs) EXPECT_TRUE(p.cache_hit) << "round " << round << ": repaired";
  }
}

TEST_F(NvrtcTest, AProgramThatFailsNamesTheKernelAtFault) {
  CompileThreads one("1");
  CudaKernelSource bad = {"graph_kbad", "extern \"C\" __global__ void kbad(float* x) {\n  x[0] = not_declared;\n}\n"};
  std::vector<CudaKernelSource> kernels = {prelude_kernel("k0", 1), bad, prelude_kernel("k2", 2)};
  try {
    compile_cuda_kernels(kPrelude, kernels, no_cache());
    FAIL() << "compiled";
  } catch (const NvrtcError& e) {
    EXPECT_EQ(e.program(), "graph_kbad");
    std::string what = e.what();
    EXPECT_NE(what.find("not_declared"), std::string::npos) << what;
    EXPECT_NE(what.find("x[0] = not_declared;"), std::string::npos) << "the offending line, numbered in the kernel's own program:\n" << what;
  }
}

TEST_F(NvrtcTest, CompileThreadsMustBeANumber) {
  for (const char* bad : {"0", "-2", "many", "4x"}) {
    CompileThreads threads(bad);
    EXPECT_THROW(compile_threads(), kiln::Error) << bad;
  }
  CompileThreads three("3");
  EXPECT_EQ(compile_threads(), 3);
}

}  // namespace
}  // namespace kiln::runtime::cuda::testing
#endif
