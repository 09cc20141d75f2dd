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
#include "tools/fuzz/error_bounds.h"
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
                         "reshape", "cat", "split", "matmul", "linear", "softmax", "layer_norm", "gather", "scatter_add",
                         "embedding", "cross_entropy", "to", "masked_fill", "exp", "log"})
    EXPECT_GT(ops[op], 0) << op;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool})
    EXPECT_TRUE(dtypes.count(t)) << dtype_name(t);
  EXPECT_GT(with_zero_dim, 0);
  EXPECT_LE(max_nodes, 25 + 25);  // 25 drawn, plus the nodes split/cat's results share
}

// The running error bound (tools/fuzz/error_bounds.h): about an ulp where a graph is well
// conditioned, large where it amplifies rounding, and not finite where nothing can be said.
TEST(FuzzErrorBounds, FollowTheGraphsConditioning) {
  auto bound_of = [](const std::string& text, std::vector<HostTensor> inputs) {
    return fuzz::error_bounds(parse_graph(text), inputs).front();
  };
  // exp(x) + 1 at x = 1: 4 ulps of exp, 1 ulp of the add, relative to e + 1.
  HostTensor x = HostTensor::from_doubles(DType::F32, {2}, std::vector<double>{1.0, -2.0});
  HostTensor b = bound_of(R"(graph g(%x: f32[2]) {
  %e = exp(%x) : f32[2]
  %one = full(size=[], fill_value=1.0) : f32[]
  %y = add(%e, %one) : f32[2]
  return (%y)
})", {x});
  EXPECT_GT(b.get(0), 1e-7);
  EXPECT_LT(b.get(0), 4e-6);  // ~ (8 * e + 2 * 3.7) * 2^-24
  // x - mean(x) over a row of equal values: exactly 0 in the reference, but a compiled mean is
  // off by its summation's rounding, and then divided by sqrt(1e-5) (layer_norm of a constant row).
  HostTensor row = HostTensor::from_doubles(DType::F32, {1, 33}, std::vector<double>(33, 2.718281828));
  HostTensor c = bound_of(R"(graph g(%x: f32[1,33]) {
  %s = sum(%x, dim=[-1], keepdim=true) : f32[1,1]
  %n = full(size=[], fill_value=33.0) : f32[]
  %m = div(%s, %n) : f32[1,1]
  %d = sub(%x, %m) : f32[1,33]
  %r = full(size=[], fill_value=316.0) : f32[]
  %y = mul(%d, %r) : f32[1,33]
  return (%y)
})", {row});
  EXPECT_GT(c.get(0), 1e-4);  // a few ulps of 2.7 (2.4e-7 each) times 316
  EXPECT_TRUE(std::isfinite(c.get(0)));
  // The variance of equal values: exactly 0, but computed around a computed mean (1e-21 in f32
  // for 52 copies of 0.001), so its sign is unsure.
  HostTensor same = HostTensor::from_doubles(DType::F32, {13, 4}, std::vector<double>(52, 0.001));
  HostTensor v = bound_of(R"(graph g(%x: f32[13,4]) {
  %v = var(%x, correction=0.0) : f32[]
  %s = sign(%v) : f32[]
  return (%v, %s)
})", {same});
  EXPECT_GT(v.get(0), 1e-19);
  HostTensor vs = fuzz::error_bounds(parse_graph(R"(graph g(%x: f32[13,4]) {
  %v = var(%x, correction=0.0) : f32[]
  %s = sign(%v) : f32[]
  return (%s)
})"), {same}).front();
  EXPECT_EQ(vs.get(0), 2.0);
  // ... and its square is unsure too: each factor moved alone leaves 0 * s at 0.
  HostTensor sq = fuzz::error_bounds(parse_graph(R"(graph g(%x: f32[13,4]) {
  %v = var(%x, correction=0.0) : f32[]
  %s = sign(%v) : f32[]
  %m = mul(%s, %s) : f32[]
  return (%m)
})"), {same}).front();
  EXPECT_GE(sq.get(0), 1.0);
  // silu(x) / silu(x) at x = -88.8: silu is -2.4e-37 there, and -0 once exp(-x) overflows f32
  // (as PyTorch computes it), so the quotient may be 1 or NaN.
  HostTensor silu_tail = HostTensor::from_doubles(DType::F32, {2}, std::vector<double>{-88.8, -3.0});
  HostTensor q = bound_of(R"(graph g(%x: f32[2]) {
  %s = silu(%x) : f32[2]
  %q = div(%s, %s) : f32[2]
  return (%q)
})", {silu_tail});
  EXPECT_TRUE(std::isinf(q.get(0))) << q.get(0);
  EXPECT_LT(q.get(1), 1e-5) << "away from the tail the quotient stays judged";
  // cos of a value whose own rounding is larger than 2 pi: anything in [-1, 1].
  HostTensor big = HostTensor::from_doubles(DType::F32, {1}, std::vector<double>{22.0});
  HostTensor d = bound_of(R"(graph g(%x: f32[1]) {
  %e = exp(%x) : f32[1]
  %c = cos(%e) : f32[1]
  return (%c)
})", {big});
  EXPECT_GE(d.get(0), 2.0);
  // An argmax of values equal in exact arithmetic (exp of equal inputs) may pick either: unsure;
  // a clear maximum is sure. A where on an unsure comparison is unsure.
  const char* argmax_graph = R"(graph g(%x: f32[3]) {
  %e = exp(%x) : f32[3]
  %i = argmax(%e) : i64[]
  %z = full(size=[], fill_value=7.389056099) : f32[]
  %c = gt(%e, %z) : bool[3]
  %w = where(%c, %e, %x) : f32[3]
  return (%i, %w)
})";
  auto bounds = [&](std::vector<double> v) {
    return fuzz::error_bounds(parse_graph(argmax_graph), {HostTensor::from_doubles(DType::F32, {3}, v)});
  };
  std::vector<HostTensor> tie = bounds({2.0, 2.0, 1.0});
  ASSERT_TRUE(tie[0].defined());
  EXPECT_FALSE(std::isfinite(tie[0].get(0)));
  EXPECT_FALSE(std::isfinite(tie[1].get(0)));  // exp(2) against its own f32 value: either side
  std::vector<HostTensor> clear = bounds({1.0, 3.0, 0.5});
  EXPECT_TRUE(!clear[0].defined() || clear[0].get(0) == 0);
  EXPECT_TRUE(std::isfinite(clear[1].get(1)));  // exp(3) = 20 is clearly above
  // A division by a value whose bound holds 0 (gelu's far tail, where compiled code gives 0)
  // may be anything.
  HostTensor tail = bound_of(R"(graph g(%x: f32[1]) {
  %e = gelu(%x, approximate="tanh") : f32[1]
  %d = div(%e, %e) : f32[1]
  return (%d)
})", {HostTensor::from_doubles(DType::F32, {1}, std::vector<double>{-5.5})});
  EXPECT_FALSE(std::isfinite(tail.get(0)));
  // A wrong value is still wrong: 1e-3 off where the bound is ~1e-7.
  HostTensor want = HostTensor::from_doubles(DType::F32, {2}, std::vector<double>{std::exp(1.0) + 1, std::exp(-2.0) + 1});
  HostTensor got = HostTensor::from_doubles(DType::F32, {2}, std::vector<double>{std::exp(1.0) + 1.001, std::exp(-2.0) + 1});
  EXPECT_TRUE(fuzz::compare_tensor(got, want, &want, "%y", &want, std::nullopt, &b));
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

// The comparison catches a wrong value, a lost NaN, a wrong infinity, a wrong integer and a
// wrong type, and forgives what the graph's own conditioning explains.
TEST(FuzzCompare, CatchesWhatItMustAndForgivesIllConditionedElements) {
  auto f32 = [](std::vector<double> v) { return HostTensor::from_doubles(DType::F32, {static_cast<int64_t>(v.size())}, v); };
  auto f64 = [](std::vector<double> v) { return HostTensor::from_doubles(DType::F64, {static_cast<int64_t>(v.size())}, v); };
  auto i64 = [](std::vector<int64_t> v) { return HostTensor::from_ints(DType::I64, {static_cast<int64_t>(v.size())}, v); };
  const double nan = std::nan(""), inf = INFINITY;
  HostTensor want = f32({1.0, nan, inf, 100.0});
  EXPECT_FALSE(fuzz::compare_tensor(f32({1.0, nan, inf, 100.0}), want, nullptr, "%y"));
  EXPECT_FALSE(fuzz::compare_tensor(f32({1.0 + 5e-6, nan, inf, 100.0001}), want, nullptr, "%y"));  // within tolerance
  auto v = fuzz::compare_tensor(f32({1.1, nan, inf, 100.0}), want, nullptr, "%y");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->verdict, fuzz::Verdict::Mismatch);
  EXPECT_TRUE(has(v->detail, "%y[0] = 1.10000002")) << v->detail;
  EXPECT_EQ(fuzz::compare_tensor(f32({1.0, 0.0, inf, 100.0}), want, nullptr, "%y")->verdict, fuzz::Verdict::NanMismatch);
  EXPECT_EQ(fuzz::compare_tensor(f32({1.0, nan, -inf, 100.0}), want, nullptr, "%y")->verdict, fuzz::Verdict::NanMismatch);
  EXPECT_EQ(fuzz::compare_tensor(f64({1.0, nan, inf, 100.0}), want, nullptr, "%y")->verdict,
            fuzz::Verdict::TypeMismatch);
  HostTensor ints = i64({3, 4});
  EXPECT_EQ(fuzz::compare_tensor(i64({3, 5}), ints, nullptr, "%i")->verdict,
            fuzz::Verdict::Mismatch);
  // Where float64 says otherwise, the element is ill-conditioned: an overflow to inf in f32
  // (float64 finite), a comparison that flips.
  HostTensor wide = f64({1.0, nan, 3.5e38, 100.0});
  EXPECT_FALSE(fuzz::compare_tensor(f32({1.0, nan, 3.4e38, 100.0}), want, &wide, "%y"));
  HostTensor ints_wide = i64({3, 5});
  EXPECT_FALSE(fuzz::compare_tensor(i64({3, 5}), ints, &ints_wide, "%i"));
  // The allowance grows with the distance to float64: 100.01 passes where the reference says
  // 100 and float64 100.01, and 100.1 does not.
  HostTensor wide2 = f64({1.0, nan, inf, 100.01});
  EXPECT_FALSE(fuzz::compare_tensor(f32({1.0, nan, inf, 100.01}), want, &wide2, "%y"));
  EXPECT_TRUE(fuzz::compare_tensor(f32({1.0, nan, inf, 100.1}), want, &wide2, "%y"));
}

TEST(FuzzCompare, WidenedGraphHasNoNarrowFloats) {
  Graph g = parse_graph(R"(
graph g(%x: f16[4], %i: i64[4]) {
  %s = sum(%x, dtype=bf16) : bf16[]
  %c = to(%i, dtype=f32) : f32[4]
  return (%s, %c)
})");
  std::optional<Graph> w = fuzz::widened_to_f64(g);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->outputs()[0].meta().dtype, DType::F64);
  EXPECT_EQ(w->outputs()[1].meta().dtype, DType::F64);
  EXPECT_EQ(w->inputs()[1]->meta().dtype, DType::I64);
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

// CI's fuzz run: 2,000 graphs, every config and the joint graphs (about 3 minutes on 2 cores).
TEST_F(CliFuzz, TwoThousandGraphsOnTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  CliResult r = kiln("fuzz --graphs 2000 --seed 7 --device cpu --jobs 2 --save failures");
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
  CliResult r = kiln("fuzz --graphs 24 --seed 5 --device cuda --jobs 2 --batch 6 --save failures");
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
  CliResult r = kiln("fuzz --device cpu --replay" + files);
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
  CliResult r = kiln("fuzz --device cuda --replay" + files);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "FAIL")) << r.out;
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace kiln::testing
