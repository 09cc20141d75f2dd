#pragma once
// The C++ emitter: kernel IR -> readable C++ for the in-process clang+ORC JIT
// (runtime/cpu/jit.h). The module is the prelude (codegen/cpp_prelude.cpp: no system
// headers) followed by one function per kernel:
//   extern "C" void k0(void* const* buffers, const int64_t* scalars);
// with buffers in the kernel's argument order.
//
// Types: values compute in float (f16/bf16/f32), double (f64), int64_t (i32/i64) and bool;
// buffers hold uint16_t bits for f16/bf16 and uint8_t for bool. Every index is int64_t:
// shapes here are static, but a tensor past 2^31 elements is legal, products of an index
// and a stride may pass 2^31 long before that, and clang vectorizes i64 induction
// variables as well as i32 ones on x86-64, so proving int32 fits buys nothing measurable.
//
// Loops obey the schedule's LoopMap (codegen/schedule.h decides, with the grain): CpuThreads
// runs chunks of at least `grain` iterations through kiln_parallel_for (inline when the loop
// is no longer than the grain); CpuVector and Serial are plain counted loops, left to clang's
// cost model (a forced `vectorize(enable)` only adds warnings where it cannot). Such a loop
// whose accumulators are all float sums or products also gets `#pragma clang fp
// reassociate(on)`, the one place float reassociation is allowed, so clang can vectorize it
// without -ffast-math. An unscheduled loop, a GPU map or a GPU statement is an internal error;
// integer AtomicAdd is a relaxed __atomic_fetch_add. The printer and the statements it
// shares with the CUDA emitter are codegen/c_family.h.
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

std::string_view cpp_prelude();
// One kernel as C++ (no prelude).
std::string emit_cpp_kernel(const Kernel& k);
// A whole module: the prelude, then every kernel.
std::string emit_cpp_module(const std::vector<Kernel>& kernels);

}  // namespace kiln::codegen
