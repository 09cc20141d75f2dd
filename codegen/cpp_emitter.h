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
// Loops: the outermost parallel loop goes to kiln_parallel_for with a grain sized so each
// chunk does >= ~32K element-iterations (small tensors run inline, with no pool handoff);
// vectorized loops are plain counted loops over contiguous (after simplification) indices,
// left to clang's cost model (a forced `vectorize(enable)` only adds warnings where it
// cannot); reduction loops whose accumulators are all
// sums or products also get `#pragma clang fp reassociate(on)`, the one place float
// reassociation is allowed, so clang can vectorize them without -ffast-math.
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

// The C++ type a value of dtype `t` computes in, and the type a buffer of `t` stores.
std::string_view cpp_value_type(DType t);
std::string_view cpp_storage_type(DType t);

}  // namespace kiln::codegen
