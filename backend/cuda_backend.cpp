// The CUDA backend (see cuda_backend.h). Built where a CUDA toolkit was found.
#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "backend/backend.h"
#include "backend/executable_state.h"
#include "backend/executor.h"
#include "backend/collective_step.h"
#include "codegen/collective_schedule.h"
#include "backend/opaque_kernels.h"
#include "backend/profile.h"
#include "backend/host_layout.h"
#include "codegen/cuda_emitter.h"
#include "ir/bytes.h"
#include "ir/error.h"
#include "ir/log.h"
#include "passes/memory_plan.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nccl.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/cuda/stream.h"

namespace kiln::backend {

namespace cu = runtime::cuda;
using codegen::GraphBuffer;
using codegen::MatmulCall;

namespace {

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  if (!f) fail("cannot write {}", p.string());
  f << bytes;
}

// What to call the NVRTC program `m` of `binaries` (in messages and dumped file names): its
// kernels, "k0+k3+k5", or "k0_and_11_more" for a long list.
std::string program_label(const cu::CompiledKernels& binaries, const std::vector<codegen::Kernel>& kernels, size_t m) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kernels.size(); ++i)
    if (binaries.program_of[i] == static_cast<int>(m)) names.push_back(kernels[i].name);
  if (names.empty()) return fmt::format("program{}", m);
  if (names.size() <= 4) return fmt::format("{}", fmt::join(names, "+"));
  return fmt::format("{}_and_{}_more", names.front(), names.size() - 1);
}

// The device buffers of one run: every graph buffer's address.
struct Bindings {
  std::vector<void*> ptr;
  std::vector<cu::DeviceBuffer> keep;  // what the run allocated (arena, relaid-out inputs)
};

// The CUDA backend's DeviceStorage: a DeviceTensor (its buffer shared with every copy).
class CudaStorage final : public DeviceStorage {
 public:
  explicit CudaStorage(cu::DeviceTensor t) : t_(std::move(t)) {}
  const TensorMeta& meta() const override { return t_.meta(); }
  HostTensor to_host() const override { return t_.to_host(); }
  const cu::DeviceTensor& tensor() const { return t_; }

 private:
  cu::DeviceTensor t_;
};

class CudaProgram final : public Program {
 public:
  int device = 0;
  RunOptions run_options;  // as compiled (cuda_graphs off in a process group: see compile)
  // The generated kernels' NVRTC programs (each CUBIN holds one or more kernels) and, per
  // kernel, which program holds it.
  cu::CompiledKernels binaries;
  // Per kernel: the function it launches. A kernel whose code is an earlier one's but for its
  // name and comments (a model's repeated layers) launches that one's, compiled once.
  std::vector<std::string> entries;
  std::string arch;
  // Custom ops' own kernels (backend/opaque_kernels.h), per opaque step in schedule order.
  struct OpaqueLaunch {
    int step = -1;
    std::string entry;
    CudaLaunch launch;
    cu::NvrtcOutput binary;
  };
  std::vector<OpaqueLaunch> opaque;
  std::vector<int> opaque_of_step;  // per step: index into `opaque`, or -1
  // Collectives, which in a process group go through its NCCL communicator: a run then waits
  // for its stream with the group's timeout (a peer may never come).
  bool group_collectives = false;
  CollectiveGate collectives;

  std::vector<HostTensor> run(const ExecutableState& s, std::span<const HostTensor> inputs) const override;
  std::vector<cu::DeviceTensor> run_device(const ExecutableState& s, std::span<const cu::DeviceTensor> inputs) const;
  std::vector<StoragePtr> run_on_device(const ExecutableState& s, std::span<const StoragePtr> inputs) const override;
  std::vector<int64_t> launched_grids() const override { return loaded_ ? loaded_->grids : std::vector<int64_t>{}; }

  // Loaded on first use (a machine with no GPU compiles but never loads).
  struct Loaded {
    std::vector<cu::Module> modules;     // per program
    std::vector<CUfunction> functions;  // per kernel
    std::vector<int64_t> grids;         // per kernel: the grid it launches with (cuda_launch_grid)
    std::vector<cu::Module> opaque_modules;
    std::vector<CUfunction> opaque_functions;
    std::optional<cu::Stream> stream;
    std::optional<cu::Stream> comm_stream;  // collectives through NCCL, beside the kernels
    // One error record per module, each module's kiln_error_slot pointing at its own: a run
    // reads them all with one copy, and clears them only after an error. A record's site
    // (LoweredGraph::index_checks) says which kernel of the module reported.
    cu::DeviceBuffer error_records;
    // CUDA graphs: static buffers the captured launches read and write, and the graph.
    std::vector<cu::DeviceTensor> static_inputs, static_outputs;
    cu::DeviceBuffer static_arena;
    std::unique_ptr<cu::GraphCapture> graph;
  };
  // Queues a custom op's own kernel: input and output pointers, the first output's element
  // count, the numeric attributes as doubles (backend/opaque_kernels.h's calling convention).
  static void launch_opaque(const codegen::OpaqueCall& c, const OpaqueLaunch& o, CUfunction fn, const std::vector<void*>& ptr,
                            cu::Stream& stream);

 private:
  Loaded& load(const ExecutableState& s) const;
  void check_errors(const ExecutableState& s, Loaded& L) const;

  mutable std::mutex mu_;  // one run at a time (one stream, the graph's static buffers)
  mutable std::unique_ptr<Loaded> loaded_;
};

void require_device(int device) {
  std::string why;
  if (!cu::driver_available(&why)) {
    const std::string_view said = "no CUDA device: ";
    if (why.rfind(said, 0) == 0) why.erase(0, said.size());
    fail("no CUDA device is present ({}); kiln compile --device cuda still works without one", why);
  }
  if (device >= cu::device_count())
    fail("device cuda:{} does not exist: this machine has {} CUDA device{}", device, cu::device_count(), cu::device_count() == 1 ? "" : "s");
}

// Refuses a run that cannot fit in what `device` has free now, before allocating any of it:
// the allocator would fail halfway with a message that names no graph.
void check_device_memory(const ExecutableState& s, bool with_inputs, int device) {
  cu::DeviceMemory m = cu::device_memory(device);
  check_memory(s, with_inputs, m.available_bytes,
               fmt::format("the {} free on cuda:{} (of {})", format_bytes(m.available_bytes), device, format_bytes(m.total_bytes)));
}

CudaProgram::Loaded& CudaProgram::load(const ExecutableState& s) const {
  if (loaded_) return *loaded_;
  require_device(device);
  const cu::DeviceInfo& info = cu::device_info(device);
  if (cu::arch_name(info) != arch)
    fail("graph {} was compiled for {} but cuda:{} is {} ({}): compile it for this device", s.graph_name, arch, device,
         cu::arch_name(info), info.name);
  auto L = std::make_unique<Loaded>();
  for (size_t m = 0; m < binaries.programs.size(); ++m)
    L->modules.emplace_back(binaries.programs[m].cubin, program_label(binaries, s.lowered.kernels, m), device);
  for (size_t i = 0; i < s.lowered.kernels.size(); ++i) {
    const codegen::Kernel& k = s.lowered.kernels[i];
    L->functions.push_back(L->modules[static_cast<size_t>(binaries.program_of[i])].function(entries.empty() ? k.name : entries[i]));
    L->grids.push_back(cuda_launch_grid(k, L->functions.back(), device));
  }
  for (const OpaqueLaunch& o : opaque) {
    L->opaque_modules.emplace_back(o.binary.cubin, o.entry, device);
    L->opaque_functions.push_back(L->opaque_modules.back().function(o.entry));
  }
  L->stream.emplace(device);
  if (!L->modules.empty()) {
    size_t bytes = L->modules.size() * sizeof(codegen::CudaErrorRecord);
    L->error_records = cu::device_alloc(bytes, device);
    cu::memset_async(L->error_records->data(), 0, bytes, *L->stream);
    for (size_t i = 0; i < L->modules.size(); ++i) {
      void* slot = static_cast<std::byte*>(L->error_records->data()) + i * sizeof(codegen::CudaErrorRecord);
      CUdeviceptr at = L->modules[i].global(codegen::kCudaErrorSlotSymbol);
      cu::copy_host_to_device(reinterpret_cast<void*>(at), &slot, sizeof slot, device);
    }
    L->stream->synchronize();
  }
  loaded_ = std::move(L);
  return *loaded_;
}

void CudaProgram::launch_opaque(const codegen::OpaqueCall& c, const OpaqueLaunch& o, CUfunction fn, const std::vector<void*>& ptr,
                                cu::Stream& stream) {
  std::vector<CUdeviceptr> ptrs;
  for (int b : c.inputs) ptrs.push_back(cu::device_ptr(ptr[b]));
  for (int b : c.outputs) ptrs.push_back(cu::device_ptr(ptr[b]));
  long long n = c.output_metas.empty() ? 0 : c.output_metas[0].numel();
  std::vector<double> attrs;
  for (const ArgSpec& a : op_info(c.op).schema.attrs) {
    if (!is_numeric(a.type)) continue;
    const AttrValue* v = c.attrs.find(a.name);
    double d = std::numeric_limits<double>::quiet_NaN();
    if (v) {
      if (auto* i = std::get_if<int64_t>(v)) d = static_cast<double>(*i);
      else if (auto* bl = std::get_if<bool>(v)) d = *bl;
      else if (auto* f = std::get_if<double>(v)) d = *f;
    }
    attrs.push_back(d);
  }
  std::vector<void*> argp;
  for (CUdeviceptr& p : ptrs) argp.push_back(&p);
  argp.push_back(&n);
  for (double& d : attrs) argp.push_back(&d);
  std::vector<long long> extra = o.launch.args;
  for (long long& a : extra) argp.push_back(&a);
  cu::launch(fn, cu::Dim3{static_cast<unsigned>(o.launch.grid)}, cu::Dim3{static_cast<unsigned>(o.launch.block)},
             o.launch.shared_bytes, stream, argp.data(), o.entry);
}

void CudaProgram::check_errors(const ExecutableState& s, Loaded& L) const {
  if (group_collectives)
    if (runtime::dist::ProcessGroup* g = runtime::dist::default_group())
      cu::wait_for_collectives(*g, *L.stream, fmt::format("graph {}", s.graph_name));
  cu::synchronize_and_check(*L.stream, fmt::format("graph {}", s.graph_name));
  if (binaries.programs.empty()) return;
  std::vector<codegen::CudaErrorRecord> recs(binaries.programs.size());
  size_t bytes = recs.size() * sizeof(codegen::CudaErrorRecord);
  cu::copy_device_to_host(recs.data(), L.error_records->data(), bytes, device);
  for (size_t i = 0; i < recs.size(); ++i) {
    if (!recs[i].flag) continue;
    cu::memset_async(L.error_records->data(), 0, bytes, *L.stream);  // the next run starts clean
    L.stream->synchronize();
    const std::vector<int>& owner = s.lowered.index_check_kernel;
    size_t kernel = 0;
    if (recs[i].site >= 0 && static_cast<size_t>(recs[i].site) < owner.size()) kernel = static_cast<size_t>(owner[static_cast<size_t>(recs[i].site)]);
    else  // no site to go by: the module's first kernel
      while (kernel + 1 < s.lowered.kernels.size() && binaries.program_of[kernel] != static_cast<int>(i)) ++kernel;
    const codegen::Kernel& k = s.lowered.kernels[kernel];
    fail("{}", index_error_message(s, k, recs[i].site,
                                   fmt::format("index {} is out of range for a dimension of size {}", recs[i].index, recs[i].size)));
  }
}

// The steps on the GPU: kernels, cuBLASLt GEMMs and custom ops' kernels queued on the program's
// stream, collectives on the communication stream (NCCL), CUDA events as time marks (not while a
// CUDA graph is being captured: events would become graph nodes).
class GpuSteps final : public DeviceSteps {
 public:
  GpuSteps(const ExecutableState& s, const CudaProgram& p, CudaProgram::Loaded& L) : s_(s), p_(p), L_(L) {}
  void kernel(const codegen::Step& step, const std::vector<void*>& ptr) override {
    const codegen::Kernel& k = s_.lowered.kernels[static_cast<size_t>(step.kernel)];
    args_.assign(step.args.size(), 0);
    argp_.assign(step.args.size(), nullptr);
    for (size_t j = 0; j < step.args.size(); ++j) {
      args_[j] = cu::device_ptr(ptr[static_cast<size_t>(step.args[j])]);
      argp_[j] = &args_[j];
    }
    cu::launch(L_.functions[static_cast<size_t>(step.kernel)], cu::Dim3{static_cast<unsigned>(L_.grids[static_cast<size_t>(step.kernel)])},
               cu::Dim3{static_cast<unsigned>(k.launch.block)}, static_cast<unsigned>(k.launch.dynamic_shared_bytes), *L_.stream,
               argp_.data(), k.name);
  }
  void gemm(const MatmulCall& mm, const std::vector<void*>& ptr) override {
    if (!is_floating(mm.dtype)) fail("graph {}: {} matmul on CUDA: cuBLASLt multiplies floats only ({})", s_.graph_name, dtype_name(mm.dtype), mm.label);
    cu::GemmOptions go;
    go.allow_tf32 = p_.run_options.allow_tf32;
    queue_matmul(mm, ptr[static_cast<size_t>(mm.a)], ptr[static_cast<size_t>(mm.b)], ptr[static_cast<size_t>(mm.out)],
                 mm.bias >= 0 ? ptr[static_cast<size_t>(mm.bias)] : nullptr, *L_.stream, go);
  }
  void opaque(size_t step_index, const codegen::OpaqueCall& c, const std::vector<void*>& ptr) override {
    const int oi = p_.opaque_of_step[step_index];
    CudaProgram::launch_opaque(c, p_.opaque[static_cast<size_t>(oi)], L_.opaque_functions[static_cast<size_t>(oi)], ptr, *L_.stream);
  }
  int start_collective(const codegen::OpaqueCall& c, void* in, void* out) override {
    if (is_local_copy(c)) {
      if (in != out) cu::copy_device_to_device_async(out, in, static_cast<size_t>(c.output_metas.at(0).nbytes()), *L_.stream);
      return -1;
    }
    // On the communication stream, after the kernels queued so far, while the kernels after it
    // run; the compute stream waits for it before the first step that touches its result.
    if (!L_.comm_stream) L_.comm_stream.emplace(p_.device);
    cu::Event ready(p_.device);
    ready.record(*L_.stream);
    ready.make_wait(*L_.comm_stream);
    cu::run_nccl(p_.collectives.group(s_, c), collective_args(c, in, out), p_.device, *L_.comm_stream);
    done_.emplace_back(p_.device);
    done_.back().record(*L_.comm_stream);
    return static_cast<int>(done_.size()) - 1;
  }
  void wait_collective(int token) override { done_.at(static_cast<size_t>(token)).make_wait(*L_.stream); }
  bool can_time() const override { return !(L_.graph && L_.graph->capturing()); }
  void mark() override {
    marks_.emplace_back(p_.device);
    marks_.back().record(*L_.stream);
  }
  std::vector<double> mark_ms() override {
    marks_.back().synchronize();
    std::vector<double> out;
    for (cu::Event& m : marks_) out.push_back(cu::elapsed_ms(marks_.front(), m));
    return out;
  }

 private:
  const ExecutableState& s_;
  const CudaProgram& p_;
  CudaProgram::Loaded& L_;
  std::vector<CUdeviceptr> args_;
  std::vector<void*> argp_;
  std::deque<cu::Event> done_;   // per collective started: recorded after it on the communication stream
  std::deque<cu::Event> marks_;
};

// A run's buffers in device memory: graph inputs that are device tensors already, the arena and
// the outputs allocated for the run.
class DeviceRunMemory final : public RunMemory {
 public:
  DeviceRunMemory(const ExecutableState& s, std::span<const cu::DeviceTensor> inputs, std::vector<cu::DeviceTensor>& outputs, int device)
      : s_(s), inputs_(inputs), outputs_(outputs), device_(device) {}
  void* input(const GraphBuffer& gb) override {
    const cu::DeviceTensor& t = inputs_[static_cast<size_t>(gb.input_index)];
    if (t.meta().strides != gb.meta.strides)
      fail("input {} (%{}) of graph {}: strides {} on the device, the graph declares {} (copy it to that layout first)", gb.input_index,
           s_.input_names[static_cast<size_t>(gb.input_index)], s_.graph_name, shape_str(t.meta().strides), shape_str(gb.meta.strides));
    // Kernels read and write 16 bytes at a time where they can (codegen/cuda_emitter.h).
    if (reinterpret_cast<uintptr_t>(t.data()) % 16 != 0)
      fail("input {} (%{}) of graph {} starts {} bytes past a 16-byte boundary (a view at an element offset): pass a copy",
           gb.input_index, s_.input_names[static_cast<size_t>(gb.input_index)], s_.graph_name, reinterpret_cast<uintptr_t>(t.data()) % 16);
    return t.data();
  }
  void* arena(int64_t bytes) override {
    arena_ = cu::device_alloc(static_cast<size_t>(bytes), device_);
    return arena_->data();
  }
  void* output(size_t o, const TensorMeta& meta) override {
    outputs_[o] = cu::DeviceTensor::empty(meta.on(Device::cuda(device_)));
    return outputs_[o].data();
  }

 private:
  const ExecutableState& s_;
  std::span<const cu::DeviceTensor> inputs_;
  std::vector<cu::DeviceTensor>& outputs_;
  int device_;
  cu::DeviceBuffer arena_;
};

// The static buffers of a program run as a CUDA graph: allocated once, captured once.
class StaticRunMemory final : public RunMemory {
 public:
  StaticRunMemory(CudaProgram::Loaded& L, int device) : L_(L), device_(device) {}
  void* input(const GraphBuffer& gb) override { return L_.static_inputs.at(static_cast<size_t>(gb.input_index)).data(); }
  void* arena(int64_t bytes) override {
    L_.static_arena = cu::device_alloc(static_cast<size_t>(bytes), device_);
    return L_.static_arena->data();
  }
  void* output(size_t o, const TensorMeta& meta) override {
    L_.static_outputs.at(o) = cu::DeviceTensor::empty(meta.on(Device::cuda(device_)));
    return L_.static_outputs[o].data();
  }

 private:
  CudaProgram::Loaded& L_;
  int device_;
};

std::vector<cu::DeviceTensor> CudaProgram::run_device(const ExecutableState& s, std::span<const cu::DeviceTensor> inputs) const {
  std::lock_guard lock(mu_);
  Loaded& L = load(s);
  cu::ScopedContext ctx(device);
  const codegen::LoweredGraph& lg = s.lowered;
  check_device_memory(s, /*with_inputs=*/false, device);  // the inputs are on the device already
  std::vector<cu::DeviceTensor> outputs(lg.outputs.size());
  DeviceRunMemory memory(s, inputs, outputs, device);
  const std::vector<void*> ptr = bind_buffers(lg, memory, s.arena_bytes);
  GpuSteps steps(s, *this, L);
  run_steps(s, steps, ptr);
  // An output returned twice was written once: each other position gets its own copy.
  for (auto [o, first] : duplicate_outputs(lg)) {
    outputs[o] = cu::DeviceTensor::empty(outputs[first].meta());
    cu::copy_device_to_device_async(outputs[o].data(), outputs[first].data(), outputs[o].nbytes(), *L.stream);
  }
  check_errors(s, L);
  return outputs;
}

std::vector<StoragePtr> CudaProgram::run_on_device(const ExecutableState& s, std::span<const StoragePtr> inputs) const {
  std::vector<cu::DeviceTensor> in;
  for (const StoragePtr& t : inputs) in.push_back(cuda_tensor(*t));
  std::vector<StoragePtr> out;
  for (cu::DeviceTensor& t : run_device(s, in)) out.push_back(cuda_storage(std::move(t)));
  return out;
}

std::vector<HostTensor> CudaProgram::run(const ExecutableState& s, std::span<const HostTensor> inputs) const {
  if (!run_options.cuda_graphs) {
    require_device(device);
    check_device_memory(s, /*with_inputs=*/true, device);
    std::vector<cu::DeviceTensor> dev;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorMeta& want = s.input_metas[i];
      if (want.is_contiguous()) {
        dev.push_back(cu::DeviceTensor::from_host(inputs[i], device));
      } else {
        // The graph declares a strided layout: lay the host copy out that way first.
        int64_t extent = cu::device_storage_extent(want);
        HostTensor flat = relayout(inputs[i], want, extent);
        cu::DeviceTensor d = cu::DeviceTensor::from_host(flat, device);
        dev.emplace_back(d.storage(), want.on(Device::cuda(device)));
      }
    }
    std::vector<cu::DeviceTensor> out = run_device(s, dev);
    std::vector<HostTensor> host;
    for (auto& t : out) host.push_back(t.to_host());
    return host;
  }
  // CUDA graphs: the launches are recorded once over static buffers and replayed; each run
  // copies its inputs into the static inputs and the outputs out of the static outputs.
  std::lock_guard lock(mu_);
  Loaded& L = load(s);
  cu::ScopedContext ctx(device);
  const codegen::LoweredGraph& lg = s.lowered;
  if (!L.graph) {
    check_device_memory(s, /*with_inputs=*/true, device);  // the static buffers hold all three
    for (size_t i = 0; i < s.input_metas.size(); ++i) {
      TensorMeta m = s.input_metas[i];
      L.static_inputs.emplace_back(cu::device_alloc(static_cast<size_t>(cu::device_storage_extent(m) * dtype_size(m.dtype)), device),
                                   m.on(Device::cuda(device)));
    }
    L.static_outputs.assign(lg.outputs.size(), cu::DeviceTensor());
    StaticRunMemory memory(L, device);
    const std::vector<void*> ptr = bind_buffers(lg, memory, s.arena_bytes);
    L.graph = std::make_unique<cu::GraphCapture>(*L.stream);
    GpuSteps steps(s, *this, L);
    run_steps(s, steps, ptr);
    for (auto [o, first] : duplicate_outputs(lg)) {
      L.static_outputs[o] = cu::DeviceTensor::empty(L.static_outputs[first].meta());
      cu::copy_device_to_device_async(L.static_outputs[o].data(), L.static_outputs[first].data(), L.static_outputs[o].nbytes(), *L.stream);
    }
    L.graph->end();
    if (log_enabled("cuda")) log_line("cuda", fmt::format("graph {}: captured {} launches as a CUDA graph", s.graph_name, L.graph->num_nodes()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = s.input_metas[i];
    HostTensor flat = want.is_contiguous() ? inputs[i].contiguous() : relayout(inputs[i], want, cu::device_storage_extent(want));
    cu::copy_host_to_device_async(L.static_inputs[i].data(), flat.data(), static_cast<size_t>(flat.nbytes()), *L.stream);
    L.stream->synchronize();  // `flat` is freed at the end of this iteration
  }
  L.graph->replay(*L.stream);
  check_errors(s, L);
  std::vector<HostTensor> host;
  for (auto& t : L.static_outputs) host.push_back(t.to_host());
  return host;
}

}  // namespace

int64_t cuda_launch_grid(const codegen::Kernel& k, CUfunction fn, int device) {
  if (!k.launch.persistent || k.launch.cluster > 1) return k.launch.grid;
  int per_sm = cu::resident_blocks_per_sm(fn, static_cast<int>(k.launch.block), static_cast<unsigned>(k.launch.dynamic_shared_bytes), device);
  if (per_sm <= 0) return k.launch.grid;  // fits no SM: the launch says why
  return std::max<int64_t>(1, std::min<int64_t>(k.launch.grid, int64_t(per_sm) * cu::device_info(device).num_sms));
}

void queue_matmul(const MatmulCall& mm, const void* a, const void* b, void* out, const void* bias, cu::Stream& stream,
                  cu::GemmOptions go) {
  int64_t lda = mm.trans_a ? mm.m : mm.k, ldb = mm.trans_b ? mm.k : mm.n;
  switch (mm.epilogue) {
    case codegen::MatmulEpilogue::None: break;
    case codegen::MatmulEpilogue::Bias: go.epilogue = cu::Epilogue::Bias; break;
    case codegen::MatmulEpilogue::BiasRelu: go.epilogue = cu::Epilogue::BiasRelu; break;
    case codegen::MatmulEpilogue::BiasGelu: go.epilogue = cu::Epilogue::BiasGelu; break;
  }
  go.bias = bias;
  cu::gemm_strided_batched(mm.dtype, mm.trans_a, mm.trans_b, mm.m, mm.n, mm.k, 1.0, a, lda, mm.a_batch_stride, b, ldb, mm.b_batch_stride,
                           0.0, out, mm.n, mm.m * mm.n, mm.batch, stream, go);
}

cu::NvrtcOptions generated_kernel_options(const std::string& arch, bool use_cache) {
  cu::NvrtcOptions o;
  o.arch = arch;
  o.use_cache = use_cache;
  o.minimal = true;
  // No contraction of a*b+c into an FMA in kiln's own kernels, as on the CPU
  // (runtime/cpu/clang_frontend.cpp): a fused kernel computes the same product in two places
  // (a reduction's two loops, or two uses of one value), and NVVM contracted one with the
  // sum and one with the subtraction, so x - mean(x) of one element was the product's
  // rounding error, not 0, and var(x) of it +inf, not 0/0 = NaN (kiln fuzz on the H100,
  // seed 2301). Memory-bound kernels lose nothing measurable (bench/NOTES.md); the GEMMs
  // are cuBLASLt's, and libdevice's functions call fma explicitly.
  o.extra_args.push_back("-fmad=false");
  return o;
}

namespace {

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }

  codegen::Target target(const CompileOptions& options) const override {
    std::string arch = options.arch;
    int sms = 132;
    int64_t optin = 0;
    std::string why;
    if (cu::driver_available(&why) && options.device.index < cu::device_count()) {
      const cu::DeviceInfo& info = cu::device_info(options.device.index);
      if (arch.empty()) arch = cu::arch_name(info);
      sms = info.num_sms;
      optin = info.shared_memory_per_block_optin;
    }
    if (arch.empty()) arch = "sm_90";
    if (arch.rfind("sm_", 0) != 0 || arch.size() < 5 || arch.find_first_not_of("0123456789a", 3) != std::string::npos)
      fail("--arch '{}': expected a GPU architecture such as sm_80 or sm_90", arch);
    codegen::Target t = codegen::cuda_target(arch, sms);
    if (optin > 0) t.shared_memory_optin = optin;
    return t;
  }

  std::string_view prelude() const override { return codegen::cuda_prelude(); }

  bool device_present(const Device& device, std::string* why) const override {
    if (!cuda_device_present(why)) return false;
    if (device.index >= cu::device_count()) {
      if (why) *why = fmt::format("this machine has {} CUDA device{}", cu::device_count(), cu::device_count() == 1 ? "" : "s");
      return false;
    }
    return true;
  }
  StoragePtr copy_from_host(const HostTensor& host, const Device& device) const override {
    require_device(device.index);
    return cuda_storage(cu::DeviceTensor::from_host(host, device.index));
  }
  std::string emit_kernel(const codegen::Kernel& k) const override { return codegen::emit_cuda_kernel(k); }
  std::optional<std::string> tuning_device(const CompileOptions& options, std::string* why) const override {
    return cuda_tuning_device(options, why);
  }
  std::vector<double> time_kernels(const std::vector<codegen::Kernel>& candidates, const CompileOptions& options) const override {
    return time_cuda_kernels(candidates, options);
  }
  std::vector<runtime::TuningOutcome> tune_matmuls(const codegen::LoweredGraph& lowered, const CompileOptions& options) const override {
    return tune_cuda_matmuls(lowered, options);
  }
  std::string source_file_name() const override { return "kernels.cu"; }

  // The device's whole memory where there is a device (what is free is checked again at each
  // run); none where there is no GPU, so that compiling for CUDA works everywhere.
  std::optional<MemoryBudget> memory_budget(const CompileOptions& options) const override {
    if (!cu::driver_available() || options.device.index >= cu::device_count()) return std::nullopt;
    const cu::DeviceInfo& info = cu::device_info(options.device.index);
    return MemoryBudget{info.total_memory, fmt::format("the {} of memory of cuda:{} ({})", format_bytes(info.total_memory),
                                                       options.device.index, info.name)};
  }

  std::shared_ptr<const Program> compile(const ExecutableState& state, const CompileOptions& options,
                                         CompileReport& report) const override {
    auto p = std::make_shared<CudaProgram>();
    p->device = options.device.index;
    for (const codegen::Step& st : state.lowered.steps)
      p->group_collectives |= st.kind == codegen::Step::Kind::Collective;
    // A captured graph would replay NCCL calls without the group's bookkeeping (the progress
    // record that names a rank at fault): a program with collectives runs its steps one by one.
    p->run_options = options.run;
    p->run_options.cuda_graphs = options.run.cuda_graphs && !p->group_collectives;
    p->arch = state.target.arch;
    // The kernels compile as a few NVRTC programs, as many as there are threads to compile them
    // (runtime/cuda/nvrtc.h): NVRTC's cost is mostly per program. Each kernel keeps a cache
    // entry of its own, which survives a change elsewhere in the graph.
    // A kernel the same as an earlier one but for its names compiles once (cuda_kernel_identity).
    std::vector<cu::CudaKernelSource> kernels;  // the distinct ones
    std::vector<size_t> distinct_of;            // per kernel: its index in `kernels`
    std::vector<size_t> first_with;             // per distinct kernel: the first kernel with its code
    std::map<std::string, size_t> by_code;
    for (size_t i = 0; i < state.lowered.kernels.size(); ++i) {
      const std::string& name = state.lowered.kernels[i].name;
      auto [it, fresh] = by_code.emplace(codegen::cuda_kernel_identity(state.lowered.kernels[i]), kernels.size());
      if (fresh) {
        kernels.push_back({fmt::format("{}_{}", state.graph_name, name), state.emitted.kernels[i]});
        first_with.push_back(i);
      }
      distinct_of.push_back(it->second);
      p->entries.push_back(state.lowered.kernels[first_with[it->second]].name);
    }
    // Custom ops' own kernels compile on their own (their source as the user wrote it).
    std::vector<std::pair<std::string, std::string>> opaque_sources;
    const auto& steps = state.lowered.steps;
    p->opaque_of_step.assign(steps.size(), -1);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].kind != codegen::Step::Kind::Opaque) continue;
      const codegen::OpaqueCall& c = steps[i].opaque;
      const CudaOpaqueKernel* k = find_cuda_opaque_kernel(c.op);
      if (!k) fail("graph {}: {} has no CUDA kernel ({}); register one with the op to compile it for CUDA", state.graph_name,
                   op_name(c.op), c.label);
      CudaLaunch l = cuda_launch_of(*k, c.input_metas, c.output_metas, c.attrs);
      if (l.grid < 1 || l.block < 1 || l.block > 1024)
        fail("graph {}: the launch rule of {} gave grid {} x block {} ({}); a block holds 1 to 1024 threads", state.graph_name,
             op_name(c.op), l.grid, l.block, c.label);
      p->opaque_of_step[i] = static_cast<int>(p->opaque.size());
      p->opaque.push_back({static_cast<int>(i), k->entry, l, {}});
      opaque_sources.emplace_back(fmt::format("{}_{}_{}", state.graph_name, op_short_name(c.op), i), k->source);
    }
    cu::NvrtcOptions no;
    no.arch = p->arch;
    no.use_cache = options.jit.use_cache;
    const cu::NvrtcOptions generated = generated_kernel_options(p->arch, options.jit.use_cache);
    try {
      p->binaries = cu::compile_cuda_kernels(state.emitted.prelude, kernels, generated);
    } catch (const cu::NvrtcError& e) {
      // Name the kernel and the graph nodes it computes, not only NVRTC's program name.
      for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels[i].name == e.program()) throw kiln::Error(kernel_compile_error_message(state, first_with[i], e.what()));
      throw;
    }
    // Every kernel's program: its distinct kernel's.
    std::vector<int> program_of;
    for (size_t d : distinct_of) program_of.push_back(p->binaries.program_of[d]);
    p->binaries.program_of = std::move(program_of);
    std::vector<cu::NvrtcOutput> opaque_binaries;
    try {
      opaque_binaries = cu::compile_cuda_parallel(opaque_sources, no);
    } catch (const cu::NvrtcError& e) {
      for (size_t j = 0; j < opaque_sources.size(); ++j) {
        if (opaque_sources[j].first != e.program()) continue;
        const codegen::OpaqueCall& c = steps[static_cast<size_t>(p->opaque[j].step)].opaque;
        fail("graph {}: the CUDA kernel of {} ({}) failed to compile: {}", state.graph_name, op_name(c.op), c.label, e.what());
      }
      throw;
    }
    for (size_t j = 0; j < p->opaque.size(); ++j) p->opaque[j].binary = std::move(opaque_binaries[j]);
    // Kernels counted one by one (a program of several found in the cache counts each of them).
    int hits = 0, compiled = 0;
    double slowest = 0, total = 0;
    size_t cubin_bytes = 0;
    auto count = [&](const cu::NvrtcOutput& b) {
      compiled += !b.cache_hit;
      slowest = std::max(slowest, b.compile_ms);
      total += b.compile_ms;
      cubin_bytes += b.cubin.size();
    };
    for (const cu::NvrtcOutput& b : p->binaries.programs) count(b);
    for (int m : p->binaries.program_of) hits += p->binaries.programs[static_cast<size_t>(m)].cache_hit;
    for (const CudaProgram::OpaqueLaunch& o : p->opaque) {
      count(o.binary);
      hits += o.binary.cache_hit;
    }
    report.compiler = fmt::format(
        "nvrtc {}: {} kernels for {} ({} distinct, {} from the cache), {} program{} compiled, NVRTC {:.1f} ms in all, slowest program {:.1f} ms; {} of CUBIN",
        cu::nvrtc_version(), state.lowered.kernels.size() + p->opaque.size(), p->arch, kernels.size() + p->opaque.size(), hits, compiled,
        compiled == 1 ? "" : "s", total, slowest,
        format_bytes(static_cast<int64_t>(cubin_bytes)));
    if (!options.dump_dir.empty()) {
      std::filesystem::path dir(options.dump_dir);
      std::string ptx;
      std::filesystem::create_directories(dir / "cubin");
      // One CUBIN and one PTX section per program, named after the kernels it holds.
      for (size_t m = 0; m < p->binaries.programs.size(); ++m) {
        std::string names = program_label(p->binaries, state.lowered.kernels, m);
        ptx += fmt::format("// ---- {}\n{}\n", names, p->binaries.programs[m].ptx);
        write_file(dir / "cubin" / (names + ".cubin"), p->binaries.programs[m].cubin);
      }
      write_file(dir / "kernels.ptx", ptx);
    }
    return p;
  }
};

}  // namespace

const Backend& cuda_backend() {
  static const CudaBackend b;
  return b;
}

bool cuda_device_present(std::string* why) {
  if (!cu::driver_available(why)) return false;
  if (cu::device_count() == 0) {
    if (why) *why = "the CUDA driver reports no device";
    return false;
  }
  return true;
}

StoragePtr cuda_storage(cu::DeviceTensor t) { return std::make_shared<const CudaStorage>(std::move(t)); }

const cu::DeviceTensor& cuda_tensor(const DeviceStorage& s) {
  const auto* c = dynamic_cast<const CudaStorage*>(&s);
  if (!c) fail("a tensor on {} is not in CUDA memory", s.meta().device.str());
  return c->tensor();
}

std::vector<cu::DeviceTensor> run_on_device(const Executable& exe, std::span<const cu::DeviceTensor> inputs) {
  std::vector<StoragePtr> in;
  for (const cu::DeviceTensor& t : inputs) in.push_back(t.defined() ? cuda_storage(t) : nullptr);
  std::vector<cu::DeviceTensor> out;
  for (const StoragePtr& t : run_on_device(exe, in)) out.push_back(cuda_tensor(*t));
  return out;
}

}  // namespace kiln::backend
#endif  // KILN_HAVE_CUDA

#if !KILN_HAVE_CUDA
#include "backend/cuda_backend.h"

namespace kiln::backend {
// Built without the CUDA path: there is never a device to run on (compiling for one fails in
// backend_for, naming the missing backend).
bool cuda_device_present(std::string* why) {
  if (why) *why = "kiln was built without the CUDA backend (no CUDA toolkit was found)";
  return false;
}
}  // namespace kiln::backend
#endif
