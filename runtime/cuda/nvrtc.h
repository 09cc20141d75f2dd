#pragma once
// CUDA C to machine code with NVRTC, behind the shared disk cache (runtime/kernel_cache.h).
// NVRTC needs no GPU and no driver, so every generated kernel compiles (and is tested) on any
// machine with the toolkit. Generated kernels include no headers: NVRTC needs nothing else.
//
// One compile per program, for a real architecture (--gpu-architecture=sm_XX): NVRTC then gives
// the CUBIN (SASS, loaded with no JIT step at run time) and, from the same compile, the PTX it
// was made from (NVRTC 11.8 and 13 both keep it), which is stored beside it for people to read.
// Should an NVRTC give no PTX for a real architecture, `ptx` is left empty rather than paying for
// a second compile.
#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"

namespace kiln::runtime::cuda {

struct NvrtcOptions {
  std::string arch = "sm_90";  // the device's: arch_name(device_info())
  bool use_cache = true;       // the disk cache ($KILN_CACHE_DIR; off with KILN_CACHE_DIR=off)
  bool lineinfo = false;       // -lineinfo, for profilers and compute-sanitizer
  // -minimal where NVRTC has it (12.4+): no texture, surface or CUDA runtime declarations, which
  // kiln's generated kernels never use and NVRTC otherwise parses for every program. Not for
  // custom ops' own kernels, which may use them.
  bool minimal = false;
  std::vector<std::string> extra_args;
};

struct NvrtcOutput {
  std::string ptx, cubin, log;  // log: NVRTC's warnings (empty on a cache hit)
  double compile_ms = 0;        // NVRTC's time; 0 on a cache hit
  bool cache_hit = false;
  std::string key;  // the cache key (also when the cache is off)
  int kernels = 1;  // the kernels of the program (compile_cuda_kernels)
};

// A program NVRTC rejects. The message says everything (the program's name, NVRTC's log, the
// offending source lines); program() lets a caller that compiles many programs at once
// (compile_cuda_parallel) say which of its kernels it was.
class NvrtcError : public kiln::Error {
 public:
  NvrtcError(const std::string& message, std::string program) : kiln::Error(message), program_(std::move(program)) {}
  const std::string& program() const { return program_; }

 private:
  std::string program_;
};

// Compiles `source`; `program_name` names it in messages and in NVRTC's log ("<name>.cu(12):
// error: ..."). A failed compile is an NvrtcError holding the program name, the NVRTC log and,
// for each error line of the log, the offending source line quoted with its number.
NvrtcOutput compile_cuda(const std::string& source, const std::string& program_name, const NvrtcOptions& options = {});

// Compiles independent programs on the host's cores (at most hardware_concurrency threads;
// NVRTC is thread-safe for distinct programs). Results in the order given; the first failure
// (in that order, an NvrtcError for a program NVRTC rejects) is raised after all have finished.
std::vector<NvrtcOutput> compile_cuda_parallel(const std::vector<std::pair<std::string, std::string>>& name_and_source,
                                               const NvrtcOptions& options = {});

// Kernels that share one prelude (kiln's generated kernels: the CUDA prelude + one kernel each,
// every kernel a distinct extern "C" name), compiled in as few NVRTC programs as keep the
// threads busy. NVRTC's cost is mostly per program: with 11.8 an empty program costs ~65 ms, one
// generated kernel ~97 ms, four in one program ~168 ms. So the kernels that miss the cache are
// dealt into min(misses, threads) programs, compiled at once. NVRTC 13 is cheaper per program
// (one kernel ~28 ms, sixteen ~48 ms) but compiles programs one at a time within a process,
// however many threads ask: there the misses make one program.
//
// Each kernel keeps a cache entry of its own, under the key of the prelude + it alone (the key
// compile_cuda would give that source), so it is found again whatever it was compiled beside:
// a program of one kernel is an ordinary entry; a program of several is stored once under its
// own key, and each of its kernels' entries names that key (an integrity-checked `.program`
// file). A damaged or missing program entry is a miss for each kernel that names it.
//
// A program NVRTC rejects is compiled again kernel by kernel, so that the NvrtcError names the
// kernel at fault and quotes its lines.
struct CudaKernelSource {
  std::string name;  // names the kernel's program in messages ("<graph>_k3")
  std::string code;  // the kernel, without the prelude
};
struct CompiledKernels {
  std::vector<NvrtcOutput> programs;  // each CUBIN holds one or more of the kernels
  std::vector<int> program_of;        // per kernel: its program
};
CompiledKernels compile_cuda_kernels(const std::string& prelude, const std::vector<CudaKernelSource>& kernels,
                                     const NvrtcOptions& options = {});

// How many NVRTC programs compile at once: $KILN_COMPILE_THREADS, else the host's cores.
// (kiln fuzz --jobs J gives each of its J processes its share of the cores.)
int compile_threads();

// NVRTC's version, "11.8" or "13.0".
std::string nvrtc_version();

}  // namespace kiln::runtime::cuda
