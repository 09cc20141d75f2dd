// CPU compilation policy: the in-memory map, the disk cache, statistics and errors. The clang
// and ORC work itself sits behind llvm_backend.h, so this file includes no LLVM header.
#include "runtime/cpu/jit.h"

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "ir/error.h"
#include "ir/log.h"
#include "runtime/kernel_cache.h"

#if KILN_HAVE_LLVM
#include "runtime/cpu/llvm_backend.h"
#endif

namespace kiln::runtime::cpu {

#if KILN_HAVE_LLVM
namespace {

// A module compiled earlier in this process, handed out again with statistics of its own.
class SharedModule final : public CompiledModule {
 public:
  SharedModule(std::shared_ptr<CompiledModule> module, const CompileStats& stats) : module_(std::move(module)) {
    stats_ = stats;
  }
  void* symbol(const std::string& name) const override { return module_->symbol(name); }

 private:
  std::shared_ptr<CompiledModule> module_;
};

std::mutex memory_mutex;
std::unordered_map<std::string, std::shared_ptr<CompiledModule>> memory;  // by cache key

// clang is run by one thread at a time; disk hits and memory hits queue behind it only briefly.
std::mutex compile_mutex;

std::shared_ptr<CompiledModule> memory_lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = memory.find(key);
  if (it == memory.end()) return nullptr;
  CompileStats stats;
  stats.cache_hit = stats.memory_hit = true;
  stats.cache_key = key;
  return std::make_shared<SharedModule>(it->second, stats);
}

void remember(const std::string& key, const std::shared_ptr<CompiledModule>& module) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  memory.emplace(key, module);
}

}  // namespace

bool jit_available() { return true; }

void clear_in_memory_cache() {
  std::lock_guard<std::mutex> lock(memory_mutex);
  memory.clear();
}

std::shared_ptr<CompiledModule> compile(const std::string& source, const CompileOptions& options) {
  // The key covers everything the object depends on: the cache format, the compiler and the
  // host CPU (name and features), the flags, and the source.
  std::string format = fmt::format("kiln cpu kernel cache v{}", kKernelCacheFormatVersion);
  std::string flags = llvm_backend::flags_identity(options);
  std::string key = content_key({format, llvm_backend::toolchain_identity(), flags, source});
  bool look_up = !options.vectorizer_remarks;
  if (look_up) {
    if (auto module = memory_lookup(key)) {
      if (log_enabled("cache")) log_line("cache", fmt::format("memory hit {}", key));
      return module;
    }
  }

  std::lock_guard<std::mutex> lock(compile_mutex);
  if (look_up) {
    if (auto module = memory_lookup(key)) return module;  // another thread compiled it meanwhile
  }
  std::optional<KernelCache> disk;
  if (options.use_cache) {
    if (auto dir = KernelCache::default_dir()) disk.emplace(*dir);
  }
  CompileStats stats;
  stats.cache_key = key;
  if (look_up && disk) {
    if (std::optional<std::string> object = disk->load(key, "o")) {
      stats.cache_hit = true;
      try {
        std::shared_ptr<CompiledModule> module = llvm_backend::load_object(*object, stats);
        remember(key, module);
        return module;
      } catch (const kiln::Error& e) {
        // Intact bytes that do not link are as corrupt as torn ones: recompile and rewrite.
        if (log_enabled("cache"))
          log_line("cache", fmt::format("entry {} does not load ({}): recompiling", key, e.what()));
        stats.cache_hit = false;
      }
    }
  }

  llvm_backend::ObjectCode code = llvm_backend::compile_to_object(source, options);
  stats.frontend_ms = code.frontend_ms;
  stats.codegen_ms = code.codegen_ms;
  stats.remarks = std::move(code.remarks);
  if (disk) disk->store(key, {{"cpp", source, /*text=*/true}, {"o", code.object}});
  std::shared_ptr<CompiledModule> module = llvm_backend::load_object(code.object, stats);
  if (log_enabled("cache"))
    log_line("cache", fmt::format("compiled {}: clang {:.1f} ms, codegen {:.1f} ms, link {:.2f} ms", key,
                                  stats.frontend_ms, stats.codegen_ms, module->stats().link_ms));
  remember(key, module);
  return module;
}

#else  // !KILN_HAVE_LLVM

bool jit_available() { return false; }

void clear_in_memory_cache() {}

std::shared_ptr<CompiledModule> compile(const std::string&, const CompileOptions&) {
  kiln::fail("kiln was built without the LLVM CPU path (install llvm-14-dev libclang-14-dev and rebuild)");
}

#endif

}  // namespace kiln::runtime::cpu
