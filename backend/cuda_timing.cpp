// The CUDA backend's answers to schedule tuning (backend/autotune.h): the device a choice
// holds for, and each candidate schedule's time on it.
#if KILN_HAVE_CUDA
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "backend/cuda_backend.h"
#include "backend/profile.h"
#include "codegen/cuda_emitter.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"

namespace kiln::backend {

namespace cu = runtime::cuda;

namespace {

// Runs per candidate: enough for a median that one slow run does not move, few enough that a
// graph of 40 kernels with 5 candidates each tunes in a few seconds.
constexpr int kFewestRuns = 5;
constexpr int kMostRuns = 40;
constexpr double kRunBudgetMs = 10.0;  // per candidate, flushes included

}  // namespace

std::optional<std::string> cuda_tuning_device(const CompileOptions& options, std::string* why) {
  if (!cuda_device_present(why)) return std::nullopt;
  if (options.device.index >= cu::device_count()) {
    if (why) *why = fmt::format("device cuda:{} does not exist", options.device.index);
    return std::nullopt;
  }
  const cu::DeviceInfo& info = cu::device_info(options.device.index);
  return fmt::format("{}, {} SMs, {}, driver {}", info.name, info.num_sms, cu::arch_name(info), cu::driver_version_string());
}

std::vector<double> time_cuda_kernels(const std::vector<codegen::Kernel>& candidates, const CompileOptions& options) {
  if (candidates.empty()) return {};
  const int device = options.device.index;
  const cu::DeviceInfo& info = cu::device_info(device);
  std::vector<cu::CudaKernelSource> sources;
  for (const codegen::Kernel& k : candidates) sources.push_back({k.name, codegen::emit_cuda_kernel(k)});
  cu::CompiledKernels binaries =
      cu::compile_cuda_kernels(std::string(codegen::cuda_prelude()), sources, generated_kernel_options(cu::arch_name(info), options.jit.use_cache));
  std::vector<cu::Module> modules;
  for (size_t m = 0; m < binaries.programs.size(); ++m) modules.emplace_back(binaries.programs[m].cubin, fmt::format("tuning program {}", m), device);
  std::vector<CUfunction> functions;
  std::vector<int64_t> grids;  // as a graph's run launches each (cuda_launch_grid)
  for (size_t c = 0; c < candidates.size(); ++c) {
    functions.push_back(modules[static_cast<size_t>(binaries.program_of[c])].function(candidates[c].name));
    grids.push_back(cuda_launch_grid(candidates[c], functions.back(), device));
  }

  // The kernel's buffers, zero-filled (every index a gather reads is then in range), the same
  // for every candidate (the candidates differ in schedule only).
  cu::Stream stream(device);
  std::vector<cu::DeviceBuffer> buffers;
  std::vector<CUdeviceptr> args;
  for (const codegen::Buffer& b : candidates[0].buffers) {
    size_t bytes = std::max<size_t>(16, static_cast<size_t>(b.numel) * static_cast<size_t>(dtype_size(b.dtype)));
    buffers.push_back(cu::device_alloc(bytes, device));
    cu::memset_async(buffers.back()->data(), 0, bytes, stream);
    args.push_back(cu::device_ptr(buffers.back()->data()));
  }
  std::vector<void*> argp;
  for (CUdeviceptr& a : args) argp.push_back(&a);
  // Written before each timed run, so that a kernel whose data fits in L2 is timed as a graph
  // runs it (its inputs just written by other kernels, mostly evicted), not from a warm L2.
  size_t flush_bytes = static_cast<size_t>(std::max<int64_t>(2 * info.l2_bytes, 64 << 20));
  cu::DeviceBuffer flush = cu::device_alloc(flush_bytes, device);

  auto launch = [&](size_t c) {
    const codegen::Kernel& k = candidates[c];
    cu::launch(functions[c], cu::Dim3{static_cast<unsigned>(grids[c])}, cu::Dim3{static_cast<unsigned>(k.launch.block)},
               static_cast<unsigned>(k.launch.dynamic_shared_bytes), stream, argp.data(), k.name);
  };
  std::vector<double> out;
  for (size_t c = 0; c < candidates.size(); ++c) {
    // A first run (module loading, instruction cache), then one to size the count of runs.
    launch(c);
    cu::synchronize_and_check(stream, fmt::format("tuning candidate {}", candidates[c].name));
    cu::Event a(device), b(device);
    cu::memset_async(flush->data(), 0, flush_bytes, stream);
    a.record(stream);
    launch(c);
    b.record(stream);
    b.synchronize();
    double first = cu::elapsed_ms(a, b);
    int runs = std::clamp(static_cast<int>(kRunBudgetMs / (first + 0.05)), kFewestRuns, kMostRuns);
    std::deque<cu::Event> marks;
    for (int r = 0; r < runs; ++r) {
      cu::memset_async(flush->data(), 0, flush_bytes, stream);
      marks.emplace_back(device);
      marks.back().record(stream);
      launch(c);
      marks.emplace_back(device);
      marks.back().record(stream);
    }
    cu::synchronize_and_check(stream, fmt::format("tuning candidate {}", candidates[c].name));
    std::vector<double> ms;
    for (size_t r = 0; r + 1 < marks.size(); r += 2) ms.push_back(cu::elapsed_ms(marks[r], marks[r + 1]));
    out.push_back(median_of(ms));
  }
  return out;
}

std::vector<runtime::TuningOutcome> tune_cuda_matmuls(const codegen::LoweredGraph& lowered, const CompileOptions& options) {
  std::vector<runtime::TuningOutcome> out;
  const int device = options.device.index;
  cu::Stream stream(device);
  for (const codegen::Step& step : lowered.steps) {
    if (step.kind != codegen::Step::Kind::Matmul || !is_floating(step.matmul.dtype)) continue;
    const codegen::MatmulCall& mm = step.matmul;
    const size_t esize = static_cast<size_t>(dtype_size(mm.dtype));
    auto scratch = [&](int64_t stride, int64_t one, int64_t batch) {
      size_t elements = static_cast<size_t>(std::max<int64_t>(1, stride * (batch - 1) + one));
      cu::DeviceBuffer buf = cu::device_alloc(elements * esize, device);
      cu::memset_async(buf->data(), 0, elements * esize, stream);
      return buf;
    };
    cu::DeviceBuffer a = scratch(mm.a_batch_stride, mm.m * mm.k, mm.batch), b = scratch(mm.b_batch_stride, mm.k * mm.n, mm.batch),
                     c = scratch(mm.m * mm.n, mm.m * mm.n, mm.batch), bias = scratch(0, mm.n, 1);
    cu::GemmOptions go;
    go.allow_tf32 = options.run.allow_tf32;
    go.autotune = true;
    runtime::TuningOutcome tuned;
    go.tuned = &tuned;
    queue_matmul(mm, a->data(), b->data(), c->data(), mm.bias >= 0 ? bias->data() : nullptr, stream, go);
    cu::synchronize_and_check(stream, "tuning " + mm.label);
    out.push_back(tuned);
  }
  return out;
}

}  // namespace kiln::backend
#endif  // KILN_HAVE_CUDA
