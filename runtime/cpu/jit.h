#pragma once
// The CPU compiler: C++ source -> machine code in this process, with no subprocess.
// clang's libraries compile the source to an LLVM module at -O3 for the host CPU (cc1
// arguments built once by clang's Driver), and LLVM's ORC LLJIT links it. Object files go
// through the content-addressed kernel cache (runtime/kernel_cache.h): a warm process
// loads the object and skips clang entirely.
//
// Generated sources include no system headers; what they may call is the small C ABI in
// runtime/cpu/kernel_abi.h (parallel_for, math helpers), resolved from this process.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"

namespace kiln::runtime::cpu {

struct CompileOptions {
  int opt_level = 3;
  bool native_cpu = true;            // -march=native (CPU features are part of the cache key)
  bool use_cache = true;             // the disk cache (also off with KILN_CACHE_DIR=off)
  std::vector<std::string> extra_args;
  // Collect -Rpass=loop-vectorize / -Rpass-missed / -Rpass-analysis remarks. Remarks exist
  // only when clang runs, so this skips the cache lookups (the result is still stored).
  bool vectorizer_remarks = false;
};

struct CompileStats {
  double frontend_ms = 0;   // clang: source -> optimized LLVM IR (parse + -O pipeline; 0 on a cache hit)
  double codegen_ms = 0;    // LLVM IR -> object
  double link_ms = 0;       // ORC: object -> callable
  bool cache_hit = false;   // from the disk cache or this process's memory (clang did not run)
  bool memory_hit = false;  // the same source and options were compiled before in this process
  std::string cache_key;    // hex
  std::vector<std::string> remarks;  // vectorizer remarks when asked for
};

// Source that clang rejects: the message holds clang's diagnostics and the source lines around
// the first error; `line` is that error's line in the source (0 when clang gave none), so that
// a caller that put many kernels in one source can say which of them failed.
class SourceError : public kiln::Error {
 public:
  SourceError(const std::string& message, int line) : kiln::Error(message), line_(line) {}
  int line() const { return line_; }

 private:
  int line_ = 0;
};

// A compiled module: symbols stay valid while the module lives.
class CompiledModule {
 public:
  virtual ~CompiledModule() = default;
  // The address of an extern "C" function; kiln::Error naming the symbol if absent.
  virtual void* symbol(const std::string& name) const = 0;
  const CompileStats& stats() const { return stats_; }

 protected:
  CompileStats stats_;
};

// Whether the clang+ORC path was built in (KILN_HAVE_LLVM); when not, compile() throws a
// kiln::Error saying so.
bool jit_available();

// Compiles `source`; throws SourceError with clang's diagnostics (file:line:col in the
// generated source) when it does not compile. Thread-safe. Looks in this process's memory
// first (instant), then in the disk cache (no clang: object -> callable only).
std::shared_ptr<CompiledModule> compile(const std::string& source, const CompileOptions& options = {});

// Forgets the modules compiled in this process (they stay valid while their holders keep
// them); the next compile of the same source goes to the disk cache or clang. For tests and
// benchmarks.
void clear_in_memory_cache();

}  // namespace kiln::runtime::cpu
