// kiln::grad / kiln::value_and_grad: gradients of traced C++ functions and of modules,
// against derivatives worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/kiln.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::has;
using kiln::testing::tensors_close;

namespace {

HostTensor from(const std::vector<double>& v, const Shape& s) { return HostTensor::from_doubles(DType::F32, s, v); }

TEST(GradApi, ProductGradientsAreTheOtherFactor) {
  Tensor x = randn({2, 3}, 1), y = randn({2, 3}, 2);
  GradFn df = grad([](const std::vector<Tensor>& a) { return (a[0] * a[1]).sum(); }, {0, 1});
  std::vector<Tensor> g = df({x, y});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(tensors_close(g[0].data(), y.data(), 0, 0));
  EXPECT_TRUE(tensors_close(g[1].data(), x.data(), 0, 0));
  // Negative argnums count from the end, as in JAX.
  std::vector<Tensor> g1 = grad([](const std::vector<Tensor>& a) { return (a[0] * a[1]).sum(); }, {-1})({x, y});
  ASSERT_EQ(g1.size(), 1u);
  EXPECT_TRUE(tensors_close(g1[0].data(), x.data(), 0, 0));
}

TEST(GradApi, ValueAndGradOfTanhSquared) {
  Tensor x = randn({4, 5}, 3);
  auto f = [](const std::vector<Tensor>& a) { Tensor t = tanh(a[0]); return (t * t).sum(); };
  ValueAndGrads r = value_and_grad(f)({x});
  std::vector<double> xs = x.to_doubles(), expected_grad;
  double expected_value = 0;
  for (double v : xs) {
    double t = std::tanh(v);
    expected_value += t * t;
    expected_grad.push_back(2 * t * (1 - t * t));  // d/dx tanh(x)^2
  }
  EXPECT_NEAR(r.value.item(), expected_value, 1e-5);
  ASSERT_EQ(r.grads.size(), 1u);
  EXPECT_EQ(r.grads[0].meta().str(), "f32[4,5]");
  EXPECT_TRUE(tensors_close(r.grads[0].data(), from(expected_grad, {4, 5}), 1e-6, 1e-5));
}

TEST(GradApi, MeanSquaredErrorOfAMatmul) {
  // L = mean((x @ w - y)^2) over n elements: dL/dw = x^T (2 (x w - y) / n).
  Tensor x = randn({3, 4}, 4), w = randn({4, 2}, 5), y = randn({3, 2}, 6);
  std::vector<Tensor> g = grad([](const std::vector<Tensor>& a) {
    Tensor d = matmul(a[0], a[1]) - a[2];
    return mean(d * d);
  }, {1})({x, w, y});
  Tensor d = matmul(x, w) - y;
  Tensor expected = matmul(x.t(), d * (2.0 / 6.0));
  EXPECT_TRUE(tensors_close(g[0].data(), expected.data().contiguous(), 1e-6, 1e-5));
}

TEST(GradApi, ExecutorCanBeSwapped) {
  int runs = 0;
  Executor counting = [&](const Graph& g, std::span<const HostTensor> in) {
    ++runs;
    EXPECT_TRUE(has(g.inputs().back()->name(), "tangent_"));  // the joint graph is what runs
    return interpret(g, in);
  };
  Tensor x = randn({3}, 7);
  auto g = grad([](const std::vector<Tensor>& a) { return exp(a[0]).sum(); }, {0}, counting)({x});
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(tensors_close(g[0].data(), exp(x).data(), 1e-6, 1e-6));
}

TEST(GradApi, Errors) {
  Tensor x = randn({2, 3}, 1);
  auto sum_fn = [](const std::vector<Tensor>& a) { return a[0].sum(); };
  EXPECT_TRUE(has(kiln::testing::error_of([&] { grad([](const std::vector<Tensor>& a) { return a[0] * 2.0; })({x}); }),
                  "0-d floating-point"));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { grad(sum_fn, {3})({x}); }), "argnum 3 is out of range"));
  Tensor idx = tensor_of_ints({1, 2}, {2});
  std::string e = kiln::testing::error_of([&] {
    grad([](const std::vector<Tensor>& a) { return (a[0].to(DType::F32)).sum(); })({idx});
  });
  EXPECT_TRUE(has(e, "not floating point")) << e;
  EXPECT_TRUE(has(kiln::testing::error_of([&] { grad(sum_fn)({Tensor()}); }), "undefined"));
}

TEST(GradApi, ModuleGradientsOfALinearLayer) {
  // L = sum(x @ W^T + b): dL/dW[o,i] = sum_b x[b,i]; dL/db[o] = B.
  nn::Linear lin(3, 2, true, 11);
  Tensor x = randn({4, 3}, 12);
  ModuleGrads r = value_and_grad(lin, [&](const std::vector<Tensor>& b) { return lin(b[0]).sum(); }, {x});
  EXPECT_NEAR(r.loss.item(), lin(x).sum().item(), 1e-5);
  ASSERT_EQ(r.grads.size(), 2u);
  EXPECT_EQ(r.grads[0].first, "weight");
  EXPECT_EQ(r.grads[1].first, "bias");
  std::vector<double> xs = x.to_doubles(), dw;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) {
      double s = 0;
      for (int b = 0; b < 4; ++b) s += xs[static_cast<size_t>(b * 3 + i)];
      dw.push_back(s);
    }
  EXPECT_TRUE(tensors_close(r["weight"].data(), from(dw, {2, 3}), 1e-6, 1e-5));
  EXPECT_TRUE(tensors_close(r["bias"].data(), from({4, 4}, {2}), 0, 0));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { (void)r["nope"]; }), "'nope'"));
}

TEST(GradApi, UnusedParametersGetZeroGradients) {
  nn::Linear lin(3, 2, true, 1);
  Tensor x = randn({4, 3}, 2);
  ModuleGrads r = value_and_grad(lin, [&](const std::vector<Tensor>& b) { return matmul(b[0], lin.weight.t()).sum(); }, {x});
  EXPECT_EQ(r["bias"].meta().str(), "f32[2]");
  EXPECT_EQ(r["bias"].to_doubles(), (std::vector<double>{0, 0}));
  EXPECT_NE(r["weight"].to_doubles(), (std::vector<double>(6, 0.0)));
}

TEST(GradApi, MiniGptLossHasAGradientPerParameter) {
  nn::MiniGPTConfig cfg{.vocab_size = 20, .d_model = 8, .n_heads = 2, .n_layers = 1, .context = 4};
  nn::MiniGPT model(cfg, 1);
  Tensor tokens = randint(0, 20, {2, 4}, 1), targets = randint(0, 20, {2, 4}, 2);
  ModuleGrads r = value_and_grad(model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); },
                                 {tokens, targets});
  EXPECT_NEAR(r.loss.item(), model.loss(tokens, targets).item(), 1e-5);
  auto params = model.named_parameters();
  ASSERT_EQ(r.grads.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(r.grads[i].first, params[i].first);
    EXPECT_EQ(r.grads[i].second.shape(), params[i].second.shape()) << params[i].first;
  }
  // The lm_head gets a non-zero gradient from every position.
  double norm = 0;
  for (double v : r["lm_head.weight"].to_doubles()) norm += v * v;
  EXPECT_GT(norm, 0);
}

}  // namespace
