#pragma once
// The C ABI between generated CPU kernels and the runtime. Generated sources include no
// headers: the emitter's prelude declares these functions itself, and the JIT binds them to
// the runtime's definitions (absolute symbols in each kernel's JITDylib), so nothing depends
// on what the executable exports.
//
// Every generated kernel is
//   extern "C" void <name>(void* const* buffers, const int64_t* scalars);
// buffers: the kernel's inputs then outputs, in the order its kernel IR lists them.
#include <cstdint>
#include <optional>
#include <string>

extern "C" {

// The body a parallel loop runs for iterations [begin, end).
typedef void (*kiln_loop_body)(void* ctx, int64_t begin, int64_t end);

// Runs body over [0, n) on the runtime's thread pool, in chunks of at least `grain`
// iterations; returns when every chunk is done. Runs inline when n <= grain or the pool has
// one thread. Nested calls run inline.
void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx);

// Called by a kernel that meets an index out of range (gather, scatter_add); the runtime
// raises kiln::Error after the kernel returns, naming the kernel. Only the first report until
// take_kernel_error() is kept; any thread may report.
void kiln_report_index_error(int64_t index, int64_t size);
// The same, naming the check that failed (the site id of the generated check_index call).
void kiln_report_index_error_at(int64_t index, int64_t size, int64_t site);
}

namespace kiln::runtime::cpu {

// The first error kernels reported since the last call ("index 7 is out of range for a
// dimension of size 5"), cleared by the call; the executor checks it after each kernel.
std::optional<std::string> take_kernel_error();

struct KernelIndexError {
  int64_t index = 0, size = 0;
  int64_t site = -1;  // the check's site id; -1 where the kernel gave none
  std::string str() const;  // "index 7 is out of range for a dimension of size 5"
};
// The same report with its site, cleared by the call.
std::optional<KernelIndexError> take_kernel_index_error();

}  // namespace kiln::runtime::cpu
