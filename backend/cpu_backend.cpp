// The CPU backend: the host Target, the C++ emitter, clang+ORC through the kernel cache, and
// a Program that binds buffers (graph inputs in place, intermediates in one arena, outputs in
// the tensors returned) and runs the schedule step by step on the thread pool and OpenBLAS.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <unistd.h>

#include "backend/backend.h"
#include "backend/collective_step.h"
#include "backend/compile.h"
#include "backend/executable_state.h"
#include "backend/executor.h"
#include "backend/opaque_kernels.h"
#include "backend/host_layout.h"
#include "backend/profile.h"
#include "codegen/collective_schedule.h"
#include "codegen/cpp_emitter.h"
#include "ir/bytes.h"
#include "ir/error.h"
#include "passes/memory_plan.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/kernel_abi.h"

namespace kiln::backend {

namespace {

using codegen::GraphBuffer;
using codegen::MatmulCall;

// A custom op's own kernel (backend/opaque_kernels.h) on views of the run's buffers.
void run_opaque(const codegen::OpaqueCall& c, const std::vector<void*>& ptr, const std::string& graph) {
  const CpuOpaqueKernel* k = find_cpu_opaque_kernel(c.op);
  if (!k) fail("graph {}: {} has no CPU kernel ({})", graph, op_name(c.op), c.label);
  std::vector<HostTensor> in, out;
  for (size_t i = 0; i < c.inputs.size(); ++i) in.push_back(HostTensor::borrow(c.input_metas[i], ptr[c.inputs[i]]));
  for (size_t i = 0; i < c.outputs.size(); ++i) out.push_back(HostTensor::borrow(c.output_metas[i], ptr[c.outputs[i]]));
  try {
    (*k)(in, out, c.attrs);
  } catch (const std::exception& e) {
    fail("graph {}: the CPU kernel of {} ({}) failed: {}", graph, op_name(c.op), c.label, e.what());
  }
}

void run_matmul(const MatmulCall& mm, const void* a, const void* b, void* c) {
  KILN_INTERNAL_ASSERT(mm.epilogue == codegen::MatmulEpilogue::None, "the CPU target folds no epilogue into a matmul");
  int64_t out_bytes = mm.batch * mm.m * mm.n * dtype_size(mm.dtype);
  if (out_bytes == 0) return;
  if (mm.k == 0) {
    std::memset(c, 0, static_cast<size_t>(out_bytes));
    return;
  }
  // Integer matmuls are kernels (codegen's lower_int_matmul): BLAS multiplies floats only.
  int64_t lda = mm.trans_a ? mm.m : mm.k, ldb = mm.trans_b ? mm.k : mm.n;
  runtime::cpu::gemm_strided_batched(mm.dtype, mm.trans_a, mm.trans_b, mm.m, mm.n, mm.k, 1.0, a, lda, mm.a_batch_stride, b, ldb,
                                     mm.b_batch_stride, 0.0, c, mm.n, mm.m * mm.n, mm.batch);
}


using KernelFn = void (*)(void* const* buffers, const int64_t* scalars);

// The memory cap of this process's cgroup, the smallest along its path up to the root (a
// container, a systemd slice), and the file that sets it; nullopt when there is none. cgroup v2
// ("0::/path", memory.max, "max" for none) and v1 ("4:memory:/path", memory.limit_in_bytes,
// a huge number for none).
std::optional<std::pair<int64_t, std::string>> cgroup_memory_cap() {
  namespace fs = std::filesystem;
  std::optional<std::pair<int64_t, std::string>> cap;
  auto walk = [&](const fs::path& root, const std::string& path, const char* name) {
    const fs::path rel = fs::path(path).relative_path();
    for (fs::path dir = rel.empty() ? root : root / rel;; dir = dir.parent_path()) {
      std::string file = (dir / name).string();
      std::ifstream in(file);
      int64_t bytes = 0;
      if (in >> bytes && bytes > 0 && (!cap || bytes < cap->first)) cap = std::pair(bytes, file);
      if (dir == root || !dir.has_relative_path()) break;
    }
  };
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) == 0) walk("/sys/fs/cgroup", line.substr(3), "memory.max");
    size_t at = line.find(":memory:");
    if (at != std::string::npos) walk("/sys/fs/cgroup/memory", line.substr(at + 8), "memory.limit_in_bytes");
  }
  return cap;
}

// The memory of this machine, or less where this process's cgroup caps it: what a graph's
// tensors must fit in. nullopt where neither is known.
std::optional<MemoryBudget> host_memory_budget() {
  std::optional<MemoryBudget> budget;
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    int64_t bytes = static_cast<int64_t>(pages) * page;
    budget = MemoryBudget{bytes, fmt::format("this machine's {} of memory", format_bytes(bytes))};
  }
  if (auto cap = cgroup_memory_cap(); cap && (!budget || cap->first < budget->bytes))
    budget = MemoryBudget{cap->first, fmt::format("the {} of memory this process's cgroup allows ({})", format_bytes(cap->first), cap->second)};
  return budget;
}

// The intermediates' memory of one run. Allocated once and kept by the program: a fresh arena
// per run cost a zero-fill (or the kernel's page faults, which zero too) over all of it, more
// than the kernels themselves for memory-bound graphs. A new arena is filled once with 0xFF
// bytes (NaN in every float type, -1 in every integer type), so that a kernel that read an
// intermediate before writing it would show in every test instead of reading zeros by luck.
class ArenaPool {
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  using Block = std::unique_ptr<std::byte[], AlignedDelete>;

 public:
  ArenaPool(int64_t bytes, std::string graph) : bytes_(bytes), graph_(std::move(graph)) {}
  // An arena for one run, returned to the pool when the run ends.
  class Lease {
   public:
    Lease(ArenaPool* pool, Block block) : pool_(pool), block_(std::move(block)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (block_) pool_->give_back(std::move(block_));
    }
    std::byte* data() const { return block_.get(); }

   private:
    ArenaPool* pool_;
    Block block_;
  };
  Lease take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        Block b = std::move(free_.back());
        free_.pop_back();
        return Lease(this, std::move(b));
      }
    }
    size_t bytes = static_cast<size_t>(std::max<int64_t>(bytes_, 1));
    Block block;
    try {
      block.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    } catch (const std::bad_alloc&) {
      // The compile checked the machine's memory; what is free now may be less.
      fail("graph {}: out of memory allocating its arena of intermediates ({})", graph_, format_bytes(bytes_));
    }
    std::memset(block.get(), 0xFF, bytes);
    return Lease(this, std::move(block));
  }

 private:
  void give_back(Block block) {
    std::lock_guard lock(mu_);
    free_.push_back(std::move(block));
  }
  int64_t bytes_;
  std::string graph_;
  std::mutex mu_;
  std::vector<Block> free_;  // one per run that was in flight at once
};

class CpuProgram final : public Program {
 public:
  std::shared_ptr<runtime::cpu::CompiledModule> module;
  std::vector<KernelFn> kernels;  // per lowered kernel
  std::unique_ptr<ArenaPool> arenas;
  CollectiveGate collectives;

  std::vector<HostTensor> run(const ExecutableState& s, std::span<const HostTensor> inputs) const override;
};

// A run's buffers in host memory: inputs in place where laid out as the graph declares,
// intermediates in an arena of the program's pool, outputs as new host tensors.
class HostRunMemory final : public RunMemory {
 public:
  HostRunMemory(std::span<const HostTensor> inputs, ArenaPool& arenas, std::vector<HostTensor>& outputs)
      : inputs_(inputs), arenas_(arenas), outputs_(outputs) {}
  void* input(const GraphBuffer& gb) override {
    const HostTensor& t = inputs_[static_cast<size_t>(gb.input_index)];
    if (gb.meta.is_contiguous() && t.is_contiguous()) return const_cast<void*>(t.data());  // kernels only read inputs
    keep_.push_back(relayout(t, gb.meta, gb.numel));
    return keep_.back().data();
  }
  void* arena(int64_t) override {
    lease_.emplace(arenas_.take());
    return lease_->data();
  }
  void* output(size_t o, const TensorMeta& meta) override {
    // Every element of an output is written by its kernel: no zero-fill.
    outputs_[o] = HostTensor::uninitialized(meta);
    return outputs_[o].data();
  }

 private:
  std::span<const HostTensor> inputs_;
  ArenaPool& arenas_;
  std::vector<HostTensor>& outputs_;
  std::vector<HostTensor> keep_;  // relaid-out inputs
  std::optional<ArenaPool::Lease> lease_;
};

// The steps on the host: kernels on kiln's thread pool, GEMMs through OpenBLAS, collectives on
// threads of their own (one after another, in the order every rank runs them), the host clock.
class HostSteps final : public DeviceSteps {
 public:
  HostSteps(const ExecutableState& s, const CpuProgram& p) : s_(s), p_(p) {}
  void kernel(const codegen::Step& step, const std::vector<void*>& ptr) override {
    args_.clear();
    for (int b : step.args) args_.push_back(ptr[static_cast<size_t>(b)]);
    p_.kernels[static_cast<size_t>(step.kernel)](args_.data(), nullptr);
    if (auto err = runtime::cpu::take_kernel_index_error())
      fail("{}", index_error_message(s_, s_.lowered.kernels[static_cast<size_t>(step.kernel)], err->site, err->str()));
  }
  void gemm(const MatmulCall& mm, const std::vector<void*>& ptr) override {
    run_matmul(mm, ptr[static_cast<size_t>(mm.a)], ptr[static_cast<size_t>(mm.b)], ptr[static_cast<size_t>(mm.out)]);
  }
  void opaque(size_t, const codegen::OpaqueCall& c, const std::vector<void*>& ptr) override { run_opaque(c, ptr, s_.graph_name); }
  int start_collective(const codegen::OpaqueCall& c, void* in, void* out) override {
    if (is_local_copy(c)) {
      run_host_collective(s_, p_.collectives, c, in, out);
      return -1;
    }
    // On a thread of its own, after the transfer before it (every rank runs them in one
    // order), while the steps after it run (codegen/collective_schedule.h keeps its input
    // alive until its result is read).
    std::shared_future<void> before = last_transfer_;
    const ExecutableState& s = s_;
    const CollectiveGate& gate = p_.collectives;
    last_transfer_ = std::async(std::launch::async, [&s, &gate, &c, in, out, before] {
                       if (before.valid()) before.get();
                       run_host_collective(s, gate, c, in, out);
                     }).share();
    transfers_.push_back(last_transfer_);
    return static_cast<int>(transfers_.size()) - 1;
  }
  void wait_collective(int token) override { transfers_.at(static_cast<size_t>(token)).get(); }  // rethrows its error
  bool can_time() const override { return true; }
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> mark_ms() override {
    std::vector<double> out;
    for (const auto& m : marks_) out.push_back(std::chrono::duration<double, std::milli>(m - marks_.front()).count());
    return out;
  }
  // Transfers not waited for (a step failed): wait before their buffers go away.
  ~HostSteps() override {
    for (std::shared_future<void>& t : transfers_)
      if (t.valid()) t.wait();
  }

 private:
  const ExecutableState& s_;
  const CpuProgram& p_;
  std::vector<void*> args_;
  std::shared_future<void> last_transfer_;
  std::vector<std::shared_future<void>> transfers_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

std::vector<HostTensor> CpuProgram::run(const ExecutableState& s, std::span<const HostTensor> inputs) const {
  const codegen::LoweredGraph& lg = s.lowered;
  std::vector<HostTensor> outputs(lg.outputs.size());
  HostRunMemory memory(inputs, *arenas, outputs);
  const std::vector<void*> ptr = bind_buffers(lg, memory, s.arena_bytes);
  runtime::cpu::take_kernel_error();  // a stale report from an earlier failed run is not ours
  {
    HostSteps steps(s, *this);
    run_steps(s, steps, ptr);
  }
  // An output returned twice was written once: each other position gets its own copy.
  for (auto [o, first] : duplicate_outputs(lg)) outputs[o] = outputs[first].clone();
  return outputs;
}

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  codegen::Target target(const CompileOptions&) const override { return codegen::cpu_target(); }
  std::string_view prelude() const override { return codegen::cpp_prelude(); }
  std::string emit_kernel(const codegen::Kernel& k) const override { return codegen::emit_cpp_kernel(k); }
  std::string source_file_name() const override { return "kernels.cpp"; }
  std::optional<MemoryBudget> memory_budget(const CompileOptions&) const override { return host_memory_budget(); }
  std::shared_ptr<const Program> compile(const ExecutableState& state, const CompileOptions& options,
                                         CompileReport& report) const override {
    for (const codegen::Step& st : state.lowered.steps)
      if (st.kind == codegen::Step::Kind::Opaque && !find_cpu_opaque_kernel(st.opaque.op))
        fail("graph {}: {} has no CPU kernel ({}); register one with the op to compile it for the CPU", state.graph_name,
             op_name(st.opaque.op), st.opaque.label);
    auto p = std::make_shared<CpuProgram>();
    p->arenas = std::make_unique<ArenaPool>(state.arena_bytes, state.graph_name);
    if (!state.lowered.kernels.empty()) {
      try {
        p->module = runtime::cpu::compile(state.source, options.jit);
      } catch (const runtime::cpu::SourceError& e) {
        // One module holds every kernel: the line of clang's first error says which one failed.
        int k = state.emitted.kernel_at_line(e.line());
        if (k < 0) fail("graph {}: the generated C++ module failed to compile (outside every kernel): {}", state.graph_name, e.what());
        throw kiln::Error(kernel_compile_error_message(state, static_cast<size_t>(k), e.what()));
      }
      report.jit = p->module->stats();
      for (const codegen::Kernel& k : state.lowered.kernels)
        p->kernels.push_back(reinterpret_cast<KernelFn>(p->module->symbol(k.name)));
    }
    const runtime::cpu::CompileStats& j = report.jit;
    report.compiler = fmt::format("jit: clang {:.2f} ms, codegen {:.2f} ms, link {:.2f} ms{}", j.frontend_ms, j.codegen_ms, j.link_ms,
                                  j.cache_hit ? " (cache hit)" : "");
    return p;
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}


}  // namespace kiln::backend
