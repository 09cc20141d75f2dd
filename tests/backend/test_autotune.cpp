// Schedule tuning (backend/autotune.h): every candidate schedule computes what the default
// does (the tuner may pick any of them), a tuned compile keeps the fastest and says so, and the
// kernel cache keeps the choice for the next compile of the same kernel.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "codegen/schedule_candidates.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

// Graphs whose kernels take every mapping the candidates vary: rows of 1024 (a warp per row)
// and 4097 (a block per row) reduced every way, a layer norm's backward (chunks of rows), a
// pointwise chain over a flat tensor and over a transposed view (tiles), short rows (a thread
// per row), attention on FFMA tiles.
std::vector<Graph> graphs_of_every_mapping() {
  std::vector<Graph> out;
  for (int64_t len : {1024, 4097}) {
    Graph g(fmt::format("rows_{}", len));
    Builder b(g);
    Var x = input(b, "x", F({37, len}));
    Var w = input(b, "w", F({len}));
    Var bias = input(b, "bias", F({len}));
    g.set_outputs({b.sum(x, {1}), b.amax(x, {1}), b.argmax(x, 1), b.op(Op::Softmax, {x}, {{"dim", int64_t(1)}}),
                   b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{len}}})});
    out.push_back(std::move(g));
  }
  {
    Graph f("ln");
    Builder b(f);
    Var x = input(b, "x", F({264, 768}));
    Var w = input(b, "w", F({768}));
    Var bias = input(b, "bias", F({768}));
    f.set_outputs({b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{768}}})});
    autograd::JointGraph joint = autograd::build_joint(f);
    out.push_back(std::move(autograd::partition(joint, autograd::PartitionKind::Default).backward));
  }
  {
    Graph g("pointwise");
    Builder b(g);
    Var x = input(b, "x", F({300, 257}));
    Var y = input(b, "y", F({257, 300}));
    Var xt = b.op(Op::Transpose, {y}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
    Var s = input(b, "s", F({5000, 9}));
    g.set_outputs({b.op(Op::Gelu, {x * 2.0 + 1.0}), b.op(Op::Sigmoid, {xt}) * x, b.sum(s, {1})});
    out.push_back(std::move(g));
  }
  {
    // Flat loops of several grid strides a thread: an unrolled loop's whole steps, the
    // iterations left after them, a scalar tail of 3, and a row vector read at i % 1028.
    Graph g("flat");
    Builder b(g);
    Var z = input(b, "z", F({1001, 4099}));
    Var u = input(b, "u", F({4001, 1028}));
    Var w = input(b, "w", F({1028}));
    g.set_outputs({b.op(Op::Exp, {z}) * z, b.op(Op::Sigmoid, {u}) * w});
    out.push_back(std::move(g));
  }
  // f32 attention on FFMA tiles, every pass, at sizes that leave tails of every tile size.
  out.push_back(parse_graph(R"(
graph attention_f32(%q: f32[2,77,40], %k: f32[2,90,40], %v: f32[2,90,40], %dy: f32[2,77,40]) {
  %y, %lse = flash_attention(%q, %k, %v, is_causal=true, scale=0.3) : f32[2,77,40], f32[2,77]
  %dq, %dk, %dv = flash_attention_backward(%dy, %q, %k, %v, %lse, %lse, is_causal=true, scale=0.3) : f32[2,77,40], f32[2,90,40], f32[2,90,40]
  return (%y, %dq, %dk, %dv)
})"));
  return out;
}

class Autotune : public DeviceTest {};
KILN_DEVICE_TESTS(Autotune);

TEST_P(Autotune, EveryCandidateScheduleMatchesTheReference) {
  KILN_REQUIRE_JIT();
  if (!on_cuda()) GTEST_SKIP() << "the CPU schedule reads none of the tuner's knobs";
  std::vector<std::string> knobs = codegen::every_candidate_knobs(codegen::cuda_target());
  ASSERT_GE(knobs.size(), 15u);
  uint64_t seed = 90;
  for (const Graph& g : graphs_of_every_mapping())
    for (const std::string& k : knobs) {
      SCOPED_TRACE(fmt::format("graph {} under '{}'", g.name(), k));
      backend::CompileOptions options;
      options.schedule_knobs = k;
      expect_matches_reference(g, inputs_for(g, seed++, 37), 4, options);
    }
}

// Where nothing can time the candidates (the CPU backend; CUDA with no GPU) a tuned compile is
// the untuned one, and the report says why.
TEST_P(Autotune, WithNothingToTimeOnTheDefaultsStay) {
  KILN_REQUIRE_JIT();
  std::string why;
  if (on_cuda() && device_can_run(&why)) GTEST_SKIP() << "a GPU is here: Autotune.TunesOnceThenTheCacheKeepsTheChoice covers it";
  std::vector<Graph> graphs = graphs_of_every_mapping();
  const Graph& g = graphs[0];
  backend::CompileOptions tuned;
  tuned.autotune = true;
  backend::CompiledGraph a = compile_for_test(g, tuned), b = compile_for_test(g);
  EXPECT_TRUE(has(a.report.autotune, "nothing tuned")) << a.report.autotune;
  EXPECT_TRUE(has(a.report.str(), "autotune: nothing tuned: ")) << a.report.str();
  EXPECT_EQ(a.executable.source(), b.executable.source());
  EXPECT_TRUE(b.report.autotune.empty());
}

#if KILN_HAVE_CUDA
// KILN_CACHE_DIR set to a fresh folder for the test's life.
class FreshCache {
 public:
  FreshCache() {
    if (const char* old = std::getenv("KILN_CACHE_DIR")) saved_ = old;
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / fmt::format("kiln_autotune_{}{}", rd(), rd());
    std::filesystem::create_directories(dir_);
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
  }
  ~FreshCache() {
    if (saved_) ::setenv("KILN_CACHE_DIR", saved_->c_str(), 1);
    else ::unsetenv("KILN_CACHE_DIR");
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::vector<std::filesystem::path> files(const std::string& ext) const {
    std::vector<std::filesystem::path> out;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir_))
      if (e.path().extension() == ext) out.push_back(e.path());
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::optional<std::string> saved_;
};

TEST_P(Autotune, TunesOnceThenTheCacheKeepsTheChoice) {
  if (!on_cuda()) GTEST_SKIP() << "the CPU backend does not tune";
  KILN_REQUIRE_RUN();
  FreshCache cache;
  std::vector<Graph> graphs = graphs_of_every_mapping();
  const Graph& g = graphs[1];
  backend::CompileOptions tuned;
  tuned.autotune = true;
  backend::CompiledGraph first = compile_for_test(g, tuned);
  const std::string& r = first.report.autotune;
  EXPECT_TRUE(has(r, ", 0 from the cache")) << r;
  EXPECT_FALSE(has(r, " 0 timed")) << r;
  std::vector<std::string> records;
  for (const codegen::Kernel& k : first.executable.lowered().kernels) {
    records.push_back(codegen::print_schedule(k.schedule, k.launch));
    if (k.schedule.mapping == "block per row") {
      EXPECT_TRUE(has(records.back(), "; tuned: ")) << records.back();
    }
  }
  ASSERT_FALSE(cache.files(".tune").empty());
  std::vector<HostTensor> in = inputs_for(g, 5, 37);
  std::vector<HostTensor> want = interpret(g, in), got = first.run(in);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_close(got[i], want[i], 1e-4, 1e-4)) << "output " << i;

  // The same kernels in a graph of another name, its values named otherwise: every choice
  // from the cache, nothing timed, the same schedules.
  Graph again = g.clone();
  again.set_name("rows_again");
  for (size_t i = 0; i < again.inputs().size(); ++i) again.rename(Value{again.inputs()[i], 0}, fmt::format("in{}", i));
  backend::CompiledGraph second = compile_for_test(again, tuned);
  EXPECT_TRUE(has(second.report.autotune, " 0 timed")) << second.report.autotune;
  EXPECT_FALSE(has(second.report.autotune, ", 0 from the cache")) << second.report.autotune;
  for (size_t i = 0; i < records.size(); ++i) {
    const codegen::Kernel& k = second.executable.lowered().kernels[i];
    EXPECT_EQ(codegen::print_schedule(k.schedule, k.launch), records[i]);
  }

  // A damaged choice is a miss: timed again, and written again.
  for (const auto& f : cache.files(".tune")) std::ofstream(f, std::ios::trunc) << "torn";
  backend::CompiledGraph third = compile_for_test(g, tuned);
  EXPECT_TRUE(has(third.report.autotune, ", 0 from the cache")) << third.report.autotune;
  got = third.run(in);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_close(got[i], want[i], 1e-4, 1e-4)) << "output " << i;
}

// A matmul with a bias and GELU (cuBLASLt's epilogue) and a batched one: each tuned over
// cuBLASLt's algorithms on scratch operands, the results right (KILN_LOGS=autotune shows the
// choices; a second process takes them from the cache, which one process cannot show: its
// plans are tuned already).
TEST_P(Autotune, MatmulsTakeTheFastestOfCublasLtsAlgorithms) {
  if (!on_cuda()) GTEST_SKIP() << "the CPU backend does not tune";
  KILN_REQUIRE_RUN();
  FreshCache cache;
  Graph g("mm");
  Builder b(g);
  Var x = input(b, "x", F({256, 384}));
  Var w = input(b, "w", F({384, 512}));
  Var bias = input(b, "bias", F({512}));
  Var q = input(b, "q", F({4, 64, 32}));
  Var k = input(b, "k", F({4, 32, 64}));
  g.set_outputs({b.gelu(b.matmul(x, w) + bias, "tanh"), b.matmul(q, k)});
  backend::CompileOptions tuned;
  tuned.autotune = true;
  backend::CompiledGraph cg = compile_for_test(g, tuned);
  EXPECT_TRUE(has(cg.report.autotune, "; 2 matmuls")) << cg.report.autotune;
  std::vector<HostTensor> in = inputs_for(g, 3);
  std::vector<HostTensor> want = interpret(g, in), got = cg.run(in);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tensors_close(got[i], want[i], 1e-4, 1e-4)) << "output " << i;
}
#endif

}  // namespace
}  // namespace kiln::testing
