// What only the CUDA backend does: NVRTC compiles (anywhere: no GPU needed), --arch, the
// dumped kernels, and on a GPU: runs on device tensors, CUDA graphs, the caching allocator,
// kernel errors, determinism and TF32. Tests that need a GPU compile first and then skip,
// naming why, where none is present; every test skips where the CUDA backend is not built.
#include <gtest/gtest.h>

#if !KILN_HAVE_CUDA

TEST(BackendCuda, NotBuilt) { GTEST_SKIP() << "no CUDA backend in this build"; }

#else

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/executable_state.h"
#include "ir/builder.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/driver.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

namespace cu = runtime::cuda;

#define KILN_REQUIRE_CUDA_DEVICE()                                                                      \
  do {                                                                                                  \
    std::string why_;                                                                                   \
    if (!::kiln::backend::cuda_device_present(&why_)) GTEST_SKIP() << "no CUDA device (" << why_ << ")"; \
  } while (0)

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

backend::CompiledGraph compile_cuda(const Graph& g, backend::CompileOptions o = {}) {
  o.device = Device::cuda(0);
  return backend::compile(g, o);
}

// softmax, a row sum, a column sum and a layer norm of exp(x): row and column reductions.
Graph reductions_graph(int64_t rows = 37, int64_t len = 1500) {
  Graph g("reductions");
  Builder b(g);
  Var x = input(b, "x", F({rows, len}));
  Var w = input(b, "w", F({len}));
  Var bias = input(b, "bias", F({len}));
  g.set_outputs({b.op(Op::Softmax, {x}, {{"dim", int64_t(-1)}}), b.sum(x, {1}), b.sum(x, {0}),
                 b.op(Op::LayerNorm, {b.exp(x), w, bias}, {{"normalized_shape", IntList{len}}})});
  return g;
}

void expect_bit_identical(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(tensors_close(a[i], b[i], 0, 0)) << "output " << i;
}

void expect_matches(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want, double slack = 1) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    backend::Tolerance t = backend::tolerance_of(want[i].dtype());
    EXPECT_TRUE(tensors_close(got[i], want[i], t.atol * slack, t.rtol * slack)) << "output " << i;
  }
}

std::vector<cu::DeviceTensor> upload(const std::vector<HostTensor>& host) {
  std::vector<cu::DeviceTensor> d;
  for (const HostTensor& h : host) d.push_back(cu::DeviceTensor::from_host(h, 0));
  return d;
}
std::vector<HostTensor> download(const std::vector<cu::DeviceTensor>& dev) {
  std::vector<HostTensor> h;
  for (const cu::DeviceTensor& d : dev) h.push_back(d.to_host());
  return h;
}

std::string temp_dir(const std::string& what) {
  std::random_device rd;
  auto p = std::filesystem::temp_directory_path() / fmt::format("kiln_{}_{}{}", what, rd(), rd());
  std::filesystem::create_directories(p);
  return p.string();
}
std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ------------------------------------------------------------------ anywhere (NVRTC only)

TEST(BackendCuda, CompilesWithoutADeviceAndRunSaysWhy) {
  Graph g = reductions_graph();
  backend::CompiledGraph cg = compile_cuda(g);
  EXPECT_TRUE(has(cg.report.compiler, "nvrtc")) << cg.report.compiler;
  ASSERT_EQ(cg.report.device.rfind("cuda sm_", 0), 0u) << cg.report.device;
  std::string arch = cg.report.device.substr(5);
  EXPECT_TRUE(has(cg.report.compiler, arch)) << cg.report.compiler;
  EXPECT_GE(cg.report.kernels, 1);
  EXPECT_EQ(cg.executable.device().kind, Device::Kind::CUDA);

  backend::CompileOptions o;
  o.arch = "sm_80";
  backend::CompiledGraph a80 = compile_cuda(g, o);
  EXPECT_EQ(a80.report.device, "cuda sm_80");
  EXPECT_TRUE(has(a80.report.compiler, "sm_80")) << a80.report.compiler;

  std::string why;
  if (backend::cuda_device_present(&why)) GTEST_SKIP() << "a CUDA device is present: the no-device error is not reachable";
  std::vector<HostTensor> in = inputs_for(g, 1);
  std::string msg = error_of([&] { cg.run(in); });
  EXPECT_TRUE(has(msg, "no CUDA device is present")) << msg;
  // The CUDA graph path says the same.
  o.arch.clear();
  o.run.cuda_graphs = true;
  backend::CompiledGraph cgg = compile_cuda(g, o);
  msg = error_of([&] { cgg.run(in); });
  EXPECT_TRUE(has(msg, "no CUDA device is present")) << msg;
}

TEST(BackendCuda, InvalidArchIsAnErrorNamingIt) {
  Graph g("arch");
  Builder b(g);
  g.set_outputs({b.exp(input(b, "x", F({4})))});
  for (const char* arch : {"sm_9x", "compute_90", "sm_"}) {
    SCOPED_TRACE(arch);
    backend::CompileOptions o;
    o.arch = arch;
    std::string msg = error_of([&] { compile_cuda(g, o); });
    EXPECT_TRUE(has(msg, arch)) << msg;
  }
}

TEST(BackendCuda, DumpWritesSourcePtxCubinAndSchedule) {
  Graph g = reductions_graph(5, 300);
  std::string dir = temp_dir("cuda_dump");
  backend::CompileOptions o;
  o.dump_dir = dir;
  backend::CompiledGraph cg = compile_cuda(g, o);
  std::filesystem::path d(dir);
  std::string cu_src = slurp(d / "kernels.cu"), ptx = slurp(d / "kernels.ptx"), sched = slurp(d / "kernels.txt");
  EXPECT_FALSE(cu_src.empty());
  EXPECT_FALSE(has(cu_src, "#include")) << "NVRTC programs include no headers";
  EXPECT_TRUE(has(cu_src, "__global__"));
  EXPECT_TRUE(has(ptx, ".visible .entry")) << ptx.substr(0, 2000);
  // One CUBIN per NVRTC program, named after its kernels ("k0+k1", "k0_and_5_more"): the
  // program's first kernel starts the name; every kernel has its entry in the PTX.
  int cubins = 0;
  for (const auto& e : std::filesystem::directory_iterator(d / "cubin")) {
    EXPECT_GT(std::filesystem::file_size(e.path()), 0u) << e.path();
    std::string first = e.path().stem().string();
    first = first.substr(0, std::min(first.find('+'), first.find("_and_")));
    EXPECT_TRUE(has(ptx, ".entry " + first + "(")) << e.path();
    ++cubins;
  }
  EXPECT_GE(cubins, 1);
  EXPECT_TRUE(has(ptx, ".entry k0(")) << ptx.substr(0, 2000);
  EXPECT_TRUE(has(sched, "@gpu_")) << sched;
  EXPECT_TRUE(has(sched, "launch grid")) << sched;
  EXPECT_TRUE(has(slurp(d / "report.txt"), "nvrtc"));
  std::error_code ignored;
  std::filesystem::remove_all(d, ignored);
}

TEST(BackendCuda, RunOnDeviceRejectsCpuExecutablesAndUndefinedInputs) {
  Graph g("rod");
  Builder b(g);
  g.set_outputs({b.exp(input(b, "x", F({2, 3})))});
  std::vector<cu::DeviceTensor> none(1);
  std::string msg;
  if (runtime::cpu::jit_available()) {  // the GPU machine builds without the CPU JIT
    backend::CompiledGraph cpu = backend::compile_cpu(g);
    msg = error_of([&] { backend::run_on_device(cpu.executable, none); });
    EXPECT_TRUE(has(msg, "compiled for the CPU")) << msg;
  }
  backend::CompiledGraph cg = compile_cuda(g);
  msg = error_of([&] { backend::run_on_device(cg.executable, none); });
  EXPECT_TRUE(has(msg, "%x") && has(msg, "undefined")) << msg;
  msg = error_of([&] { backend::run_on_device(cg.executable, std::vector<cu::DeviceTensor>{}); });
  EXPECT_TRUE(has(msg, "takes 1 input")) << msg;
}

// ------------------------------------------------------------------ on a GPU

TEST(BackendCuda, RunOnDeviceMatchesHostRunAndKeepsInputsOnTheDevice) {
  Graph g = reductions_graph();
  backend::CompiledGraph cg = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 3);
  std::vector<HostTensor> host = cg.run(in);
  expect_matches(host, interpret(g, in), 4);  // f32 row sums of 1500: see test_backend_shapes.cpp
  std::vector<cu::DeviceTensor> dev = upload(in);
  std::vector<void*> addresses;
  for (auto& d : dev) addresses.push_back(d.data());
  int64_t allocs_per_run = -1;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(fmt::format("run_on_device #{}", r));
    int64_t before = cu::memory_stats(0).num_allocs;
    std::vector<cu::DeviceTensor> out = backend::run_on_device(cg.executable, dev);
    int64_t allocs = cu::memory_stats(0).num_allocs - before;
    // The arena and the outputs, nothing for the inputs: they are used where they are (a
    // re-upload would add an allocation per input).
    EXPECT_LE(allocs, static_cast<int64_t>(out.size()) + 1);
    if (allocs_per_run >= 0) {
      EXPECT_EQ(allocs, allocs_per_run);
    }
    allocs_per_run = allocs;
    ASSERT_EQ(out.size(), host.size());
    for (auto& o : out) EXPECT_EQ(o.meta().device, Device::cuda(0));
    expect_bit_identical(download(out), host);  // the same kernels on the same data
  }
  for (size_t i = 0; i < dev.size(); ++i) {
    EXPECT_EQ(dev[i].data(), addresses[i]);
    EXPECT_TRUE(tensors_close(dev[i].to_host(), in[i], 0, 0)) << "input " << i << " was changed";
  }
}

TEST(BackendCuda, WrongDeviceInputsAreErrorsNamingTheInput) {
  Graph g("wrong");
  Builder b(g);
  Var x = input(b, "x", F({4, 33}));
  Var y = input(b, "y", F({33}));
  g.set_outputs({b.exp(x) + y});
  backend::CompiledGraph cg = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 5);
  cu::DeviceTensor good_x = cu::DeviceTensor::from_host(in[0]), good_y = cu::DeviceTensor::from_host(in[1]);
  {
    SCOPED_TRACE("wrong shape");
    std::vector<cu::DeviceTensor> v{cu::DeviceTensor::from_host(random_tensor(F({33, 4}), 1)), good_y};
    std::string msg = error_of([&] { backend::run_on_device(cg.executable, v); });
    EXPECT_TRUE(has(msg, "%x") && has(msg, "[4,33]") && has(msg, "[33,4]")) << msg;
  }
  {
    SCOPED_TRACE("wrong dtype");
    std::vector<cu::DeviceTensor> v{good_x, cu::DeviceTensor::from_host(random_tensor(T(DType::F64, {33}), 1))};
    std::string msg = error_of([&] { backend::run_on_device(cg.executable, v); });
    EXPECT_TRUE(has(msg, "%y") && has(msg, "f64")) << msg;
  }
  {
    SCOPED_TRACE("undefined");
    std::vector<cu::DeviceTensor> v{good_x, cu::DeviceTensor()};
    std::string msg = error_of([&] { backend::run_on_device(cg.executable, v); });
    EXPECT_TRUE(has(msg, "%y") && has(msg, "undefined")) << msg;
  }
  // Still usable.
  std::vector<cu::DeviceTensor> ok{good_x, good_y};
  expect_matches(download(backend::run_on_device(cg.executable, ok)), interpret(g, in));
}

TEST(BackendCuda, RunsAreDeterministic) {
  Graph g = reductions_graph(130, 4097);
  backend::CompiledGraph cg = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 7);
  std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
  expect_bit_identical(first, second);
  expect_matches(first, interpret(g, in), 5);
}

// Rows held in registers (codegen/schedule.cpp): a warp's row (1024), a block's row grown to
// 1024 threads (32000: cross-entropy's width), an odd row held one element per access with a
// cut last iteration (1022), bf16 rows and log_softmax's two readers of one row. Each kernel's
// record says it holds the row; runs are bit-identical and match the interpreter.
TEST(BackendCuda, HeldRowsAreDeterministicAndMatchTheInterpreter) {
  struct Shape2 {
    int64_t rows, len;
    DType dt;
  };
  for (Shape2 s : {Shape2{37, 1024, DType::F32}, Shape2{9, 32000, DType::F32}, Shape2{13, 1022, DType::F32},
                   Shape2{21, 1024, DType::BF16}, Shape2{5, 4096, DType::BF16}}) {
    SCOPED_TRACE(fmt::format("[{},{}] {}", s.rows, s.len, dtype_name(s.dt)));
    Graph g("held");
    Builder b(g);
    Var x = input(b, "x", TensorMeta(s.dt, {s.rows, s.len}));
    g.set_outputs({b.op(Op::Softmax, {x}, {{"dim", int64_t(-1)}}), b.op(Op::LogSoftmax, {x}, {{"dim", int64_t(-1)}})});
    backend::CompiledGraph cg = compile_cuda(g);
    bool held = false;
    for (const codegen::Kernel& k : cg.executable.lowered().kernels) held = held || !k.schedule.held.empty();
    EXPECT_TRUE(held) << "a row read twice is held";
    if (!backend::cuda_device_present()) continue;
    std::vector<HostTensor> in = inputs_for(g, 3);
    std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
    expect_bit_identical(first, second);
    expect_matches(first, interpret(g, in), 5);
  }
  KILN_REQUIRE_CUDA_DEVICE();
}

// Kernels that stride over their work by gridDim.x (codegen::LaunchConfig::persistent, under
// the knob blocks_per_sm N; the default is a full grid): a flat loop, warp rows, block rows and
// column chunks. Each launches at most what the SMs hold at once for its compiled code, and
// computes what the interpreter does at that grid.
TEST(BackendCuda, PersistentKernelsLaunchWhatTheSmsHoldAtOnce) {
  Graph g("persistent");
  Builder b(g);
  Var x = input(b, "x", F({2048, 4096})), w = input(b, "w", F({4096})), bias = input(b, "bias", F({4096}));
  g.set_outputs({b.mul(b.op(Op::Gelu, {b.add(b.mul(x, w), bias)}), b.sigmoid(x)), b.op(Op::Softmax, {x}, {{"dim", int64_t(-1)}}),
                 b.sum(x, {0}), b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{4096}}})});
  for (const codegen::Kernel& k : compile_cuda(g).executable.lowered().kernels)
    EXPECT_FALSE(k.launch.persistent) << k.name << ": " << k.schedule.mapping << " (the default: a full grid)";
  backend::CompileOptions o;
  o.schedule_knobs = "blocks_per_sm 8";
  backend::CompiledGraph cg = compile_cuda(g, o);
  const std::vector<codegen::Kernel>& kernels = cg.executable.lowered().kernels;
  for (const codegen::Kernel& k : kernels) EXPECT_TRUE(k.launch.persistent) << k.name << ": " << k.schedule.mapping;
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 5);
  std::vector<HostTensor> got = cg.run(in);
  expect_matches(got, interpret(g, in), 5);
  std::vector<int64_t> grids = cg.executable.state().program->launched_grids();
  ASSERT_EQ(grids.size(), kernels.size());
  const int sms = cu::device_info(0).num_sms;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const codegen::Kernel& k = kernels[i];
    EXPECT_GE(grids[i], 1);
    EXPECT_LE(grids[i], k.launch.grid) << k.name;
    if (grids[i] < k.launch.grid) {
      EXPECT_EQ(grids[i] % sms, 0) << k.name << ": whole waves of the " << sms << " SMs";
    }
  }
}

// Column reductions over a few leading rows with kept points enough for a thread each on every
// SM (GQA's dK/dV summed over the query heads a key head serves): a thread per kept point, its
// accumulators in registers, the reduced dims walked in order, so no temp buffer of
// accumulators; bf16 and f32, a sum over two dims, and a mean whose full-size user (x - mean)
// is computed in the same kernel. Bit-identical runs, the interpreter's results.
TEST(BackendCuda, ColumnSumsOverFewRowsKeepAThreadsAccumulatorsInRegisters) {
  Graph g("columns");
  Builder b(g);
  Var k = input(b, "k", TensorMeta(DType::BF16, {4, 8, 40000})), x = input(b, "x", F({3, 5, 150000})),
      y = input(b, "y", F({6, 140001}));
  g.set_outputs({b.sum(k, {1}), b.sum(x, {0, 1}), b.sub(y, b.mean(y, {0}, /*keepdim=*/true))});
  backend::CompiledGraph cg = compile_cuda(g);
  const std::vector<codegen::Kernel>& kernels = cg.executable.lowered().kernels;
  int by_thread = 0;
  for (const codegen::Kernel& kn : kernels) {
    if (kn.schedule.mapping != "thread per row") continue;
    ++by_thread;
    for (const codegen::Buffer& buf : kn.buffers) EXPECT_NE(buf.role, codegen::BufferRole::Temp) << kn.name << ": " << buf.name;
  }
  EXPECT_EQ(by_thread, 3) << "one kernel a thread per kept point for each reduction";
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 11);
  std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
  expect_bit_identical(first, second);
  expect_matches(first, interpret(g, in), 2);
}

TEST(BackendCuda, CudaGraphsRefillTheirStaticInputs) {
  Graph g = reductions_graph();
  backend::CompileOptions o;
  o.run.cuda_graphs = true;
  backend::CompiledGraph graphed = compile_cuda(g, o), plain = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  for (uint64_t seed : {11, 12, 13}) {
    SCOPED_TRACE(fmt::format("inputs of seed {}", seed));
    std::vector<HostTensor> in = inputs_for(g, seed);
    std::vector<HostTensor> got = graphed.run(in);
    expect_matches(got, interpret(g, in), 4);
    expect_bit_identical(got, plain.run(in));
  }
}

TEST(BackendCuda, CachingAllocatorServesRepeatedRunsWithoutNewMallocs) {
  Graph g = reductions_graph(64, 3000);
  backend::CompiledGraph cg = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 9);
  std::vector<cu::DeviceTensor> dev = upload(in);
  cg.run(in);  // warm-up (host inputs: uploads go through the allocator too)
  backend::run_on_device(cg.executable, dev);
  int64_t mallocs = cu::memory_stats(0).num_device_mallocs;
  for (int r = 0; r < 5; ++r) {
    cg.run(in);
    backend::run_on_device(cg.executable, dev);
  }
  EXPECT_EQ(cu::memory_stats(0).num_device_mallocs, mallocs) << cu::memory_summary(0);
}

TEST(BackendCuda, OutOfRangeGatherIndexNamesTheKernelAndIsReset) {
  Graph g("gather_oob");
  Builder b(g);
  Var x = input(b, "x", F({4, 1000}));
  Var i = input(b, "i", I({4, 300}));
  g.set_outputs({b.exp(b.gather(x, i, 1))});
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "with CUDA graphs" : "without CUDA graphs");
    backend::CompileOptions o;
    o.run.cuda_graphs = graphs;
    backend::CompiledGraph cg = compile_cuda(g, o);
    KILN_REQUIRE_CUDA_DEVICE();
    std::vector<HostTensor> in = inputs_for(g, 13, 1000);
    std::vector<HostTensor> bad = in;
    bad[1] = in[1].clone();
    bad[1].set_int(777, 1000);
    std::string msg = error_of([&] { cg.run(bad); });
    EXPECT_TRUE(has(msg, "kernel k") && has(msg, "out of range") && has(msg, "1000")) << msg;
    // The error record is reset: the next run with valid indices works.
    expect_matches(cg.run(in), interpret(g, in));
    bad[1].set_int(777, -1001);
    msg = error_of([&] { cg.run(bad); });
    EXPECT_TRUE(has(msg, "kernel k") && has(msg, "out of range")) << msg;
    expect_matches(cg.run(in), interpret(g, in));
  }
}

// An embedding gradient's scatter by sorted index checks its index as the ordered kernel does:
// an id out of range is reported, naming the kernel, and the next run with good ids works.
TEST(BackendCuda, OutOfRangeIdOfASortedScatterIsReported) {
  Graph g("scatter_oob");
  Builder b(g);
  Var ids = input(b, "ids", I({256}));
  Var src = input(b, "src", F({256, 64}));
  Var index = b.op(Op::Expand, {b.unsqueeze(ids, 1)}, {{"size", IntList{256, 64}}});
  g.set_outputs({b.scatter_add(b.zeros({100, 64}, DType::F32), index, src, 0)});
  backend::CompiledGraph cg = compile_cuda(g, {});
  EXPECT_TRUE(has(cg.executable.source(), "kiln_sorted_scatter_add<0, 0>")) << "the sorted path";
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 17, 100);
  std::vector<HostTensor> bad = in;
  bad[0] = in[0].clone();
  bad[0].set_int(200, 100);
  std::string msg = error_of([&] { cg.run(bad); });
  EXPECT_TRUE(has(msg, "kernel k") && has(msg, "out of range") && has(msg, "100")) << msg;
  expect_matches(cg.run(in), interpret(g, in));
  // Two runs, the same bits.
  std::vector<HostTensor> once = cg.run(in), twice = cg.run(in);
  EXPECT_TRUE(tensors_close(once[0], twice[0], 0, 0));
}

// Kernels that share one NVRTC program share its module's error record: the record's site
// still names the op and the kernel that met the bad index.
TEST(BackendCuda, KernelsOfOneProgramReportTheirOwnIndexErrors) {
  Graph g("two_gathers");
  Builder b(g);
  Var x = input(b, "x", F({4, 1000}));
  Var i = input(b, "i", I({4, 300}));
  Var w = input(b, "w", F({7, 9}));
  Var j = input(b, "j", I({3, 9}));
  Var rows = b.sum(b.exp(b.gather(x, i, 1)), {1});
  Var cols = b.tanh(b.gather(w, j, 0));
  g.set_outputs({rows, cols});
  const char* old = std::getenv("KILN_COMPILE_THREADS");
  std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("KILN_COMPILE_THREADS", "1", 1);
  backend::CompileOptions o;
  o.jit.use_cache = false;
  backend::CompiledGraph cg = compile_cuda(g, o);
  if (saved) ::setenv("KILN_COMPILE_THREADS", saved->c_str(), 1);
  else ::unsetenv("KILN_COMPILE_THREADS");
  EXPECT_TRUE(has(cg.report.compiler, "1 program compiled")) << cg.report.compiler;
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 21, 3);
  std::vector<std::string> kernels;
  for (int bad : {1, 3}) {
    std::vector<HostTensor> wrong = in;
    wrong[static_cast<size_t>(bad)] = in[static_cast<size_t>(bad)].clone();
    wrong[static_cast<size_t>(bad)].set_int(5, bad == 1 ? 1000 : -8);
    std::string msg = error_of([&] { cg.run(wrong); });
    EXPECT_TRUE(has(msg, "out of range") && has(msg, bad == 1 ? "size 1000" : "size 7")) << msg;
    size_t at = msg.rfind("(kernel ");
    ASSERT_NE(at, std::string::npos) << msg;
    kernels.push_back(msg.substr(at));
    expect_matches(cg.run(in), interpret(g, in));
  }
  EXPECT_NE(kernels[0], kernels[1]) << "each error names its own kernel";
}

// An upload from pageable memory has landed before a run on kiln's stream reads it. The
// driver's cuMemcpyHtoD returns once the bytes are staged, and kiln's stream does not wait for
// the legacy stream the copy runs on: kiln fuzz met a kernel that read an input's second row
// before it arrived. 64 MB uploads, each of a new value into the block the last one freed, and
// a run at once: every element must be the new value. (A race: this can pass without the fix.)
TEST(BackendCuda, AnUploadHasLandedBeforeTheNextRunReadsIt) {
  constexpr int64_t n = int64_t{1} << 24;
  Graph g("plus_one");
  Builder b(g);
  Var x = input(b, "x", F({n}));
  g.set_outputs({b.add(x, b.scalar(1.0, DType::F32))});
  backend::CompiledGraph cg = compile_cuda(g);
  KILN_REQUIRE_CUDA_DEVICE();
  HostTensor host = HostTensor::uninitialized(TensorMeta(DType::F32, {n}));
  float* data = static_cast<float*>(host.data());
  for (int round = 1; round <= 8; ++round) {
    std::fill(data, data + n, static_cast<float>(round));
    std::vector<cu::DeviceTensor> dev = {cu::DeviceTensor::from_host(host, 0)};
    HostTensor out = backend::run_on_device(cg.executable, dev)[0].to_host();
    const float* got = static_cast<const float*>(out.data());
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != static_cast<float>(round + 1)) {
        if (first < 0) first = i;
        ++wrong;
      }
    ASSERT_EQ(wrong, 0) << "round " << round << ": " << wrong << " elements wrong, the first at " << first << " = " << got[first];
  }
}

TEST(BackendCuda, MatmulTF32OnlyWhenAllowed) {
  Graph g("mm");
  Builder b(g);
  Var a = input(b, "a", F({96, 200}));
  Var w = input(b, "w", F({200, 72}));
  g.set_outputs({b.matmul(a, w)});
  backend::CompileOptions tf32;
  tf32.run.allow_tf32 = true;
  backend::CompiledGraph exact = compile_cuda(g), fast = compile_cuda(g, tf32);
  KILN_REQUIRE_CUDA_DEVICE();
  std::vector<HostTensor> in = inputs_for(g, 17);
  HostTensor want = interpret(g, in)[0];
  double scale = 0;
  for (int64_t k = 0; k < want.numel(); ++k) scale = std::max(scale, std::abs(want.get(k)));
  // f32: within 1e-5 of the largest output, 1e-5 relative.
  EXPECT_TRUE(tensors_close(exact.run(in)[0], want, 1e-5 * scale, 1e-5));
  // TF32 (10-bit mantissas): within ~5e-3; not required to differ from f32.
  EXPECT_TRUE(tensors_close(fast.run(in)[0], want, 5e-3 * scale, 5e-3));
}

}  // namespace
}  // namespace kiln::testing

#endif  // KILN_HAVE_CUDA
