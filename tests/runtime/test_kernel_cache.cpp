// The content-addressed kernel cache: where entries go, warm loads without clang, corrupt
// entries recompiled and repaired, KILN_CACHE_DIR and `off`.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <unistd.h>

#include "runtime/cpu/jit.h"
#include "runtime/kernel_cache.h"
#include "tests/runtime/jit_test_env.h"

namespace kiln::runtime::cpu::testing {
namespace {

namespace fs = std::filesystem;
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

// Damages the stored object with `damage`, then checks that the next compile ignores the entry,
// recompiles, and leaves a repaired entry that the one after loads.
template <typename Damage>
void check_repaired(const fs::path& dir, int value, Damage damage) {
  std::string source = source_adding(value);
  std::string key = compile(source)->stats().cache_key;
  fs::path object = KernelCache(dir).path(key, "o");
  std::string good = read_file(object);
  damage(object);
  ASSERT_NE(read_file(object), good);

  clear_in_memory_cache();
  auto recompiled = compile(source);
  EXPECT_FALSE(recompiled->stats().cache_hit);
  EXPECT_GT(recompiled->stats().frontend_ms, 0.0);
  check_adds(*recompiled, value);
  EXPECT_EQ(read_file(object), good) << "the entry is rewritten";

  clear_in_memory_cache();
  auto warm = compile(source);
  EXPECT_TRUE(warm->stats().cache_hit);
  check_adds(*warm, value);
}

TEST_F(KernelCacheTest, FlippedBytesAreRecompiled) {
  check_repaired(dir_, 7, [](const fs::path& object) {
    std::fstream f(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(object) / 2));
    f.write("\xde\xad\xbe\xef", 4);
  });
}

TEST_F(KernelCacheTest, TruncatedEntryIsRecompiled) {
  check_repaired(dir_, 8, [](const fs::path& object) { fs::resize_file(object, fs::file_size(object) / 3); });
}

TEST_F(KernelCacheTest, GarbageEntryIsRecompiled) {
  check_repaired(dir_, 9, [](const fs::path& object) {
    std::ofstream(object, std::ios::binary | std::ios::trunc) << "not an object file at all";
  });
}

TEST_F(KernelCacheTest, IntactHeaderAroundANonObjectIsRecompiled) {
  // Bytes that pass the checksum but are no object file: the loader refuses them, cleanly.
  check_repaired(dir_, 10, [this](const fs::path& object) {
    std::string key = object.stem().string();
    KernelCache(dir_).store(key, {{"cpp", "// source", true}, {"o", "\x7f" "ELF but not really"}});
  });
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
