// `kiln compile` and `kiln run --device cpu`, run as a user would: the compile report and its
// stage times, every file --dump writes (the .kir ones parse back), --check on several graphs
// (f16 and i64 outputs included) and the errors: an unknown or unbuilt device, a malformed
// file, an index out of range met by a generated kernel.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <tuple>
#include <utility>

#include "ir/host_tensor.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "tests/support/cli_fixture.h"
#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#endif

namespace {

namespace fs = std::filesystem;

using kiln::testing::has;
using kiln::testing::read_text;
using Result = kiln::testing::CliResult;

const char* kSoftmax =
    "graph sm(%x: f32[7,33]) {\n"
    "  %y = softmax(%x, dim=1) : f32[7,33]\n"
    "  return (%y)\n"
    "}\n";

const char* kMlp =
    "graph mlp(%x: f32[5,33], %w: f32[16,33], %b: f32[16], %v: f32[3,16]) {\n"
    "  %h = linear(%x, %w, %b) : f32[5,16]\n"
    "  %g = gelu(%h) : f32[5,16]\n"
    "  %o = linear(%g, %v) : f32[5,3]\n"
    "  %l = log_softmax(%o, dim=1) : f32[5,3]\n"
    "  return (%l)\n"
    "}\n";

// The MLP a new user's first `--check` ran (issue 26): 256-term f32 dot products, summed by BLAS
// in another order than the interpreter.
const char* kUserMlp =
    "graph mlp(%x: f32[8,64], %w1: f32[256,64], %b1: f32[256], %w2: f32[600,256], %b2: f32[600]) {\n"
    "  %h = linear(%x, %w1, %b1) : f32[8,256]\n"
    "  %r = relu(%h) : f32[8,256]\n"
    "  %z = linear(%r, %w2, %b2) : f32[8,600]\n"
    "  %y = softmax(%z, dim=-1) : f32[8,600]\n"
    "  return (%y)\n"
    "}\n";

// `kiln run --check` on every seed a user might try, on `device`: a PASS line per seed, each
// naming its closest element and the bound it stayed within.
void expect_check_passes_for_seeds_1_to_8(const std::function<Result(const std::string&)>& kiln, const std::string& device) {
  for (int seed = 1; seed <= 8; ++seed) {
    Result r = kiln(fmt::format("run user_mlp.kir --device {} --check --seed {}", device, seed));
    EXPECT_EQ(r.rc, 0) << "seed " << seed << "\n" << r.out << r.err;
    EXPECT_TRUE(has(r.out, "check %y: PASS  max abs err ")) << r.out;
    EXPECT_TRUE(has(r.out, "every element within its bound (the closest: [")) << r.out;
  }
}

const char* kViews =
    "graph views(%x: f32[33,7], %r: f32[1,7]) {\n"
    "  %t = transpose(%x, dim0=0, dim1=1) : f32[7,33]{1,7}\n"
    "  %s = slice(%t, dim=1, start=1, end=33, step=2) : f32[7,16]{1,14}\n"
    "  %e = exp(%s) : f32[7,16]\n"
    "  %m = amax(%x, dim=[0], keepdim=true) : f32[1,7]\n"
    "  %a = add(%m, %r) : f32[1,7]\n"
    "  return (%e, %a)\n"
    "}\n";

const char* kMixed =
    "graph mixed(%x: f16[3,7], %i: i64[3,7]) {\n"
    "  %e = exp(%x) : f16[3,7]\n"
    "  %j = add(%i, %i) : i64[3,7]\n"
    "  %s = sum(%j, dim=[1]) : i64[3]\n"
    "  return (%e, %j, %s)\n"
    "}\n";

const char* kGather =
    "graph g(%x: f32[4,5], %idx: i64[4,2]) {\n"
    "  %y = gather(%x, %idx, dim=1) : f32[4,2]\n"
    "  return (%y)\n"
    "}\n";

class CliCompile : public kiln::testing::CliTest {
 protected:
  // Whether `kiln compile` can compile at all: a build without LLVM says so.
  bool jit_available() {
    write("probe.kir", kSoftmax);
    Result r = kiln("compile probe.kir --device cpu");
    return !(r.rc != 0 && has(r.err, "built without the LLVM CPU path"));
  }
  int count(const std::string& text, const std::string& part) {
    int n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  }
};

#define KILN_CLI_REQUIRE_JIT() \
  do {                         \
    if (!jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT"; \
  } while (0)

TEST_F(CliCompile, ReportHasTimePerStage) {
  KILN_CLI_REQUIRE_JIT();
  write("mlp.kir", kMlp);
  Result r = kiln("compile mlp.kir --device cpu");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "graph mlp (cpu):")) << r.out;
  EXPECT_TRUE(has(r.out, "2 BLAS calls")) << r.out;
  for (const char* stage : {"decompose", "optimize", "fuse", "lower", "memory plan", "emit", "jit", "total"})
    EXPECT_TRUE(has(r.out, std::string(stage) + " ")) << stage << "\n" << r.out;
  EXPECT_GE(count(r.out, " ms"), 8) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliCompile, DumpWritesEveryStageAndTheKirFilesParseBack) {
  KILN_CLI_REQUIRE_JIT();
  write("mlp.kir", kMlp);
  Result r = kiln("compile mlp.kir --device cpu --dump out");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "wrote passes/, decomposed.kir, fused.kir, fused.dot, kernels.txt, kernels.cpp, report.txt to out")) << r.out;
  for (const char* f : {"passes/00_input.kir", "passes/01_fuse_attention.kir", "passes/02_merge_linears.kir", "passes/03_decompose.kir", "decomposed.kir", "fused.kir", "fused.dot", "kernels.txt",
                        "kernels.cpp", "report.txt"}) {
    ASSERT_TRUE(fs::exists(path("out/") + f)) << f;
    EXPECT_GT(fs::file_size(path("out/") + f), 0u) << f;
  }
  // The decomposed graph holds no composites; the fused one is the same graph with comments.
  kiln::Graph decomposed = std::move(kiln::parse_file(path("out/decomposed.kir")).at(0));
  kiln::Graph fused = std::move(kiln::parse_file(path("out/fused.kir")).at(0));
  EXPECT_EQ(decomposed.inputs().size(), 4u);
  EXPECT_EQ(fused.outputs().size(), 1u);
  std::string dec = kiln::testing::read_text(path("out/decomposed.kir"));
  EXPECT_FALSE(has(dec, "linear(")) << dec;
  EXPECT_FALSE(has(dec, "log_softmax(")) << dec;
  EXPECT_TRUE(has(kiln::testing::read_text(path("out/fused.kir")), "# kernel"));
  EXPECT_TRUE(has(kiln::testing::read_text(path("out/fused.dot")), "digraph"));
  EXPECT_TRUE(has(kiln::testing::read_text(path("out/kernels.cpp")), "extern \"C\""));
  // The kernel IR is scheduled: every loop says how it runs.
  std::string kir = kiln::testing::read_text(path("out/kernels.txt"));
  EXPECT_TRUE(has(kir, "@cpu_")) << kir;
  EXPECT_FALSE(has(kir, "@unmapped")) << kir;
  // report.txt is what the command printed.
  std::string report = kiln::testing::read_text(path("out/report.txt"));
  EXPECT_TRUE(has(r.out, report.substr(0, report.find('\n')))) << report;
}

TEST_F(CliCompile, UnfusedAndUnoptimizedAreKilnFuzzsOtherConfigs) {
  KILN_CLI_REQUIRE_JIT();
  // Two equal exps: CSE makes them one unless --unoptimized; --unfused gives each node a kernel.
  write("dup.kir",
        "graph dup(%x: f32[4,5]) {\n"
        "  %a = exp(%x) : f32[4,5]\n"
        "  %b = exp(%x) : f32[4,5]\n"
        "  %c = add(%a, %b) : f32[4,5]\n"
        "  return (%c)\n"
        "}\n");
  Result fused = kiln("compile dup.kir --device cpu");
  ASSERT_EQ(fused.rc, 0) << fused.err;
  EXPECT_TRUE(has(fused.out, "2 nodes, 1 groups -> 1 kernels")) << fused.out;
  Result raw = kiln("compile dup.kir --device cpu --unoptimized");
  ASSERT_EQ(raw.rc, 0) << raw.err;
  EXPECT_TRUE(has(raw.out, "3 nodes, 1 groups -> 1 kernels")) << raw.out;
  Result both = kiln("compile dup.kir --device cpu --unoptimized --unfused");
  ASSERT_EQ(both.rc, 0) << both.err;
  EXPECT_TRUE(has(both.out, "3 nodes, 3 groups -> 3 kernels")) << both.out;
}

TEST_F(CliCompile, RunCheckPassesOnSeveralGraphs) {
  KILN_CLI_REQUIRE_JIT();
  for (auto [file, text, outputs] : {std::tuple{"sm.kir", kSoftmax, 1}, std::tuple{"mlp.kir", kMlp, 1},
                                     std::tuple{"views.kir", kViews, 2}, std::tuple{"g.kir", kGather, 1}}) {
    write(file, text);
    Result r = kiln(std::string("run ") + file + " --device cpu --check --seed 3");
    EXPECT_EQ(r.rc, 0) << file << "\n" << r.out << r.err;
    EXPECT_TRUE(has(r.out, "compiled for cpu:")) << r.out;
    EXPECT_EQ(count(r.out, ": PASS"), outputs) << file << "\n" << r.out;
    EXPECT_EQ(count(r.out, "FAIL"), 0) << r.out;
  }
}

TEST_F(CliCompile, RunCheckPassesTheUsersMlpForEverySeed) {
  KILN_CLI_REQUIRE_JIT();
  write("user_mlp.kir", kUserMlp);
  expect_check_passes_for_seeds_1_to_8([&](const std::string& args) { return kiln(args); }, "cpu");
}

// KILN_DEBUG_DIR gives `kiln compile` (and every other compile) a numbered folder; --dump DIR,
// when given, is where that compile's stages go instead.
TEST_F(CliCompile, DebugDirFillsAFolderForKilnCompile) {
  write("sm.kir", kSoftmax);
  Result r = kiln("compile sm.kir --device cpu", "KILN_DEBUG_DIR=dbg");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "debug folder (KILN_DEBUG_DIR): dbg/000_sm")) << r.out;
  for (const char* file : {"00_graph.kir", "00_graph.dot", "report.json", "01_compile_graph/decomposed.kir",
                           "01_compile_graph/fused.kir", "01_compile_graph/fused.dot", "01_compile_graph/kernels.txt",
                           "01_compile_graph/kernels.cpp", "01_compile_graph/report.txt"})
    EXPECT_TRUE(fs::exists(path("dbg/000_sm/") + file)) << file;
  EXPECT_TRUE(has(read_text(path("dbg/000_sm/report.json")), "\"origin\": \"kiln compile\"")) << read_text(path("dbg/000_sm/report.json"));
  Result again = kiln("compile sm.kir --device cpu", "KILN_DEBUG_DIR=dbg");
  EXPECT_TRUE(has(again.out, "dbg/001_sm")) << again.out;
  Result dumped = kiln("compile sm.kir --device cpu --dump out", "KILN_DEBUG_DIR=dbg");
  ASSERT_EQ(dumped.rc, 0) << dumped.err;
  EXPECT_TRUE(fs::exists(path("out/kernels.cpp")));
  EXPECT_FALSE(fs::exists(path("dbg/002_sm"))) << "--dump is where the stages go";
}

TEST_F(CliCompile, RunCheckWithF16AndI64Outputs) {
  KILN_CLI_REQUIRE_JIT();
  write("mixed.kir", kMixed);
  Result r = kiln("run mixed.kir --device cpu --check");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "out %e: f16[3,7]")) << r.out;
  EXPECT_TRUE(has(r.out, "out %s: i64[3]")) << r.out;
  EXPECT_TRUE(has(r.out, "check %e: PASS")) << r.out;
  EXPECT_TRUE(has(r.out, "check %j: PASS")) << r.out;
  EXPECT_TRUE(has(r.out, "check %s: PASS")) << r.out;
}

TEST_F(CliCompile, UnknownDeviceIsAClearErrorWithExitCode1) {
  write("sm.kir", kSoftmax);
  for (const char* cmd : {"compile sm.kir --device tpu", "run sm.kir --device cuda:x", "compile sm.kir --device cpu --arch sm_90"}) {
    Result r = kiln(cmd);
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_EQ(count(r.err, "\n"), 1) << r.err;  // one line
  }
  EXPECT_TRUE(has(kiln("compile sm.kir --device tpu").err, "unknown device 'tpu' (known: cpu, cuda, cuda:N)"));
}

TEST_F(CliCompile, MalformedFileGivesFileLineColumn) {
  write("bad.kir", "graph g(%x: f32[2]) {\n  %y = exp(%x) : f32[2]\n  %z = bogus(%y)\n  return (%z)\n}\n");
  for (const char* cmd : {"compile bad.kir --device cpu", "run bad.kir --device cpu --check"}) {
    Result r = kiln(cmd);
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_EQ(r.err, "bad.kir:3:8: error: unknown op 'bogus'\n") << cmd;
  }
}

// The op the user wrote is named through its decomposition, with the value.
TEST_F(CliCompile, OutOfRangeTargetOfACompiledCrossEntropyNamesTheOp) {
  KILN_CLI_REQUIRE_JIT();
  write("ce.kir", "graph ce(%logits: f32[4,10], %t: i64[4]) {\n  %loss = cross_entropy(%logits, %t) : f32[]\n  return (%loss)\n}\n");
  kiln::write_npy(path("l.npy"), kiln::HostTensor::from_doubles(kiln::DType::F32, {4, 10}, std::vector<double>(40, 0.5)));
  kiln::write_npy(path("t.npy"), kiln::HostTensor::from_ints(kiln::DType::I64, {4}, std::vector<int64_t>{1, 2, 10, 3}));
  Result r = kiln("run ce.kir --device cpu --inputs l.npy,t.npy");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(has(r.err, "graph ce: %loss = cross_entropy (its %loss_gather = gather): index 10 is out of range for a dimension of size 10"))
      << r.err;
}

TEST_F(CliCompile, OutOfRangeGatherIndexNamesTheKernel) {
  KILN_CLI_REQUIRE_JIT();
  write("g.kir", kGather);
  kiln::write_npy(path("x.npy"), kiln::HostTensor::from_doubles(kiln::DType::F32, {4, 5},
                                                                std::vector<double>(20, 1.5)));
  kiln::write_npy(path("idx.npy"), kiln::HostTensor::from_ints(kiln::DType::I64, {4, 2}, std::vector<int64_t>{0, 1, 2, 7, 1, 1, 0, 4}));
  Result r = kiln("run g.kir --device cpu --inputs x.npy,idx.npy");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(has(r.err, "kiln: error: graph g: %y = gather: index 7 is out of range for a dimension of size 5 (kernel k")) << r.err;
  // In range, the same inputs run.
  kiln::write_npy(path("idx.npy"), kiln::HostTensor::from_ints(kiln::DType::I64, {4, 2}, std::vector<int64_t>{0, 1, 2, 4, 1, 1, 0, 4}));
  Result ok = kiln("run g.kir --device cpu --check --inputs x.npy,idx.npy");
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_TRUE(has(ok.out, "check %y: PASS")) << ok.out;
}

}  // namespace

// ---- --device cuda: compiling needs NVRTC only, so these run on machines with no GPU.
#if KILN_HAVE_CUDA
namespace {
bool cuda_device_here() {
  std::string why;
  return kiln::backend::cuda_device_present(&why);
}
}  // namespace

TEST_F(CliCompile, CudaCompileWithoutAGpuWritesSourcePtxAndCubin) {
  write("mlp.kir", kMlp);
  Result r = kiln("compile mlp.kir --device cuda --arch sm_80 --dump out");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "graph mlp (cuda sm_80):")) << r.out;
  EXPECT_TRUE(has(r.out, "nvrtc ")) << r.out;
  EXPECT_TRUE(has(r.out, "wrote passes/, decomposed.kir, fused.kir, fused.dot, kernels.txt, kernels.cu, kernels.ptx, kernels.cubin")) << r.out;
  std::string cu = kiln::testing::read_text(path("out/kernels.cu"));
  EXPECT_FALSE(has(cu, "#include")) << "generated CUDA C includes nothing";
  EXPECT_TRUE(has(cu, "extern \"C\" __global__")) << cu.substr(0, 400);
  EXPECT_TRUE(has(kiln::testing::read_text(path("out/kernels.ptx")), ".target sm_80"));
  // One CUBIN per NVRTC program, named after the kernels it holds ("k0+k1", after their fusion
  // groups, as fused.kir names them).
  int cubins = 0, kernels = 0;
  for (const auto& e : fs::directory_iterator(path("out/cubin"))) {
    EXPECT_GT(fs::file_size(e.path()), 0u) << e.path();
    std::string names = e.path().stem().string();
    for (size_t at = 0; at <= names.size();) {
      size_t plus = std::min(names.find('+', at), names.size());
      std::string name = names.substr(at, plus - at);
      EXPECT_TRUE(has(cu, " " + name + "(")) << name << " of " << e.path();
      ++kernels;
      at = plus + 1;
    }
    ++cubins;
  }
  EXPECT_GE(cubins, 1);
  EXPECT_GE(kernels, 2);
  std::string kir = kiln::testing::read_text(path("out/kernels.txt"));
  EXPECT_TRUE(has(kir, "@gpu_") && has(kir, "launch grid")) << kir;
  EXPECT_TRUE(has(kir, "# schedule: ")) << "every GPU kernel shows its schedule record\n" << kir;
  EXPECT_FALSE(has(kir, "@cpu_")) << kir;
  r = kiln("compile mlp.kir --device cuda --arch compute_90");
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--arch 'compute_90'")) << r.err;
}

TEST_F(CliCompile, CudaRunWithoutAGpuSaysSoAndExits1) {
  if (cuda_device_here()) GTEST_SKIP() << "a CUDA device is present: --device cuda runs";
  write("sm.kir", kSoftmax);
  Result r = kiln("run sm.kir --device cuda --check");
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "kiln run --device cuda:0 needs a CUDA GPU, and none can be used here")) << r.err;
  EXPECT_EQ(count(r.err, "\n"), 1) << r.err;
  EXPECT_EQ(r.out, "") << "nothing is done before the device is checked";
}

TEST_F(CliCompile, CudaRunCheckPassesOnAGpu) {
  if (!cuda_device_here()) GTEST_SKIP() << "no CUDA device here";
  for (auto [file, text, outputs] : {std::tuple{"sm.kir", kSoftmax, 1}, std::tuple{"mlp.kir", kMlp, 1},
                                     std::tuple{"views.kir", kViews, 2}, std::tuple{"g.kir", kGather, 1}}) {
    write(file, text);
    Result r = kiln(std::string("run ") + file + " --device cuda --check --seed 5");
    EXPECT_EQ(r.rc, 0) << file << "\n" << r.out << r.err;
    EXPECT_EQ(count(r.out, ": PASS"), outputs) << file << "\n" << r.out;
  }
  write("user_mlp.kir", kUserMlp);
  expect_check_passes_for_seeds_1_to_8([&](const std::string& args) { return kiln(args); }, "cuda");
}
#endif

namespace kiln::testing {
namespace {

class CliProfile : public CliTest {};

TEST_F(CliProfile, TableAndChromeTrace) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT";
  write("mlp.kir", R"(
graph mlp(%x: f32[16,32], %w: f32[32,8]) {
  %m = matmul(%x, %w) : f32[16,8]
  %s = softmax(%m, dim=-1) : f32[16,8]
  return (%s)
})");
  CliResult r = kiln("profile mlp.kir --device cpu --runs 3 --trace trace.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "graph mlp on cpu: 2 steps, median of 3 runs")) << r.out;
  EXPECT_TRUE(has(r.out, "matmul 16x8x32")) << r.out;
  EXPECT_TRUE(has(r.out, "GB/s")) << r.out;
  std::string trace = read_text(path("trace.json"));
  EXPECT_TRUE(has(trace, "\"traceEvents\"") && has(trace, "\"ph\": \"X\"")) << trace;
  CliResult bad = kiln("profile mlp.kir --runs 0");
  EXPECT_NE(bad.rc, 0);
  EXPECT_TRUE(has(bad.err, "--runs: Value 0 not in range")) << bad.err;
}

class CliInputs : public CliTest {};

TEST_F(CliInputs, AFolderMatchesFilesToInputsByName) {
  write("two.kir", R"(
graph two(%a: f32[3], %b.w: f32[3]) {
  %y = mul(%a, %b.w) : f32[3]
  return (%y)
})");
  CliResult saved = kiln("run two.kir --seed 5 --save-inputs in --save-outputs out1");
  ASSERT_EQ(saved.rc, 0) << saved.err;
  CliResult again = kiln("run two.kir --inputs in --save-outputs out2");
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(read_text(path("out1/y.npy")), read_text(path("out2/y.npy")));
  std::filesystem::remove(path("in/a.npy"));
  CliResult missing = kiln("run two.kir --inputs in");
  EXPECT_NE(missing.rc, 0);
  EXPECT_TRUE(has(missing.err, "no file for 1 of graph 'two''s 2 inputs: %a")) << missing.err;
}

class CliOps : public CliTest {};

TEST_F(CliOps, TheTableAndOneOpInFull) {
  CliResult all = kiln("ops");
  ASSERT_EQ(all.rc, 0) << all.err;
  EXPECT_TRUE(has(all.out, "softmax                composite    yes   yes     (Tensor self, int dim, dtype? dtype=None)")) << all.out;
  EXPECT_TRUE(has(all.out, "argmax")) << all.out;
  CliResult one = kiln("ops cross_entropy");
  ASSERT_EQ(one.rc, 0) << one.err;
  EXPECT_TRUE(has(one.out, "attribute   int ignore_index = -100")) << one.out;
  EXPECT_TRUE(has(one.out, "derivative: yes")) << one.out;
  EXPECT_TRUE(has(one.out, "compiled:   decomposed into other ops first")) << one.out;
  CliResult eq = kiln("ops eq");
  EXPECT_TRUE(has(eq.out, "derivative: none (not differentiable)")) << eq.out;
  CliResult plug = kiln(std::string("ops plug::scaled_swish --load ") + KILN_TEST_PLUGIN);
  ASSERT_EQ(plug.rc, 0) << plug.err;
  EXPECT_TRUE(has(plug.out, "compiled:   inline, the scalar expression \"x * sigmoid(beta * x)\"")) << plug.out;
  CliResult missing = kiln("ops nope");
  EXPECT_NE(missing.rc, 0);
  EXPECT_TRUE(has(missing.err, "no op named 'nope'")) << missing.err;
}

class CliExplain : public CliTest {};

TEST_F(CliExplain, CustomOpsFromALoadedLibrary) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT";
  write("plug.kir", R"(
graph plug(%x: f32[8,16], %b: f32[16]) {
  %a = add(%x, %b) : f32[8,16]
  %y = plug::scaled_swish(%a, beta=0.5) : f32[8,16]
  %c = plug::cumsum(%y) : f32[8,16]
  %z = exp(%c) : f32[8,16]
  return (%z)
})");
  const std::string load = std::string(" --load ") + KILN_TEST_PLUGIN;
  CliResult r = kiln("explain plug.kir" + load);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "pointwise [add, plug::scaled_swish]")) << r.out;  // fused with its neighbour
  EXPECT_TRUE(has(r.out, "custom op plug::cumsum: %c = plug::cumsum(%y)")) << r.out;
  CliResult run = kiln("run plug.kir --device cpu --check" + load);
  ASSERT_EQ(run.rc, 0) << run.err << run.out;
  EXPECT_TRUE(has(run.out, "PASS")) << run.out;
  // Without the library the op is unknown, and a library that does not load is named.
  CliResult unknown = kiln("explain plug.kir");
  EXPECT_NE(unknown.rc, 0);
  EXPECT_TRUE(has(unknown.err, "plug::scaled_swish")) << unknown.err;
  CliResult bad = kiln("explain plug.kir --load ./nope.so");
  EXPECT_NE(bad.rc, 0);
  EXPECT_TRUE(has(bad.err, "--load ./nope.so")) << bad.err;
}

#if KILN_HAVE_CUDA
// kiln explain --device cuda shows each kernel's schedule record: a softmax row of 1024 is a
// warp's, held in registers.
TEST_F(CliExplain, CudaKernelsShowTheirScheduleRecord) {
  write("sm.kir", R"(
graph sm(%x: f32[64,1024]) {
  %y = softmax(%x, dim=-1) : f32[64,1024]
  return (%y)
})");
  CliResult r = kiln("explain sm.kir --device cuda");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "schedule: warp per row, 8 per block, 32 threads per row, block 256, 4-element vectors, row of b1 held in "
                         "registers (32 elements per thread)"))
      << r.out;
}
#endif

TEST_F(CliExplain, OnePageAndTheFusedGraphAsSvg) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT";
  write("ln.kir", R"(
graph ln(%x: f32[8,64], %w: f32[64], %b: f32[64], %v: f32[64,16]) {
  %y = layer_norm(%x, %w, %b, normalized_shape=[64]) : f32[8,64]
  %m = matmul(%y, %v) : f32[8,16]
  %s = sum(%m) : f32[]
  return (%s)
})");
  CliResult r = kiln("explain ln.kir");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "ops: layer_norm, matmul, sum")) << r.out;                      // before
  EXPECT_TRUE(has(r.out, "after decomposition and optimization")) << r.out;
  EXPECT_TRUE(has(r.out, "rsqrt")) << r.out;                                              // after
  EXPECT_TRUE(has(r.out, "joins k0 (")) << r.out;                                        // a merge and why
  EXPECT_TRUE(has(r.out, "BLAS: %m = matmul(%y, %v)")) << r.out;                          // the schedule
  EXPECT_TRUE(has(r.out, "memory: ")) << r.out;
  EXPECT_TRUE(has(r.out, "training (joint graph, min-cut partition): the backward reads")) << r.out;
  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    CliResult svg = kiln("explain ln.kir --svg ln.svg");
    ASSERT_EQ(svg.rc, 0) << svg.err;
    EXPECT_TRUE(has(read_text(path("ln.svg")), "<svg")) << "no svg";
    EXPECT_TRUE(has(read_text(path("ln.svg")), "cluster")) << "no clusters";
  }
  CliResult missing = kiln("explain nope.kir");
  EXPECT_NE(missing.rc, 0);
}

// The graphs a user meets first: `kiln export mlp` and `kiln export block`, explained.
TEST_F(CliExplain, TheMlpAndBlockGraphs) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT";
  ASSERT_EQ(kiln("export mlp --out mlp.kir").rc, 0);
  CliResult mlp = kiln("explain mlp.kir");
  ASSERT_EQ(mlp.rc, 0) << mlp.err;
  EXPECT_TRUE(has(mlp.out, "ops: linear x2, gelu, cross_entropy")) << mlp.out;
  EXPECT_TRUE(has(mlp.out, "k2 pointwise [add, gelu]")) << mlp.out;  // the bias add fused into the GELU
  EXPECT_TRUE(has(mlp.out, "%linear = add starts a new kernel: k1 is an extern call")) << mlp.out;
  EXPECT_TRUE(has(mlp.out, "schedule for cpu: 4 kernels, 2 BLAS calls")) << mlp.out;
  EXPECT_TRUE(has(mlp.out, "saved %fc_weight: f32[128,32]")) << mlp.out;
  EXPECT_TRUE(has(mlp.out, "recomputes 1 node")) << mlp.out;

  ASSERT_EQ(kiln("export block --out block.kir").rc, 0);
  CliResult block = kiln("explain block.kir");
  ASSERT_EQ(block.rc, 0) << block.err;
  EXPECT_TRUE(has(block.out, "ops: layer_norm x2, linear x4")) << block.out;
  EXPECT_TRUE(has(block.out, "k7 attention [flash_attention]")) << block.out;  // the attention, one kernel
  // A refused merge, with its reason: the loss's row reduction cannot take in the projection's
  // bias add, computed in the block's [2,8,32] space.
  EXPECT_TRUE(has(block.out, "refused: %cross_entropy_log_softmax_amax = amax with k17: %linear_3 = add [2,8,32] is outside the rows"))
      << block.out;
  EXPECT_TRUE(has(block.out, "BLAS: %linear_matmul = matmul(%layer_norm, %linear_transpose)")) << block.out;
  EXPECT_TRUE(has(block.out, "memory: 21 intermediate buffers")) << block.out;
  // Training saves the attention's output and one log-sum-exp per query (no weights).
  EXPECT_TRUE(has(block.out, "saved %scaled_dot_product_attention_flash_attention_1: f32[2,4,8]")) << block.out;
}

// `kiln export --autocast bf16` traces under kiln::Autocast: the casts are nodes of the graph,
// and the cast of a bias fuses into the kernel after its GEMM rather than running alone.
TEST_F(CliExplain, AnMlpExportedUnderAutocast) {
  CliResult r = kiln("export mlp --autocast bf16 --out mlp_bf16.kir");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::string kir = read_text(path("mlp_bf16.kir"));
  EXPECT_TRUE(has(kir, "%to_1 = to(%fc_weight, dtype=bf16) : bf16[128,32]")) << kir;
  EXPECT_TRUE(has(kir, "linear(%to, %to_1, %to_2) : bf16[2,128]")) << kir;
  EXPECT_TRUE(has(kir, "to(%linear_1, dtype=f32) : f32[2,32]")) << "the loss's input back to f32\n" << kir;
  EXPECT_TRUE(has(kiln("export mlp --autocast f32").err, "--autocast must be bf16 or f16"));
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the CPU JIT";
  CliResult ex = kiln("explain mlp_bf16.kir");
  ASSERT_EQ(ex.rc, 0) << ex.err;
  EXPECT_TRUE(has(ex.out, "pointwise [to, add, gelu]")) << ex.out;
}

// `kiln export --no-loss`: the forward alone, with the model's one example input (no targets),
// for every model; --save-inputs writes exactly the graph's inputs.
TEST_F(CliExplain, ExportsTheForwardAloneWithNoLoss) {
  for (const char* model : {"mlp", "block", "minigpt"}) {
    SCOPED_TRACE(model);
    CliResult r = kiln(fmt::format("export {} --no-loss --out fwd_{}.kir --save-inputs in_{}", model, model, model));
    ASSERT_EQ(r.rc, 0) << r.err;
    Graph g = parse_graph(read_text(path(fmt::format("fwd_{}.kir", model))));
    EXPECT_EQ(g.outputs().size(), 1u);
    for (const Node* v : g.inputs()) EXPECT_NE(v->name(), "targets");
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(path(fmt::format("in_{}", model)))) files += e.path().extension() == ".npy";
    EXPECT_EQ(files, g.inputs().size());
  }
}

// `kiln export resnet18`: torchvision's ResNet-18; its forward in eval mode reads the running
// statistics, its loss in training mode also returns the ones it updates (after the loss).
TEST_F(CliExplain, ExportsAResNetForwardAndItsTrainingLoss) {
  CliResult fwd = kiln("export resnet18 --no-loss --batch 2 --image 32 --classes 10 --out r18.kir");
  ASSERT_EQ(fwd.rc, 0) << fwd.err;
  Graph f = parse_graph(read_text(path("r18.kir")));
  ASSERT_EQ(f.outputs().size(), 1u);
  EXPECT_EQ(f.outputs()[0].meta().shape, (Shape{2, 10}));
  EXPECT_TRUE(f.find("layer2_0_downsample_1_running_var")) << "the running statistics are inputs";
  CliResult loss = kiln("export resnet18 --batch 2 --image 32 --classes 10 --out r18_loss.kir");
  ASSERT_EQ(loss.rc, 0) << loss.err;
  Graph l = parse_graph(read_text(path("r18_loss.kir")));
  EXPECT_EQ(l.outputs().size(), 1u + 20 * 3) << "the loss, then 20 BatchNorms' running mean, variance and count";
  EXPECT_EQ(l.outputs()[0].meta().rank(), 0);
  EXPECT_TRUE(has(kiln("export resnet18 --image 0").err, "--image and --classes must be positive"));
}

}  // namespace
}  // namespace kiln::testing
