// The losses of frontend/losses.h against PyTorch 1.13's torch.nn.functional (values computed
// with Debian's python3-torch in float64, written here), their gradients against finite
// differences in float64, and their errors.
#include <gtest/gtest.h>

#include <functional>

#include "frontend/losses.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "tests/support/gradcheck_util.h"

namespace kiln {
namespace {

// Inputs of every case ([2, 3], f64): logits or predictions x, targets y, probabilities p,
// a per-column weight w and pos_weight pw. x[1][2] = 40 and y[1][2] = -50 are far out, where
// a naive log(sigmoid(x)) or a thresholded softplus would round.
Tensor X() { return tensor({0.5, -1.25, 3.0, -0.2, 0.0, 40.0}, {2, 3}, DType::F64); }
Tensor Y() { return tensor({0.25, -1.0, 1.0, 0.3, 2.5, -50.0}, {2, 3}, DType::F64); }
Tensor P() { return tensor({1.0, 0.0, 0.5, 0.25, 1.0, 0.0}, {2, 3}, DType::F64); }
Tensor W() { return tensor({2.0, 0.5, 1.0}, {3}, DType::F64); }
Tensor PW() { return tensor({3.0, 1.0, 0.5}, {3}, DType::F64); }
Tensor Q() { return tensor({0.2, 0.0, 0.8, 0.5, 0.25, 0.25}, {2, 3}, DType::F64); }

void expect_values(const Tensor& got, const std::vector<double>& want, const char* what) {
  std::vector<double> g = got.to_doubles();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

TEST(Losses, MatchPyTorch) {
  Tensor x = X(), y = Y(), p = P();
  expect_values(mse_loss(x, y, "none"), {0.0625, 0.0625, 4.0, 0.25, 6.25, 8100.0}, "mse none");
  expect_values(mse_loss(x, y), {1351.7708333333333}, "mse mean");
  expect_values(mse_loss(x, y, "sum"), {8110.625}, "mse sum");
  expect_values(l1_loss(x, y, "none"), {0.25, 0.25, 2.0, 0.5, 2.5, 90.0}, "l1 none");
  expect_values(l1_loss(x, y), {15.916666666666666}, "l1 mean");
  expect_values(smooth_l1_loss(x, y, "none", 0.5), {0.0625, 0.0625, 1.75, 0.25, 2.25, 89.75}, "smooth_l1 none");
  expect_values(smooth_l1_loss(x, y, "mean", 0.5), {15.6875}, "smooth_l1 mean");
  expect_values(smooth_l1_loss(x, y, "sum", 0.0), {95.5}, "smooth_l1 beta 0 is l1");
  expect_values(huber_loss(x, y, "none", 2.0), {0.03125, 0.03125, 2.0, 0.125, 3.0, 178.0}, "huber none");
  expect_values(huber_loss(x, y, "sum", 2.0), {183.1875}, "huber sum");
  expect_values(binary_cross_entropy_with_logits(x, p, std::nullopt, "none"),
                {0.4740769841801067, 0.25192908134537295, 1.548587351573742, 0.6481388693815917, 0.6931471805599453, 40.0}, "bce none");
  expect_values(binary_cross_entropy_with_logits(x, p), {7.269313244506794}, "bce mean");
  expect_values(binary_cross_entropy_with_logits(x, p, W(), "none", PW()),
                {2.84446190508064, 0.12596454067268648, 1.5364405136803065, 2.0944166081447753, 0.34657359027997264, 40.0},
                "bce weight pos_weight none");
  expect_values(binary_cross_entropy_with_logits(x, p, W(), "sum", PW()), {46.94785715785838}, "bce weight pos_weight sum");
  Tensor lp = log_softmax(x, 1), q = Q();
  expect_values(kl_div(lp, q, "none"),
                {0.19650957363157368, 0.0, -0.10492621657779275, 19.753426409720028, 9.653426409720028, -0.34657359027997264},
                "kl none (a 0 target gives 0)");
  expect_values(kl_div(lp, q), {4.858643764368978}, "kl mean");
  expect_values(kl_div(lp, q, "sum"), {29.151862586213866}, "kl sum");
  expect_values(kl_div(lp, q, "batchmean"), {14.575931293106933}, "kl batchmean");
  Tensor log_q = log(q + 0.1);
  expect_values(kl_div(lp, log_q, "none", true),
                {0.4164038928798099, 0.2039400687597924, -0.01203726155927175, 23.813504625740407, 13.63256225642546, -0.3674377435745372},
                "kl log_target none");
  expect_values(kl_div(lp, log_q, "batchmean", true), {18.84346791933583}, "kl log_target batchmean");
}

// Each loss traced into a graph of (input, target) and checked by finite differences in f64
// with respect to both (away from the kinks of abs and of smooth_l1's and huber's branches).
TEST(Losses, GradientsMatchFiniteDifferences) {
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  std::vector<std::pair<const char*, Fn>> cases = {
      {"mse", [](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }},
      {"l1", [](const Tensor& a, const Tensor& b) { return l1_loss(a, b, "sum"); }},
      {"smooth_l1", [](const Tensor& a, const Tensor& b) { return smooth_l1_loss(a, b, "mean", 0.5); }},
      {"huber", [](const Tensor& a, const Tensor& b) { return huber_loss(a, b, "none", 2.0); }},
      {"bce", [](const Tensor& a, const Tensor& b) { return binary_cross_entropy_with_logits(a, sigmoid(b), W(), "mean", PW()); }},
      {"kl", [](const Tensor& a, const Tensor& b) { return kl_div(log_softmax(a, 1), softmax(b, 1), "batchmean"); }},
      {"kl log_target", [](const Tensor& a, const Tensor& b) { return kl_div(log_softmax(a, 1), log_softmax(b, 1), "sum", true); }},
  };
  Tensor a = X(), b = Y();
  for (const auto& [name, fn] : cases) {
    TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0], in[1])}; }, {a, b}, "loss");
    EXPECT_TRUE(testing::gradcheck_graph(tg.graph, tg.graph_inputs({a.data(), b.data()}))) << name;
  }
}

TEST(Losses, BadArgumentsAreErrors) {
  Tensor x = X(), y = Y();
  EXPECT_THROW(mse_loss(x, y, "average"), Error);
  EXPECT_THROW(kl_div(x, y, "elementwise"), Error);
  EXPECT_THROW(smooth_l1_loss(x, y, "mean", -1.0), Error);
  EXPECT_THROW(huber_loss(x, y, "mean", 0.0), Error);
  EXPECT_THROW(mse_loss(tensor_of_ints({1, 2}, {2}), tensor_of_ints({1, 2}, {2})), Error);
  EXPECT_THROW(mse_loss(x, tensor({1.0, 2.0}, {2}, DType::F64)), Error);  // shapes that do not broadcast
  // broadcasting works as in PyTorch: a [3] target against a [2, 3] input
  expect_values(mse_loss(x, W(), "sum"), {(0.5 - 2) * (0.5 - 2) + (-1.25 - 0.5) * (-1.25 - 0.5) + 4 + 2.2 * 2.2 + 0.25 + 39.0 * 39.0}, "mse broadcast");
}

}  // namespace
}  // namespace kiln
