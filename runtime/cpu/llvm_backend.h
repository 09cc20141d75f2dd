#pragma once
// The seam between jit.cpp (policy: cache, statistics, errors) and the two files that include
// clang's and LLVM's headers (clang_frontend.cpp, orc_loader.cpp). Only plain C++ types cross
// it, so that no other file pays for those headers. Built only with KILN_HAVE_LLVM.
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/jit.h"

namespace kiln::runtime::cpu::llvm_backend {

// What identifies the compiler and the machine code it makes for this host: the LLVM version,
// the clang path, the host CPU name and its feature list. Part of every cache key.
const std::string& toolchain_identity();

// The compiler flags (as text) that `options` stand for; part of the cache key.
std::string flags_identity(const CompileOptions& options);

struct ObjectCode {
  std::string object;                // an ELF relocatable object file
  double frontend_ms = 0;            // clang + the -O pipeline: source -> optimized LLVM IR
  double codegen_ms = 0;             // LLVM IR -> object
  std::vector<std::string> remarks;  // "line:col: message" when options.vectorizer_remarks
};

// Compiles C++ source to an object file in memory; SourceError with clang's diagnostics and
// the source lines around the first error when it does not compile. Not thread-safe: the
// caller serializes.
ObjectCode compile_to_object(const std::string& source, const CompileOptions& options);

// Links an object file into the process (one JITDylib of its own, the kernel ABI bound to the
// runtime's functions, libm and libc found in the process). The module keeps its JITDylib
// alive and removes it when destroyed. kiln::Error when the object does not link (for
// instance a corrupt object file).
std::shared_ptr<CompiledModule> load_object(const std::string& object, const CompileStats& stats);

}  // namespace kiln::runtime::cpu::llvm_backend
