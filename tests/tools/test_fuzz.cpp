// The differential fuzzer (tools/fuzz/): the generator's graphs are valid, deterministic and
// varied; the comparison catches what it must and forgives what it must; the shrinker reduces;
// reproducers round-trip; and the saved regression cases pass. `kiln fuzz` itself runs in CI
// through the CLI test below.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#endif
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/cpu/jit.h"
#include "tests/support/cli_fixture.h"
#include "tools/fuzz/differential.h"
#include "tools/fuzz/random_graph.h"
#include "tools/fuzz/shrink.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;
using fuzz::FuzzCase;

TEST(FuzzGenerator, GraphsAreValidDeterministicAndVaried) {
  std::map<std::string, int> ops;
  std::set<DType> dtypes;
  int with_zero_dim = 0, max_nodes = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    FuzzCase c = fuzz::random_graph(seed);
    ASSERT_NO_THROW(verify_or_throw(c.graph, "fuzz")) << print_graph(c.graph);
    EXPECT_EQ(print_graph(c.graph), print_graph(fuzz::random_graph(seed).graph)) << "seed " << seed;
    ASSERT_EQ(c.int_bounds.size(), c.graph.inputs().size());
    // The printed graph parses back (a reproducer must).
    EXPECT_EQ(print_graph(parse_graph(print_graph(c.graph))), print_graph(c.graph));
    max_nodes = std::max(max_nodes, static_cast<int>(c.graph.num_nodes()));
    bool zero = false;
    for (const Node* n : c.graph.nodes()) {
      if (!n->is_input()) ++ops[std::string(op_name(n->op()))];
      dtypes.insert(n->meta().dtype);
      for (int64_t d : n->meta().shape) zero |= d == 0;
    }
    with_zero_dim += zero;
  }
  // Every family the issue names shows up in 400 graphs.
  for (const char* op : {"add", "mul", "where", "sum", "amax", "argmax", "var", "transpose", "permute", "slice", "expand",
                         "reshape", "cat", "split", "matmul", "linear", "softmax", "layer_norm", "gather", "scatter_add", "scatter_reduce",
                         "embedding", "cross_entropy", "to", "masked_fill", "exp", "log"})
    EXPECT_GT(ops[op], 0) << op;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool})
    EXPECT_TRUE(dtypes.count(t)) << dtype_name(t);
  EXPECT_GT(with_zero_dim, 0);
  EXPECT_LE(max_nodes, 25 + 25);  // 25 drawn, plus the nodes split/cat's results share
}

TEST(FuzzGenerator, MergedCasesKeepEachCasesInputs) {
  std::vector<FuzzCase> cases;
  for (uint64_t s = 10; s < 13; ++s) cases.push_back(fuzz::random_graph(s));
  FuzzCase m = fuzz::merge_cases(cases);
  std::vector<HostTensor> merged = m.inputs();
  size_t k = 0;
  for (const FuzzCase& c : cases)
    for (const HostTensor& t : c.inputs()) EXPECT_TRUE(tensors_close(merged.at(k++), t, 0, 0));
  EXPECT_EQ(k, merged.size());
}

TEST(FuzzCheck, RandomGraphsCompiledUnderEveryConfigPass) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  fuzz::CheckOptions o;
  int checked = 0;
  for (uint64_t seed = 100; seed < 112; ++seed) {
    fuzz::CaseReport r = fuzz::check_case(fuzz::random_graph(seed), o);
    EXPECT_FALSE(r.reference_failed) << seed;
    for (const auto& f : r.findings) ADD_FAILURE() << "seed " << seed << ": " << verdict_name(f.verdict) << " " << f.config << ": " << f.detail;
    checked += r.joint_checked;
  }
  EXPECT_GT(checked, 0);
}

// The shrinker keeps a failure while cutting everything else: the "failure" here is the
// presence of a softmax, so the minimum is one softmax node.
TEST(FuzzShrink, ReducesToTheNodeThatFails) {
  FuzzCase big;
  for (uint64_t seed = 0;; ++seed) {
    big = fuzz::random_graph(seed);
    bool has_softmax = false;
    for (const Node* n : big.graph.nodes()) has_softmax |= n->op() == Op::Softmax;
    if (has_softmax && big.graph.num_nodes() > 8) break;
  }
  auto has_softmax = [](const FuzzCase& c) {
    for (const Node* n : c.graph.nodes())
      if (n->op() == Op::Softmax) return true;
    return false;
  };
  FuzzCase small = fuzz::shrink(big, has_softmax);
  EXPECT_TRUE(has_softmax(small));
  int non_inputs = 0;
  for (const Node* n : small.graph.nodes()) non_inputs += !n->is_input();
  EXPECT_EQ(non_inputs, 1) << print_graph(small.graph);
  // And the reproducer round-trips with its inputs' seeds and bounds.
  fuzz::Finding f{fuzz::Verdict::Mismatch, "fused", "%softmax[0] = 1 where the reference has 2"};
  FuzzCase back = fuzz::parse_reproducer(fuzz::reproducer_text(small, f, "cpu"));
  EXPECT_EQ(print_graph(back.graph), print_graph(small.graph));
  EXPECT_EQ(back.input_seeds, small.input_seeds);
  EXPECT_EQ(back.int_bounds, small.int_bounds);
}

class CliFuzz : public CliTest {};

// CI's fuzz run: 2,000 graphs, every config and the joint graphs (234 s on a quiet 2-core VM with a
// cold kernel cache; its ctest timeout is 900 s). Its progress lines show as it goes.
TEST_F(CliFuzz, TwoThousandGraphsOnTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  CliResult r = kiln_streaming("fuzz --graphs 2000 --seed 7 --device cpu --jobs 2 --save failures");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "kiln fuzz: 2000 graphs on cpu")) << r.out;
}

// With no GPU, `kiln fuzz --device cuda` says so before any work, rather than counting every
// graph as a run error (and saving a reproducer for each).
TEST_F(CliFuzz, OnADeviceThatCannotRunItSaysSoAtOnce) {
#if KILN_HAVE_CUDA
  std::string why;
  if (backend::cuda_device_present(&why)) GTEST_SKIP() << "a CUDA GPU is present";
#endif
  CliResult r = kiln("fuzz --graphs 2 --device cuda --save failures");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "kiln fuzz --device cuda:0 needs a CUDA GPU")) << r.err;
  EXPECT_FALSE(has(r.out, "run error")) << r.out;
}

// On a GPU, forked jobs compile and run: the parent's device check must not initialize the
// driver, which a forked child cannot use (every job then failed with CUDA_ERROR_NOT_INITIALIZED).
TEST_F(CliFuzz, ForkedJobsRunOnTheGpu) {
#if KILN_HAVE_CUDA
  std::string why;
  if (!backend::cuda_device_present(&why)) GTEST_SKIP() << why;
  CliResult r = kiln_streaming("fuzz --graphs 24 --seed 5 --device cuda --jobs 2 --batch 6 --save failures");
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "kiln fuzz: 24 graphs on cuda")) << r.out;
  EXPECT_FALSE(has(r.out, "compile error") || has(r.out, "run error")) << r.out;
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// The saved reproducers (bugs found by the fuzzer, fixed), as arguments of --replay.
std::string regression_files() {
  const fs::path dir = fs::path(data_dir()) / "tools" / "fuzz_regressions";
  std::string files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kir") files += " " + e.path().string();
  return files;
}

// Every saved reproducer passes on every device present.
TEST_F(CliFuzz, SavedRegressionCasesPass) {
  const std::string files = regression_files();
  ASSERT_FALSE(files.empty()) << "no regression cases in tests/tools/fuzz_regressions";
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  CliResult r = kiln_streaming("fuzz --device cpu --replay" + files);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "FAIL")) << r.out;
}

// The same on the GPU: several were CUDA findings (NVVM's read-only loads, cuBLASLt's bf16
// split-K, NVRTC 13's crash), and a compiler crash would take this process's child down.
TEST_F(CliFuzz, SavedRegressionCasesPassOnTheGpu) {
#if KILN_HAVE_CUDA
  std::string why;
  if (!backend::cuda_device_present(&why)) GTEST_SKIP() << why;
  const std::string files = regression_files();
  ASSERT_FALSE(files.empty()) << "no regression cases in tests/tools/fuzz_regressions";
  CliResult r = kiln_streaming("fuzz --device cuda --replay" + files);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "FAIL")) << r.out;
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace kiln::testing
