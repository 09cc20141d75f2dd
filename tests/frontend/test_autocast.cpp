// Autocast (frontend/autocast.h): the table's choice per op, the casts it inserts eagerly and
// into traced graphs, the dispatch trace of its decisions, gradients through the casts to f32
// parameters, recompiles of kiln::compile when the scope changes, and an f16 reduction that
// would overflow without it.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda_backend.h"
#include "frontend/kiln.h"
#include "runtime/cpu/jit.h"
#include "tests/frontend/trace_lines.h"
#include "ir/error.h"
#include "ir/printer.h"

using namespace kiln;

namespace {

using kiln::testing::TraceLines;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(Autocast, OneTableDecides) {
  for (Op op : {Op::Matmul, Op::Bmm, Op::Linear, Op::Addmm, Op::ScaledDotProductAttention})
    EXPECT_EQ(autocast_policy(op), AutocastPolicy::LowerPrecision) << op_name(op);
  for (Op op : {Op::Sum, Op::Mean, Op::Var, Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::CrossEntropy, Op::NllLoss, Op::Exp,
                Op::Log, Op::Pow})
    EXPECT_EQ(autocast_policy(op), AutocastPolicy::Float32) << op_name(op);
  for (Op op : {Op::Add, Op::Mul, Op::Where, Op::Cat}) EXPECT_EQ(autocast_policy(op), AutocastPolicy::Promote) << op_name(op);
  for (Op op : {Op::Relu, Op::Reshape, Op::To, Op::Gather}) EXPECT_EQ(autocast_policy(op), AutocastPolicy::None) << op_name(op);
}

TEST(Autocast, EagerOpsGetTheirRowsCasts) {
  Tensor a = randn({4, 8}, 1), w = randn({8, 3}, 2);
  Tensor h = to(randn({4, 3}, 3), DType::BF16);
  {
    Autocast scope(DType::BF16);
    Tensor y = matmul(a, w);
    EXPECT_EQ(y.dtype(), DType::BF16) << "matmul runs in the scope's dtype";
    EXPECT_EQ(sum(h).dtype(), DType::F32) << "a reduction runs in f32";
    EXPECT_EQ(exp(h).dtype(), DType::F32);
    EXPECT_EQ(add(h, to(randn({4, 3}, 4), DType::F32)).dtype(), DType::F32) << "mixed inputs go to the widest";
    EXPECT_EQ(relu(h).dtype(), DType::BF16) << "an op with no row runs as it is";
    EXPECT_EQ(exp(a).dtype(), DType::F32) << "f32 stays f32 in an f32 op";
    EXPECT_EQ(matmul(to(a, DType::F64), to(w, DType::F64)).dtype(), DType::F64) << "f64 is left alone";
    {
      Autocast off(std::nullopt);
      EXPECT_EQ(matmul(a, w).dtype(), DType::F32) << "an inner scope turns it off";
    }
    // The values: the product of the bf16-rounded inputs, rounded to bf16.
    std::vector<double> want = matmul(to(to(a, DType::BF16), DType::F32), to(to(w, DType::BF16), DType::F32)).to_doubles();
    std::vector<double> got = y.to_doubles();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], std::abs(want[i]) * 1e-2 + 1e-3) << i;
  }
  EXPECT_EQ(matmul(a, w).dtype(), DType::F32) << "off again after the scope";
}

TEST(Autocast, OnlySixteenBitTypes) {
  EXPECT_THROW(Autocast(DType::F32), Error);
  EXPECT_THROW(Autocast(DType::I64), Error);
}

TEST(Autocast, TracedGraphsRecordTheCasts) {
  Tensor x = randn({4, 8}, 5), w = randn({8, 3}, 6);
  w.set_name("w");
  Autocast scope(DType::F16);
  TracedGraph tg = trace([&](const Tensor& in) { return softmax(matmul(in, w), -1); }, x);
  std::string text = print_graph(tg.graph);
  EXPECT_TRUE(has(text, "to(%x0, dtype=f16) : f16[4,8]")) << text;
  EXPECT_TRUE(has(text, "dtype=f16) : f16[8,3]")) << "the parameter's cast\n" << text;
  EXPECT_TRUE(has(text, "matmul(")) << text;
  EXPECT_TRUE(has(text, "dtype=f32) : f32[4,3]")) << "softmax's input back to f32\n" << text;
  EXPECT_EQ(tg.graph.outputs()[0].meta().dtype, DType::F32);
  EXPECT_EQ(tg.parameters.at(0).dtype(), DType::F32) << "the parameter stays an f32 master weight";
}

TEST(Autocast, TheDispatchTraceShowsEachDecision) {
  Tensor a = randn({2, 3}, 7), b = randn({3, 2}, 8);
  Autocast scope(DType::BF16);
  TraceLines t;
  matmul(a, b);
  ASSERT_GE(t.lines.size(), 4u);
  EXPECT_EQ(t.lines[0], "[autocast] matmul: lower precision (bf16): input 0 f32 -> bf16, input 1 f32 -> bf16");
  EXPECT_EQ(t.lines[1], "[dispatch] to keys={CPU} -> cpu kernel (reference, or compiled when large)");
  EXPECT_EQ(t.lines.back(), "[dispatch] matmul keys={Autocast,CPU} -> autocast kernel");
  t.lines.clear();
  relu(a);
  ASSERT_EQ(t.lines.size(), 2u) << "no [autocast] line for an op with no row";
  EXPECT_EQ(t.lines[1], "[dispatch] relu keys={Autocast,CPU} -> autocast kernel");
}

// Gradients flow back through the casts to the f32 weights, in f32, and agree with f32
// training within bf16's precision.
TEST(Autocast, GradientsReachTheF32Weights) {
  Tensor x = randn({16, 32}, 9), w = randn({32, 8}, 10), target = randn({16, 8}, 11);
  auto loss = [&](const std::vector<Tensor>& p) {
    Tensor d = sub(matmul(x, p[0]), target);
    return mean(mul(d, d));
  };
  ValueAndGrads exact = value_and_grad(loss, {0})({w});
  ValueAndGrads mixed;
  {
    Autocast scope(DType::BF16);
    mixed = value_and_grad(loss, {0})({w});
  }
  ASSERT_EQ(mixed.grads.size(), 1u);
  EXPECT_EQ(mixed.grads[0].dtype(), DType::F32);
  EXPECT_EQ(mixed.value.dtype(), DType::F32) << "the loss (a mean) in f32";
  std::vector<double> g = mixed.grads[0].to_doubles(), want = exact.grads[0].to_doubles();
  double scale = 0, err = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    err = std::max(err, std::abs(g[i] - want[i]));
  }
  EXPECT_LT(err, 0.05 * scale) << "bf16 inputs: a few percent of the largest gradient";
  EXPECT_GT(err, 0.0) << "the bf16 run did run in bf16";
  EXPECT_NEAR(mixed.value.item(), exact.value.item(), 0.02 * exact.value.item());
}

// f16 holds at most 65504: a sum of 70,000 ones overflows in f16 and is right in f32.
TEST(Autocast, AnF16ReductionThatWouldOverflowStaysRight) {
  Tensor ones16 = ones({70000}, DType::F16);
  EXPECT_TRUE(std::isinf(sum(ones16).item())) << "without autocast: an f16 sum";
  Autocast scope(DType::F16);
  Tensor s = sum(ones16);
  EXPECT_EQ(s.dtype(), DType::F32);
  EXPECT_EQ(s.item(), 70000.0);
}

// kiln::compile guards on the scope: a graph traced without casts is not reused inside one.
TEST(Autocast, CompiledFunctionsRecompileWhenTheScopeChanges) {
  // On the CPU where it has the JIT, else on the GPU (the device machine builds without LLVM).
  std::optional<Device> dev;
  if (runtime::cpu::jit_available()) dev = Device::cpu();
  else if (backend::cuda_device_present()) dev = Device::cuda();
  if (!dev) GTEST_SKIP() << "no CPU JIT in this build and no GPU";
  Tensor a = randn({4, 8}, 12).to(*dev), w = randn({8, 4}, 13).to(*dev);
  auto f = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], w)}; });
  EXPECT_EQ(f(std::vector<Tensor>{a})[0].dtype(), DType::F32);
  {
    Autocast scope(DType::BF16);
    EXPECT_EQ(f(std::vector<Tensor>{a})[0].dtype(), DType::BF16);
  }
  EXPECT_EQ(f(std::vector<Tensor>{a})[0].dtype(), DType::F32);
  ASSERT_FALSE(f.stats().recompile_reasons.empty());
  EXPECT_EQ(f.stats().recompile_reasons[0], "autocast off -> bf16");
}

}  // namespace
