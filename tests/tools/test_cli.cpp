// The kiln program, run as a user would: each test writes small files into its own
// temporary folder, runs the binary (KILN_BINARY) and checks exit code, stdout, stderr and
// the files it wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/cuda_backend.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "runtime/cpu/jit.h"
#include "tests/support/cli_fixture.h"

namespace {

namespace fs = std::filesystem;

using Result = kiln::testing::CliResult;
class Cli : public kiln::testing::CliTest {};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kExp = "graph g(%x: f32[2,3]) {\n  %y = exp(%x) : f32[2,3]\n  return (%y)\n}\n";

TEST_F(Cli, HelpListsTheCommands) {
  Result r = kiln("--help");
  EXPECT_EQ(r.rc, 0);
  for (const char* c : {"print", "check", "dot", "passes", "run", "demo"}) EXPECT_TRUE(has(r.out, c)) << c << "\n" << r.out;
  Result none = kiln("");
  EXPECT_NE(none.rc, 0);
  Result bad = kiln("frobnicate");
  EXPECT_NE(bad.rc, 0);
}

TEST_F(Cli, PrintIsCanonical) {
  write("a.kir", "# comment\ngraph g( %x : f32[2,3] ) {\n  %y = exp(%x)\n  return (%y)   # done\n}\n");
  Result r = kiln("print a.kir");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, kExp);
}

TEST_F(Cli, CheckGoodFile) {
  write("a.kir", "graph g(%x: f32[2,3], %w: f32[3]) {\n  %y = add(%x, %w) : f32[2,3]\n  return (%y)\n}\n");
  Result r = kiln("check a.kir");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "ok: graph g (2 inputs, 1 node, 1 output)\n");
}

TEST_F(Cli, CheckBadFileGivesLocationAndExitCode1) {
  write("bad.kir", "graph g(%a: f32[4]) {\n  %b = add(%a, %c) : f32[4]\n  return (%b)\n}\n");
  Result r = kiln("check bad.kir");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "bad.kir:2:16: error: use of undefined value '%c'\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(Cli, MissingFileIsOneLineAndExitCode1) {
  for (const char* cmd : {"print", "check", "dot", "passes", "run"}) {
    Result r = kiln(std::string(cmd) + " nope.kir");
    EXPECT_EQ(r.rc, 1) << cmd;
    EXPECT_EQ(r.err, "kiln: error: cannot open 'nope.kir'\n") << cmd;
  }
}

TEST_F(Cli, DotWritesDotText) {
  write("a.kir", kExp);
  Result r = kiln("dot a.kir -o x.dot");
  EXPECT_EQ(r.rc, 0) << r.err;
  std::string dot = kiln::testing::read_text(path("x.dot"));
  EXPECT_TRUE(has(dot, "digraph \"g\"")) << dot;
  EXPECT_TRUE(has(dot, "%y = exp")) << dot;
  Result to_stdout = kiln("dot a.kir");
  EXPECT_EQ(to_stdout.out, dot);
  Result bad_ext = kiln("dot a.kir -o x.jpeg");
  EXPECT_EQ(bad_ext.rc, 1);
  EXPECT_TRUE(has(bad_ext.err, "use .dot, .svg or .png")) << bad_ext.err;
}

TEST_F(Cli, PassesPrintsTheGraphAndTheReport) {
  write("a.kir",
        "graph g(%x: f32[4]) {\n  %a = exp(%x) : f32[4]\n  %b = exp(%x) : f32[4]\n  %dead = log(%x) : f32[4]\n"
        "  %c = add(%a, %b) : f32[4]\n  return (%c)\n}\n");
  Result r = kiln("passes a.kir --pipeline cse,dce --dump-dir dump");
  ASSERT_EQ(r.rc, 0) << r.err;
  // The output is itself a valid .kir file: the graph, then the report as comments.
  auto graphs = kiln::parse_graphs(r.out, "stdout");
  ASSERT_EQ(graphs.size(), 1u);
  EXPECT_EQ(graphs[0].num_nodes(), 2u);
  EXPECT_TRUE(has(r.out, "%c = add(%a, %a) : f32[4]")) << r.out;
  EXPECT_TRUE(has(r.out, "# ")) << r.out;
  EXPECT_TRUE(has(r.out, "cse")) << r.out;
  EXPECT_TRUE(fs::exists(path("dump/00_input.kir")));
  EXPECT_TRUE(fs::exists(path("dump/02_dce.kir")));

  Result unknown = kiln("passes a.kir --pipeline cse,nosuchpass");
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_TRUE(has(unknown.err, "unknown pass 'nosuchpass'")) << unknown.err;
}

TEST_F(Cli, RunWithNpyInputsAndSavedOutputs) {
  write("a.kir", kExp);
  kiln::HostTensor x = kiln::testing::make(kiln::DType::F32, {2, 3}, {0, 1, -1, 0.5, 2, -2});
  kiln::write_npy(path("x.npy"), x);
  Result r = kiln("run a.kir --inputs x.npy --save-outputs outs");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "out %y: f32[2,3] [1, 2.71828, 0.367879, 1.64872, 7.38906, 0.135335]")) << r.out;
  kiln::HostTensor y = kiln::read_npy(path("outs/y.npy"));
  std::vector<double> expected;
  for (double v : x.to_doubles()) expected.push_back(std::exp(v));
  EXPECT_TRUE(kiln::testing::tensors_close(y, kiln::testing::make(kiln::DType::F32, {2, 3}, expected)));
}

TEST_F(Cli, RunWithRandomInputsIsReproducible) {
  write("a.kir", kExp);
  Result a = kiln("run a.kir --seed 3"), b = kiln("run a.kir --seed 3"), c = kiln("run a.kir --seed 4");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_TRUE(has(a.out, "random, seed 3")) << a.out;
}

TEST_F(Cli, RunInfersIntegerInputBounds) {
  // Indices must be < 5 (the embedding's rows), targets < 7 (the classes).
  write("a.kir",
        "graph g(%w: f32[5,7], %idx: i64[64], %target: i64[64]) {\n"
        "  %e = embedding(%w, %idx) : f32[64,7]\n"
        "  %l = cross_entropy(%e, %target) : f32[]\n"
        "  return (%l)\n}\n");
  for (int seed = 0; seed < 3; ++seed) {
    Result r = kiln("run a.kir --save-inputs ins --seed " + std::to_string(seed));
    ASSERT_EQ(r.rc, 0) << r.err;
    auto idx = kiln::read_npy(path("ins/idx.npy")).to_ints();
    auto target = kiln::read_npy(path("ins/target.npy")).to_ints();
    EXPECT_EQ(*std::max_element(idx.begin(), idx.end()), 4);
    EXPECT_EQ(*std::max_element(target.begin(), target.end()), 6);
    EXPECT_GE(*std::min_element(idx.begin(), idx.end()), 0);
  }
}

TEST_F(Cli, RunRejectsBadInputs) {
  write("a.kir", kExp);
  kiln::write_npy(path("wrong_shape.npy"), kiln::HostTensor::empty(kiln::DType::F32, {3, 2}));
  Result shape = kiln("run a.kir --inputs wrong_shape.npy");
  EXPECT_EQ(shape.rc, 1);
  EXPECT_EQ(shape.err, "kiln: error: input %x expects f32[2,3] but 'wrong_shape.npy' holds f32[3,2]\n");

  write("garbage.npy", "this is not numpy");
  Result garbage = kiln("run a.kir --inputs garbage.npy");
  EXPECT_EQ(garbage.rc, 1);
  EXPECT_TRUE(has(garbage.err, "garbage.npy: not a .npy file (bad magic")) << garbage.err;

  Result count = kiln("run a.kir --inputs garbage.npy,garbage.npy");
  EXPECT_EQ(count.rc, 1);
  EXPECT_TRUE(has(count.err, "has 1 input (%x) but --inputs names 2 files")) << count.err;

  kiln::write_npy(path("ints.npy"), kiln::HostTensor::empty(kiln::DType::I64, {2, 3}));
  Result kind = kiln("run a.kir --inputs ints.npy");
  EXPECT_EQ(kind.rc, 1);
  EXPECT_TRUE(has(kind.err, "a different kind of number")) << kind.err;

  // f64 from NumPy's default for an f32 input is converted, with a note.
  kiln::write_npy(path("f64.npy"), kiln::HostTensor::empty(kiln::DType::F64, {2, 3}));
  Result conv = kiln("run a.kir --inputs f64.npy");
  EXPECT_EQ(conv.rc, 0) << conv.err;
  EXPECT_TRUE(has(conv.err, "note: 'f64.npy' holds f64; converted to f32 for input %x")) << conv.err;
}

TEST_F(Cli, MultiGraphFileNeedsGraphOption) {
  write("two.kir", std::string(kExp) + "\n" +
                       "graph h(%x: f32[2]) {\n  %y = neg(%x) : f32[2]\n  return (%y)\n}\n");
  Result r = kiln("run two.kir");
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "holds 2 graphs (g, h); choose one with --graph NAME")) << r.err;
  Result ok = kiln("run two.kir --graph h");
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_TRUE(has(ok.out, "graph h:")) << ok.out;
  Result check = kiln("check two.kir");
  EXPECT_EQ(check.out, "ok: graph g (1 input, 1 node, 1 output)\nok: graph h (1 input, 1 node, 1 output)\n");
}

TEST_F(Cli, DemoLearnsTheConjugationsAndWritesTheDebugFolder) {
  std::string why;
  if (!kiln::runtime::cpu::jit_available() && !kiln::backend::cuda_device_present(&why))
    GTEST_SKIP() << "no CPU JIT and no GPU: " << why;
  Result r = kiln("demo --out demo --steps 150");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "held-out loss before training: ")) << r.out;
  EXPECT_TRUE(has(r.out, "step  150/150  loss ")) << r.out;  // the progress bar's last line
  EXPECT_TRUE(has(r.out, "held-out loss: ")) << r.out;
  EXPECT_TRUE(has(r.out, "held-out conjugations completed exactly")) << r.out;
  EXPECT_TRUE(has(r.out, "== debug folder: ")) << r.out;
  // One numbered folder per compiled graph, each with its stages and report.
  EXPECT_TRUE(fs::exists(path("demo/debug/000_eval_loss/00_traced.kir")));
  EXPECT_TRUE(fs::exists(path("demo/debug/001_train_step/01_train_step.kir")));
  EXPECT_TRUE(fs::exists(path("demo/debug/001_train_step/report.json")));
  EXPECT_TRUE(fs::exists(path("demo/debug/002_logits/report.json")));
  for (auto& e : fs::recursive_directory_iterator(path("demo/debug"))) {
    if (e.path().extension() == ".kir" && e.path().filename() != "fused.kir") {  // fused.kir marks groups
      EXPECT_NO_THROW(kiln::parse_file(e.path().string())) << e.path();
    }
  }
}

}  // namespace
