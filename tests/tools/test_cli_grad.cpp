// `kiln grad`, run as a user would: joint/forward/backward graphs, the saved-tensor table,
// gradcheck, saved gradients and errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ir/npy.h"
#include "ir/parser.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/support/cli_fixture.h"

namespace {

namespace fs = std::filesystem;
using kiln::testing::has;

using Result = kiln::testing::CliResult;
class CliGrad : public kiln::testing::CliTest {};

const char* kMlp =
    "graph f(%x: f32[4,8], %w: f32[8,16], %idx: i64[4]) {\n"
    "  %mm = matmul(%x, %w)\n"
    "  %t = tanh(%mm)\n"
    "  %y = sigmoid(%t)\n"
    "  %s = sum(%y)\n"
    "  return (%s)\n"
    "}\n";

int64_t saved_bytes(const std::string& text, kiln::autograd::PartitionKind kind) {
  kiln::Graph g = kiln::parse_graph(text);
  return kiln::autograd::partition(kiln::autograd::build_joint(g), kind).saved_bytes;
}

TEST_F(CliGrad, PrintsGraphsAndSavedTable) {
  write("f.kir", kMlp);
  Result r = kiln("grad f.kir");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* part : {"== joint graph ==", "graph f(%x: f32[4,8], %w: f32[8,16], %idx: i64[4], %tangent_s: f32[])",
                           "== forward graph (default) ==", "graph f_forward(", "== backward graph (default) ==",
                           "graph f_backward(", "return (%grad_x, %grad_w)", "saved tensors (default partition):"})
    EXPECT_TRUE(has(r.out, part)) << part << "\n" << r.out;
  int64_t total = saved_bytes(kMlp, kiln::autograd::PartitionKind::Default);
  EXPECT_TRUE(has(r.out, fmt::format("{:>10}\n", total))) << total << "\n" << r.out;
  EXPECT_TRUE(has(r.out, "  total ")) << r.out;
  // y = sigmoid(tanh(x @ w)): the default saves x, w, the matmul's tanh and the sigmoid.
  EXPECT_TRUE(has(r.out, "%t ")) << r.out;
  EXPECT_TRUE(has(r.out, "f32[4,16]")) << r.out;
}

TEST_F(CliGrad, MinCutSavesNoMoreAndWrtSelects) {
  write("f.kir", kMlp);
  Result r = kiln("grad f.kir --partition mincut --wrt w");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "saved tensors (mincut partition):")) << r.out;
  EXPECT_TRUE(has(r.out, "return (%grad_w)")) << r.out;
  EXPECT_FALSE(has(r.out, "%grad_x")) << r.out;
  kiln::Graph g = kiln::parse_graph(kMlp);
  kiln::autograd::JointOptions o;
  o.wrt = {"w"};
  auto joint = kiln::autograd::build_joint(g, o);
  int64_t mincut = kiln::autograd::partition(joint, kiln::autograd::PartitionKind::MinCut).saved_bytes;
  int64_t def = kiln::autograd::partition(joint, kiln::autograd::PartitionKind::Default).saved_bytes;
  EXPECT_LT(mincut, def);
  EXPECT_TRUE(has(r.out, fmt::format("{:>10}\n", mincut))) << r.out;
}

TEST_F(CliGrad, CheckPasses) {
  write("f.kir", kMlp);
  Result r = kiln("grad f.kir --check");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "gradcheck (full mode, float64):")) << r.out;
  EXPECT_TRUE(has(r.out, "gradcheck passed")) << r.out;
  EXPECT_TRUE(has(r.out, "%x: 32 checked")) << r.out;
  EXPECT_TRUE(has(r.out, "%w: 128 checked")) << r.out;
}

TEST_F(CliGrad, CheckFailsAtAKinkWithExitCode1) {
  // relu at exactly 0: the analytic derivative is 0, the central difference 1/2.
  write("k.kir", "graph k(%x: f32[3]) {\n  %r = relu(%x)\n  %s = sum(%r)\n  return (%s)\n}\n");
  kiln::write_npy(path("zeros.npy"), kiln::HostTensor::empty(kiln::DType::F32, {3}));
  Result r = kiln("grad k.kir --check --inputs zeros.npy");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "gradcheck FAILED")) << r.out;
  EXPECT_TRUE(has(r.err, "gradcheck failed for graph 'k'")) << r.err;
}

TEST_F(CliGrad, SaveGradsWritesGradientsAndOutputs) {
  write("q.kir", "graph q(%x: f32[2,3]) {\n  %sq = mul(%x, %x)\n  %s = sum(%sq)\n  return (%s)\n}\n");
  kiln::HostTensor x = kiln::testing::make(kiln::DType::F32, {2, 3}, {1, -2, 0.5, 3, -0.25, 2});
  kiln::write_npy(path("x.npy"), x);
  Result r = kiln("grad q.kir --inputs x.npy --save-grads out");
  ASSERT_EQ(r.rc, 0) << r.err;
  kiln::HostTensor gx = kiln::read_npy(path("out/grad_x.npy"));
  EXPECT_TRUE(kiln::testing::tensors_close(gx, kiln::testing::make(kiln::DType::F32, {2, 3}, {2, -4, 1, 6, -0.5, 4}), 0, 0));
  kiln::HostTensor s = kiln::read_npy(path("out/s.npy"));
  EXPECT_DOUBLE_EQ(s.get(0), 1 + 4 + 0.25 + 9 + 0.0625 + 4);
  EXPECT_TRUE(has(r.out, "wrote out/grad_x.npy")) << r.out;
}

TEST_F(CliGrad, TensorOutputsGetOnesTangents) {
  // y = 3x (not a scalar): the saved gradient is that of sum(y), 3 everywhere.
  write("t.kir", "graph t(%x: f32[4]) {\n  %c = full(size=[], fill_value=3.0, dtype=f32)\n  %y = mul(%x, %c)\n  return (%y)\n}\n");
  Result r = kiln("grad t.kir --save-grads out");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(kiln::read_npy(path("out/grad_x.npy")).to_doubles(), (std::vector<double>{3, 3, 3, 3}));
}

TEST_F(CliGrad, OneOutputIsDifferentiatedAndTheTangentsAreNamed) {
  // Outputs y = x*w (a tensor) and l = sum(x*w*x): by default the gradients are of the scalar l.
  write("two.kir",
        "graph two(%x: f32[3], %w: f32[3]) {\n  %y = mul(%x, %w)\n  %q = mul(%y, %x)\n  %l = sum(%q)\n  return (%y, %l)\n}\n");
  fs::create_directories(path("in"));
  kiln::write_npy(path("in/x.npy"), kiln::HostTensor::from_doubles(kiln::DType::F32, {3}, std::vector<double>{1, 2, 3}));
  kiln::write_npy(path("in/w.npy"), kiln::HostTensor::from_doubles(kiln::DType::F32, {3}, std::vector<double>{4, 5, 6}));
  Result r = kiln("grad two.kir --inputs in --save-grads out");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "tangents: %y: zeros, %l: ones (the gradients are of %l)")) << r.out;
  EXPECT_EQ(kiln::read_npy(path("out/grad_w.npy")).to_doubles(), (std::vector<double>{1, 4, 9}));  // d l/d w = x^2
  Result y = kiln("grad two.kir --inputs in --save-grads out_y --output y");
  ASSERT_EQ(y.rc, 0) << y.err;
  EXPECT_TRUE(has(y.out, "tangents: %y: ones, %l: zeros (the gradients are of %y)")) << y.out;
  EXPECT_EQ(kiln::read_npy(path("out_y/grad_w.npy")).to_doubles(), (std::vector<double>{1, 2, 3}));  // d sum(y)/d w = x
  Result bad = kiln("grad two.kir --save-grads o --output nope");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_TRUE(has(bad.err, "--output nope: graph 'two' has no such output (its outputs: %y, %l)")) << bad.err;
}

TEST_F(CliGrad, DumpWritesParseableGraphs) {
  write("f.kir", kMlp);
  Result r = kiln("grad f.kir --partition mincut --dump d");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* f : {"joint.kir", "forward.kir", "backward.kir"}) {
    ASSERT_TRUE(fs::exists(path(std::string("d/") + f))) << f;
    EXPECT_NO_THROW(kiln::parse_file(path(std::string("d/") + f))) << f;
  }
  EXPECT_TRUE(has(kiln::testing::read_text(path("d/saved.txt")), "total")) << r.out;
}

TEST_F(CliGrad, Errors) {
  write("f.kir", kMlp);
  Result unknown = kiln("grad f.kir --wrt q");
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_EQ(unknown.err, "kiln: error: --wrt: graph 'f' has no input named 'q' (floating inputs: x, w)\n");
  Result integer = kiln("grad f.kir --wrt idx");
  EXPECT_EQ(integer.rc, 1);
  EXPECT_TRUE(has(integer.err, "input 'idx' of graph 'f' is i64[4], not floating point")) << integer.err;
  Result missing = kiln("grad nope.kir");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_TRUE(has(missing.err, "nope.kir")) << missing.err;
  Result kind = kiln("grad f.kir --partition greedy");
  EXPECT_EQ(kind.rc, 1);
  EXPECT_TRUE(has(kind.err, "unknown partitioner 'greedy'")) << kind.err;
  EXPECT_TRUE(unknown.out.empty() && integer.out.empty());
}

}  // namespace
