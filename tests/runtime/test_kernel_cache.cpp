// The content-addressed kernel cache: where entries go, warm loads without clang, KILN_CACHE_DIR
// and `off`, and faults: truncated, empty, bit-flipped and garbage entries, files missing from
// an entry, a read-only, missing or uncreatable cache folder, a full disk, and many processes
// compiling the same kernels into one folder at once. Each ends in a correct result: a fault is
// a miss that recompiles (and rewrites the entry where the folder can be written).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>

#include <unistd.h>

#include "runtime/cpu/jit.h"
#include "runtime/kernel_cache.h"
#include "tests/runtime/cache_faults.h"
#include "tests/runtime/jit_test_env.h"

namespace kiln::runtime::cpu::testing {
namespace {

namespace fs = std::filesystem;
using runtime::testing::flip_bytes_in_the_middle;
using runtime::testing::FullDisk;
using runtime::testing::ReadOnlyFolder;
using runtime::testing::regular_files_under;
using runtime::testing::run_processes;
using Kernel = void (*)(void* const*, const int64_t*);

std::string source_adding(int value) {
  return "typedef long int64_t;\n"
         "extern \"C\" void add(void* const* buffers, const int64_t* scalars) {\n"
         "  int* x = (int*)buffers[0];\n"
         "  for (int64_t i = 0; i < scalars[0]; ++i) x[i] += " +
         std::to_string(value) + ";\n}\n";
}

// Calls the kernel and checks that it added `value`.
void check_adds(const CompiledModule& module, int value) {
  std::vector<int> x = {1, -2, 30, 400, 5, 6, 7};
  void* buffers[] = {x.data()};
  int64_t scalars[] = {static_cast<int64_t>(x.size())};
  reinterpret_cast<Kernel>(module.symbol("add"))(buffers, scalars);
  EXPECT_EQ(x, (std::vector<int>{1 + value, -2 + value, 30 + value, 400 + value, 5 + value, 6 + value, 7 + value}));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t files_under(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  size_t n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) n += entry.is_regular_file();
  return n;
}

TEST(ContentKey, StableHexAndFramed) {
  std::string key = content_key({"ab", "c"});
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(key, content_key({"ab", "c"}));
  EXPECT_NE(key, content_key({"a", "bc"}));
  EXPECT_NE(key, content_key({"abc"}));
}

// Several files per key: binaries behind the integrity header, texts as they are.
TEST(KernelCacheFiles, BinariesAndTextsPerKey) {
  fs::path dir = fs::temp_directory_path() / ("kiln_cache_files_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  KernelCache cache(dir);
  std::string key = content_key({"files"});
  std::string cubin("\x7f" "ELF\0\1\2", 7);
  cache.store(key, {{"cu", "__global__ void k() {}", true}, {"cubin", cubin}, {"ptx", ".version 8.0", true}});
  EXPECT_EQ(cache.path(key, "cubin"), dir / key.substr(0, 2) / (key + ".cubin"));
  EXPECT_EQ(cache.load(key, "cubin"), cubin);
  EXPECT_EQ(read_file(cache.path(key, "cu")), "__global__ void k() {}") << "texts are stored plain";
  EXPECT_EQ(cache.load_text(key, "ptx"), ".version 8.0");
  EXPECT_EQ(cache.load(key, "cu"), std::nullopt) << "a text is no binary entry";
  EXPECT_EQ(cache.load(key, "o"), std::nullopt);
  EXPECT_EQ(cache.load_text(key, "o"), std::nullopt);
  EXPECT_EQ(files_under(dir), 3u) << "no temp files left";
  fs::resize_file(cache.path(key, "cubin"), 10);
  EXPECT_EQ(cache.load(key, "cubin"), std::nullopt) << "a torn binary is absent";
  fs::remove_all(dir);
}

// Every text file of an entry is part of it: one missing, empty or damaged voids the entry.
TEST(KernelCacheFiles, TheTextsOfAnEntryAreChecked) {
  fs::path dir = fs::temp_directory_path() / ("kiln_cache_texts_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  KernelCache cache(dir);
  std::string key = content_key({"texts"});
  std::string cubin("\x7f" "ELF\0\1\2", 7);
  std::vector<CacheFile> entry = {{"cu", "__global__ void k() {}", true}, {"cubin", cubin}, {"ptx", ".version 8.0", true}};
  ASSERT_TRUE(cache.store(key, entry));
  std::map<std::string, std::string> texts;
  EXPECT_EQ(cache.load(key, "cubin", &texts), cubin);
  EXPECT_EQ(texts, (std::map<std::string, std::string>{{"cu", "__global__ void k() {}"}, {"ptx", ".version 8.0"}}));

  auto expect_void = [&](const std::string& what, auto damage) {
    ASSERT_TRUE(cache.store(key, entry));
    damage();
    EXPECT_EQ(cache.load(key, "cubin"), std::nullopt) << what;
    ASSERT_TRUE(cache.store(key, entry)) << "rewritten whole";
    EXPECT_EQ(cache.load(key, "cubin"), cubin) << what;
  };
  expect_void("a missing .cu", [&] { fs::remove(cache.path(key, "cu")); });
  expect_void("a missing .ptx", [&] { fs::remove(cache.path(key, "ptx")); });
  expect_void("an empty .cu", [&] { fs::resize_file(cache.path(key, "cu"), 0); });
  expect_void("a .ptx of the right size with a flipped byte",
              [&] { std::ofstream(cache.path(key, "ptx"), std::ios::binary | std::ios::trunc) << ".version 8.1"; });
  expect_void("an empty .cubin", [&] { fs::resize_file(cache.path(key, "cubin"), 0); });
  // A folder where the binary should be: a miss, and a store that cannot replace it says so.
  fs::remove(cache.path(key, "cubin"));
  fs::create_directory(cache.path(key, "cubin"));
  EXPECT_EQ(cache.load(key, "cubin"), std::nullopt);
  EXPECT_FALSE(cache.store(key, entry));
  fs::remove(cache.path(key, "cubin"));
  EXPECT_EQ(regular_files_under(dir), 2u) << "the texts, and no temp files left";
  fs::remove_all(dir);
}

// A folder that cannot be created (a path under a regular file) stores nothing, and says so.
TEST(KernelCacheFiles, AnUncreatableFolderStoresNothing) {
  fs::path file = fs::temp_directory_path() / ("kiln_cache_file_" + std::to_string(::getpid()));
  std::ofstream(file) << "a file, not a folder";
  KernelCache cache(file / "cache");
  std::string key = content_key({"nowhere"});
  EXPECT_FALSE(cache.store(key, {{"cpp", "int x;", true}, {"o", "bytes"}}));
  EXPECT_EQ(cache.load(key, "o"), std::nullopt);
  fs::remove(file);
}

using KernelCacheTest = JitTest;

TEST_F(KernelCacheTest, ColdCompileWritesTheEntry) {
  std::string source = source_adding(3);
  auto module = compile(source);
  check_adds(*module, 3);
  const std::string& key = module->stats().cache_key;
  EXPECT_FALSE(module->stats().cache_hit);
  KernelCache cache(dir_);
  EXPECT_EQ(cache.path(key, "o"), dir_ / key.substr(0, 2) / (key + ".o"));
  EXPECT_TRUE(fs::is_regular_file(cache.path(key, "o")));
  EXPECT_EQ(read_file(cache.path(key, "cpp")), source);
  EXPECT_EQ(files_under(dir_), 2u) << "an object, its source, and no temp files left";
}

TEST_F(KernelCacheTest, WarmLoadSkipsClang) {
  std::string source = source_adding(4);
  std::string key = compile(source)->stats().cache_key;

  auto same_process = compile(source);
  EXPECT_TRUE(same_process->stats().cache_hit);
  EXPECT_TRUE(same_process->stats().memory_hit);
  check_adds(*same_process, 4);

  clear_in_memory_cache();  // as a fresh process would be
  auto from_disk = compile(source);
  EXPECT_TRUE(from_disk->stats().cache_hit);
  EXPECT_FALSE(from_disk->stats().memory_hit);
  EXPECT_EQ(from_disk->stats().frontend_ms, 0.0);
  EXPECT_EQ(from_disk->stats().codegen_ms, 0.0);
  EXPECT_EQ(from_disk->stats().cache_key, key);
  check_adds(*from_disk, 4);
}

TEST_F(KernelCacheTest, OptionsAndSourceChangeTheKey) {
  std::string key = compile(source_adding(5))->stats().cache_key;
  EXPECT_NE(compile(source_adding(6))->stats().cache_key, key);
  CompileOptions o2;
  o2.opt_level = 2;
  auto module = compile(source_adding(5), o2);
  EXPECT_NE(module->stats().cache_key, key);
  EXPECT_FALSE(module->stats().cache_hit);
  check_adds(*module, 5);
}

// Damages the stored entry with `damage` (given the paths of its object and its source), then
// checks that the next compile ignores the entry, recompiles, and leaves a repaired entry that
// the one after loads.
template <typename Damage>
void check_repaired(const fs::path& dir, int value, Damage damage) {
  std::string source = source_adding(value);
  std::string key = compile(source)->stats().cache_key;
  fs::path object = KernelCache(dir).path(key, "o"), cpp = KernelCache(dir).path(key, "cpp");
  std::string good_object = read_file(object), good_cpp = read_file(cpp);
  damage(object, cpp);
  ASSERT_TRUE(!fs::exists(object) || !fs::exists(cpp) || read_file(object) != good_object || read_file(cpp) != good_cpp)
      << "the damage changed nothing";

  clear_in_memory_cache();
  auto recompiled = compile(source);
  EXPECT_FALSE(recompiled->stats().cache_hit);
  EXPECT_GT(recompiled->stats().frontend_ms, 0.0);
  check_adds(*recompiled, value);
  EXPECT_EQ(read_file(object), good_object) << "the entry is rewritten";
  EXPECT_EQ(read_file(cpp), good_cpp) << "the entry is rewritten";
  EXPECT_EQ(files_under(dir), 2u) << "no temp files left";

  clear_in_memory_cache();
  auto warm = compile(source);
  EXPECT_TRUE(warm->stats().cache_hit);
  check_adds(*warm, value);
}

TEST_F(KernelCacheTest, FlippedBytesAreRecompiled) {
  check_repaired(dir_, 7, [](const fs::path& object, const fs::path&) { flip_bytes_in_the_middle(object); });
}

TEST_F(KernelCacheTest, TruncatedEntryIsRecompiled) {
  check_repaired(dir_, 8, [](const fs::path& object, const fs::path&) { fs::resize_file(object, fs::file_size(object) / 3); });
}

TEST_F(KernelCacheTest, GarbageEntryIsRecompiled) {
  check_repaired(dir_, 9, [](const fs::path& object, const fs::path&) {
    std::ofstream(object, std::ios::binary | std::ios::trunc) << "not an object file at all";
  });
}

TEST_F(KernelCacheTest, IntactHeaderAroundANonObjectIsRecompiled) {
  // Bytes that pass the checksum but are no object file: the loader refuses them, cleanly.
  check_repaired(dir_, 10, [this](const fs::path& object, const fs::path& cpp) {
    std::string key = object.stem().string();
    KernelCache(dir_).store(key, {{"cpp", read_file(cpp), true}, {"o", "\x7f" "ELF but not really"}});
  });
}

TEST_F(KernelCacheTest, EmptyEntryIsRecompiled) {
  check_repaired(dir_, 13, [](const fs::path& object, const fs::path&) { fs::resize_file(object, 0); });
}

TEST_F(KernelCacheTest, EmptySourceVoidsTheEntry) {
  check_repaired(dir_, 14, [](const fs::path&, const fs::path& cpp) { fs::resize_file(cpp, 0); });
}

TEST_F(KernelCacheTest, FlippedSourceVoidsTheEntry) {
  check_repaired(dir_, 15, [](const fs::path&, const fs::path& cpp) { flip_bytes_in_the_middle(cpp); });
}

// An entry is its object and its source: either missing is a miss that writes both again.
TEST_F(KernelCacheTest, AnObjectWithoutItsSourceIsRecompiled) {
  check_repaired(dir_, 16, [](const fs::path&, const fs::path& cpp) { fs::remove(cpp); });
}

TEST_F(KernelCacheTest, ASourceWithoutItsObjectIsRecompiled) {
  check_repaired(dir_, 17, [](const fs::path& object, const fs::path&) { fs::remove(object); });
}

// A read-only cache folder: entries in it load; a miss or a corrupt entry compiles and gives the
// right result, and nothing is written (or raised).
TEST_F(KernelCacheTest, ReadOnlyFolder) {
  std::string kept = source_adding(18), damaged = source_adding(19), fresh = source_adding(20);
  compile(kept);
  std::string damaged_key = compile(damaged)->stats().cache_key;
  KernelCache cache(dir_);
  flip_bytes_in_the_middle(cache.path(damaged_key, "o"));
  std::string torn = read_file(cache.path(damaged_key, "o"));
  clear_in_memory_cache();
  {
    ReadOnlyFolder read_only(dir_);
    if (!read_only.works()) GTEST_SKIP() << "cannot make a folder read-only here (root without capset?)";
    auto hit = compile(kept);
    EXPECT_TRUE(hit->stats().cache_hit) << "a read-only cache still serves its entries";
    check_adds(*hit, 18);
    auto repaired = compile(damaged);
    EXPECT_FALSE(repaired->stats().cache_hit);
    check_adds(*repaired, 19);
    auto compiled = compile(fresh);
    EXPECT_FALSE(compiled->stats().cache_hit);
    check_adds(*compiled, 20);
    EXPECT_FALSE(fs::exists(cache.path(compiled->stats().cache_key, "o")));
  }
  EXPECT_EQ(read_file(cache.path(damaged_key, "o")), torn) << "nothing could be written";
  EXPECT_EQ(files_under(dir_), 4u) << "the two entries, and no temp file";

  // Writable again: the damaged entry is repaired by its next compile.
  clear_in_memory_cache();
  EXPECT_FALSE(compile(damaged)->stats().cache_hit);
  clear_in_memory_cache();
  EXPECT_TRUE(compile(damaged)->stats().cache_hit);
  EXPECT_TRUE(compile(kept)->stats().cache_hit);
}

// A missing cache folder is created on demand, however deep; one that cannot be created (a
// path under a regular file) leaves the cache out: the compile still gives the right result.
TEST_F(KernelCacheTest, MissingAndUncreatableFolders) {
  fs::path deep = dir_ / "not" / "there" / "yet";
  set_cache_dir(deep.string());
  auto module = compile(source_adding(21));
  check_adds(*module, 21);
  EXPECT_EQ(files_under(deep), 2u);
  clear_in_memory_cache();
  EXPECT_TRUE(compile(source_adding(21))->stats().cache_hit);

  fs::path file = dir_ / "a_file";
  std::ofstream(file) << "not a folder";
  set_cache_dir((file / "cache").string());
  for (int round = 0; round < 2; ++round) {
    clear_in_memory_cache();
    auto uncached = compile(source_adding(22));
    EXPECT_FALSE(uncached->stats().cache_hit);
    check_adds(*uncached, 22);
  }
  EXPECT_TRUE(fs::is_regular_file(file));
}

// A full disk: writes fail partway (here after the source, inside the object; or at once). The
// compile's result is right, no partial object or temp file is left for a later load to trust,
// and once there is room the next compile writes the whole entry.
TEST_F(KernelCacheTest, FullDiskLeavesNoPartialEntry) {
  std::string source = source_adding(23);
  for (rlim_t room : {rlim_t{0}, static_cast<rlim_t>(source.size() + 40)}) {
    SCOPED_TRACE("room for " + std::to_string(room) + " bytes per file");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    clear_in_memory_cache();
    std::shared_ptr<CompiledModule> module;
    {
      FullDisk full(room);
      ASSERT_TRUE(full.ok());
      module = compile(source);
    }
    EXPECT_FALSE(module->stats().cache_hit);
    check_adds(*module, 23);
    const std::string& key = module->stats().cache_key;
    KernelCache cache(dir_);
    EXPECT_FALSE(fs::exists(cache.path(key, "o"))) << "no partial object";
    EXPECT_EQ(files_under(dir_), room == 0 ? 0u : 1u) << "the source at most, and no temp file";
    if (room > 0) {
      EXPECT_EQ(read_file(cache.path(key, "cpp")), source);
    }

    clear_in_memory_cache();
    auto again = compile(source);
    EXPECT_FALSE(again->stats().cache_hit);
    check_adds(*again, 23);
    EXPECT_EQ(files_under(dir_), 2u);
    clear_in_memory_cache();
    EXPECT_TRUE(compile(source)->stats().cache_hit);
  }
}

// Many processes compile the same kernels into one empty folder at once, each in its own order:
// every process gets right results, and the folder ends up holding whole entries only, which
// a later process loads without compiling.
TEST_F(KernelCacheTest, ManyProcessesCompileTheSameKernelsAtOnce) {
  constexpr int kProcesses = 6, kKernels = 6;
  std::vector<int> status = run_processes(kProcesses, [](int child) {
    std::vector<int> order(kKernels);
    for (int i = 0; i < kKernels; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(child)));
    for (int i : order) {
      auto module = compile(source_adding(100 + i));
      std::vector<int> x = {1, 2, 3};
      void* buffers[] = {x.data()};
      int64_t scalars[] = {3};
      reinterpret_cast<Kernel>(module->symbol("add"))(buffers, scalars);
      if (x != std::vector<int>{101 + i, 102 + i, 103 + i}) return false;
    }
    return true;
  });
  EXPECT_EQ(status, std::vector<int>(kProcesses, 0)) << "every process got right results";
  EXPECT_EQ(files_under(dir_), 2u * kKernels) << "whole entries, no temp files";
  for (int i = 0; i < kKernels; ++i) {
    clear_in_memory_cache();
    auto warm = compile(source_adding(100 + i));
    EXPECT_TRUE(warm->stats().cache_hit) << i;
    check_adds(*warm, 100 + i);
  }
}

TEST_F(KernelCacheTest, CacheDirFollowsTheEnvironment) {
  fs::path other = dir_ / "elsewhere";
  set_cache_dir(other.string());
  ASSERT_EQ(KernelCache::default_dir(), other);
  auto module = compile(source_adding(11));
  EXPECT_EQ(files_under(other), 2u);
  EXPECT_TRUE(fs::exists(KernelCache(other).path(module->stats().cache_key, "o")));

  // A fresh folder holds nothing yet: a miss, and the entry is written there.
  fs::path third = dir_ / "third";
  set_cache_dir(third.string());
  clear_in_memory_cache();
  EXPECT_FALSE(compile(source_adding(11))->stats().cache_hit);
  EXPECT_EQ(files_under(third), 2u);
}

TEST_F(KernelCacheTest, OffDisablesTheDiskCache) {
  set_cache_dir("off");
  EXPECT_FALSE(KernelCache::default_dir().has_value());
  auto module = compile(source_adding(12));
  check_adds(*module, 12);
  clear_in_memory_cache();
  EXPECT_FALSE(compile(source_adding(12))->stats().cache_hit);

  set_cache_dir(dir_.string());
  CompileOptions no_cache;
  no_cache.use_cache = false;
  clear_in_memory_cache();
  EXPECT_FALSE(compile(source_adding(12), no_cache)->stats().cache_hit);
  EXPECT_EQ(files_under(dir_), 0u);
}

TEST(KernelCacheDefaults, XdgAndHome) {
  std::string saved_dir = std::getenv("KILN_CACHE_DIR") ? std::getenv("KILN_CACHE_DIR") : "";
  std::string saved_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  ::unsetenv("KILN_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(KernelCache::default_dir(), fs::path("/tmp/xdg-test/kiln"));
  ::unsetenv("XDG_CACHE_HOME");
  if (const char* home = std::getenv("HOME")) {
    EXPECT_EQ(KernelCache::default_dir(), fs::path(home) / ".cache" / "kiln");
  }
  if (!saved_dir.empty()) ::setenv("KILN_CACHE_DIR", saved_dir.c_str(), 1);
  if (!saved_xdg.empty()) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
}

}  // namespace
}  // namespace kiln::runtime::cpu::testing
