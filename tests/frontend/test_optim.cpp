// Optimizers as graph ops: one train-step graph = joint graph + SGD/AdamW update, checked
// against the update formulas of torch.optim.SGD and torch.optim.AdamW worked out in double.
#include <gtest/gtest.h>

#include "backend/explain.h"
#include "ir/bytes.h"

#include <cmath>
#include <set>

#include "frontend/kiln.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/cpu/jit.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::has;

namespace {

// L(w) = sum(w * w * x), so dL/dw = 2 w x.
const std::vector<double> kW = {0.5, -1.0, 2.0}, kX = {1.0, 0.5, -0.25};

struct Quadratic {
  Tensor w = tensor(kW, {3});
  Tensor x = tensor(kX, {3});
  TracedGraph loss;
  Quadratic() {
    w.set_name("w");
    loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{(w * w * b[0]).sum()}; }, {x}, "loss");
  }
};

std::vector<double> grad_of(const std::vector<double>& w) {
  std::vector<double> g;
  for (size_t i = 0; i < w.size(); ++i) g.push_back(2 * w[i] * kX[i]);
  return g;
}

// torch.optim.SGD.step, element by element.
std::vector<double> torch_sgd(const SGDConfig& c, int steps) {
  std::vector<double> w = kW, buf(w.size());
  for (int t = 1; t <= steps; ++t) {
    std::vector<double> g = grad_of(w);
    for (size_t i = 0; i < w.size(); ++i) {
      double d = g[i] + c.weight_decay * w[i];
      if (c.momentum != 0) {
        buf[i] = t == 1 ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
        d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
      }
      w[i] -= c.lr * d;
    }
  }
  return w;
}

// torch.optim.AdamW.step (amsgrad=False), element by element.
std::vector<double> torch_adamw(const AdamWConfig& c, int steps) {
  std::vector<double> w = kW, m(w.size()), v(w.size());
  for (int t = 1; t <= steps; ++t) {
    std::vector<double> g = grad_of(w);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] *= 1 - c.lr * c.weight_decay;
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g[i];
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g[i] * g[i];
      double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
      w[i] -= (c.lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
    }
  }
  return w;
}

std::vector<double> run_steps(const OptimizerConfig& opt, int steps, std::vector<double>* losses = nullptr) {
  Quadratic q;
  TrainStep ts = make_train_step(q.loss, opt);
  TrainState st = ts.init(q.loss.parameters);
  std::vector<double> l = train(ts, st, {q.x.data()}, steps);
  if (losses) *losses = l;
  EXPECT_EQ(st.step, steps);
  return st.params.at(0).to_doubles();
}

void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << "element " << i;
}

TEST(Optim, SgdOneStepByHand) {
  // g = 2 w x = [1, -1, -1]; w - 0.1 g.
  std::vector<double> losses;
  expect_near_all(run_steps(SGDConfig{.lr = 0.1}, 1, &losses), {0.4, -0.9, 2.1}, 1e-7);
  EXPECT_NEAR(losses[0], 0.25 * 1.0 + 1.0 * 0.5 + 4.0 * -0.25, 1e-7);  // the loss before the step
}

TEST(Optim, SgdMatchesTorchFormulas) {
  for (const SGDConfig& c : {SGDConfig{.lr = 0.05}, SGDConfig{.lr = 0.05, .weight_decay = 0.1},
                             SGDConfig{.lr = 0.05, .momentum = 0.9},
                             SGDConfig{.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
                             SGDConfig{.lr = 0.05, .momentum = 0.8, .nesterov = true, .weight_decay = 0.02}}) {
    SCOPED_TRACE(fmt::format("lr={} momentum={} dampening={} nesterov={} wd={}", c.lr, c.momentum, c.dampening,
                             c.nesterov, c.weight_decay));
    for (int steps : {1, 3}) expect_near_all(run_steps(c, steps), torch_sgd(c, steps), 1e-6);
  }
}

TEST(Optim, AdamWOneStepByHand) {
  // On step 1 Adam's update is lr * g / (|g| + eps): w (1 - lr wd) - lr sign(g).
  expect_near_all(run_steps(AdamWConfig{.lr = 0.1, .weight_decay = 0.01}, 1), {0.3995, -0.8990, 2.0980}, 1e-6);
}

TEST(Optim, AdamWMatchesTorchFormulas) {
  for (const AdamWConfig& c : {AdamWConfig{}, AdamWConfig{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1},
                               AdamWConfig{.lr = 0.01, .weight_decay = 0}}) {
    SCOPED_TRACE(fmt::format("lr={} betas=({}, {}) eps={} wd={}", c.lr, c.beta1, c.beta2, c.eps, c.weight_decay));
    for (int steps : {1, 2, 5}) expect_near_all(run_steps(c, steps), torch_adamw(c, steps), 1e-5);
  }
}

TEST(Optim, TrainStepGraphSignaturePrintsAndParses) {
  Quadratic q;
  TrainStep ts = make_train_step(q.loss, AdamWConfig{});
  EXPECT_EQ(ts.num_params, 1);
  EXPECT_EQ(ts.num_state, 2);
  EXPECT_EQ(ts.num_batch, 1);
  EXPECT_EQ(ts.param_paths, std::vector<std::string>{"w"});
  EXPECT_EQ(ts.state_names, (std::vector<std::string>{"w_exp_avg", "w_exp_avg_sq"}));
  std::vector<std::string> inputs, outputs;
  for (const Node* in : ts.graph.inputs()) inputs.push_back(in->name());
  for (const Value& v : ts.graph.outputs()) outputs.push_back(v.name());
  EXPECT_EQ(inputs, (std::vector<std::string>{"w", "w_exp_avg", "w_exp_avg_sq", "x0", "step"}));
  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_EQ(outputs[1], "new_w");
  EXPECT_EQ(outputs[2], "new_w_exp_avg");
  EXPECT_EQ(outputs[3], "new_w_exp_avg_sq");
  std::string text = print_graph(ts.graph);
  EXPECT_EQ(print_graph(parse_graph(text)), text);
  EXPECT_TRUE(has(text, "graph train_step(")) << text;
  EXPECT_TRUE(has(text, "sqrt(")) << text;
}

// A grad scaler adds three state tensors (its scale starting at init_scale); in f32 nothing
// overflows, so AdamW with it takes torch's steps exactly (scaling by a power of two is exact).
TEST(Optim, AGradScalerIsThreeMoreStateTensorsAndChangesNoF32Step) {
  Quadratic q;
  AdamWConfig adamw{.lr = 1e-2};
  TrainStep ts = make_train_step(q.loss, adamw, GradScalerConfig{.init_scale = 1024.0, .growth_interval = 3});
  EXPECT_EQ(ts.num_state, 5);
  EXPECT_EQ(ts.scaler_state, 2);
  EXPECT_EQ(ts.state_names[2], "grad_scaler_scale");
  TrainState st = ts.init(q.loss.parameters);
  EXPECT_EQ(st.state[2].get(0), 1024.0);
  EXPECT_EQ(st.state[3].get(0), 0.0);
  train(ts, st, {q.x.data()}, 7);
  expect_near_all(st.params.at(0).to_doubles(), torch_adamw(adamw, 7), 1e-5);
  EXPECT_EQ(st.state[2].get(0), 1024.0 * 4) << "grown after 3 and after 6 good steps";
  EXPECT_EQ(st.state[3].get(0), 1.0) << "one good step since";
  EXPECT_EQ(st.state[4].get(0), 0.0) << "none skipped";
  for (double bad : {1000.0, 0.0, -2.0}) EXPECT_THROW(make_train_step(q.loss, adamw, GradScalerConfig{.init_scale = bad}), Error);
  EXPECT_THROW(make_train_step(q.loss, adamw, GradScalerConfig{.growth_factor = 3.0}), Error);
  EXPECT_THROW(make_train_step(q.loss, adamw, GradScalerConfig{.backoff_factor = 2.0}), Error);
  EXPECT_THROW(make_train_step(q.loss, adamw, GradScalerConfig{.growth_interval = 0}), Error);
}

TEST(Optim, SgdWithoutMomentumHasNoState) {
  Quadratic q;
  TrainStep ts = make_train_step(q.loss, SGDConfig{.lr = 0.1});
  EXPECT_EQ(ts.num_state, 0);
  EXPECT_EQ(ts.graph.outputs().size(), 2u);
}

TEST(Optim, TrainingAnMlpLowersTheLoss) {
  nn::MLP mlp(8, 16, 3);
  Tensor x = randn({4, 8}, 1), y = randn({4, 8}, 2) * 0.5;
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square(mlp(b[0]) - b[1]))}; },
                           {x, y}, "mlp_loss");
  for (const OptimizerConfig& opt : {OptimizerConfig{AdamWConfig{.lr = 1e-2}}, OptimizerConfig{SGDConfig{.lr = 0.1, .momentum = 0.9}}}) {
    TrainStep ts = make_train_step(loss, opt);
    EXPECT_EQ(ts.num_params, 4);
    EXPECT_EQ(ts.param_paths, (std::vector<std::string>{"fc.weight", "fc.bias", "proj.weight", "proj.bias"}));
    TrainState st = ts.init(loss.parameters);
    std::vector<double> losses = train(ts, st, {x.data(), y.data()}, 20);
    for (double l : losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_LT(losses.back(), 0.5 * losses.front()) << fmt::format("{}", fmt::join(losses, ", "));
    // The first loss is the model's own, before any update.
    EXPECT_NEAR(losses.front(), mean(square(mlp(x) - y)).item(), 1e-6);
  }
}

// kiln explain on a training step's graph explains it as one (it differentiates itself already):
// its parameters and optimizer state, not a joint graph of the step.
TEST(Optim, ExplainRecognisesATrainingStep) {
  nn::MLP mlp(8, 16, 3);
  Tensor x = randn({4, 8}, 1), y = randn({4, 8}, 2) * 0.5;
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square(mlp(b[0]) - b[1]))}; },
                           {x, y}, "mlp_loss");
  for (const OptimizerConfig& opt : {OptimizerConfig{AdamWConfig{}}, OptimizerConfig{SGDConfig{.lr = 0.1, .momentum = 0.9}}}) {
    TrainStep ts = make_train_step(loss, opt);
    std::string text = backend::explain(ts.graph).text;
    EXPECT_NE(text.find("this graph is a training step"), std::string::npos) << text;
    EXPECT_NE(text.find(fmt::format("It updates 4 parameters ({})", format_bytes((8 * 16 + 16 + 16 * 8 + 8) * 4))), std::string::npos) << text;
    EXPECT_EQ(text.find("saved %"), std::string::npos) << text;
  }
  // the loss graph itself is explained as a graph to differentiate
  EXPECT_NE(backend::explain(loss.graph).text.find("training (joint graph, min-cut partition)"), std::string::npos);
}

TEST(Optim, Errors) {
  Quadratic q;
  EXPECT_TRUE(has(kiln::testing::error_of([&] { make_train_step(q.loss, SGDConfig{.lr = -1}); }), "learning rate"));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { make_train_step(q.loss, AdamWConfig{.beta1 = 1.0}); }), "beta1"));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { make_train_step(q.loss, SGDConfig{.nesterov = true}); }), "nesterov"));
  TracedGraph no_params = trace([](const Tensor& t) { return t.sum(); }, randn({3}, 1));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { make_train_step(no_params, SGDConfig{}); }), "no floating-point parameters"));
  TrainStep ts = make_train_step(q.loss, SGDConfig{});
  TrainState st = ts.init(q.loss.parameters);
  EXPECT_TRUE(has(kiln::testing::error_of([&] { train_step(ts, st, {}); }), "batch"));
}

}  // namespace

namespace {

TEST(Optim, TrainerWritesParametersBackIntoTheModule) {
  nn::MLP mlp(8, 16, 4);
  Tensor x = randn({4, 8}, 5), y = randn({4, 8}, 6) * 0.5;
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); };
  double before = loss_fn({x, y}).item();
  Trainer trainer(mlp, loss_fn, {x, y}, AdamWConfig{.lr = 1e-2});
  EXPECT_EQ(trainer.train_step().num_params, 4);
  double first = trainer.step({x, y});
  EXPECT_NEAR(first, before, 1e-6);
  double last = first;
  for (int i = 0; i < 14; ++i) last = trainer.step({x, y});
  EXPECT_LT(last, first);
  // The module's own (eager) forward sees the trained weights.
  double after = loss_fn({x, y}).item();
  EXPECT_LT(after, 0.7 * before);
  EXPECT_EQ(mlp.fc->weight.data().to_doubles(), trainer.state().params[0].to_doubles());
}

// The step compiled for the CPU (compiled_executor) against the reference interpreter's step:
// the same losses, step for step, and it is compiled once.
TEST(Optim, ACompiledTrainingStepMatchesTheReferenceStepForStep) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  nn::MLP a(8, 16, 4), b(8, 16, 4);
  Tensor x = randn({6, 8}, 5), y = randn({6, 8}, 6) * 0.5;
  auto loss_of = [&](nn::MLP& m) { return [&m](const std::vector<Tensor>& t) { return mean(square(m(t[0]) - t[1])); }; };
  int compiles = 0;
  auto seen = std::make_shared<std::set<const Graph*>>();  // shared: the Trainer copies executors
  Executor counting = [&compiles, seen, inner = compiled_executor()](const Graph& g, std::span<const HostTensor> in) {
    compiles += seen->insert(&g).second;
    return inner(g, in);
  };
  Trainer reference(a, loss_of(a), {x, y}, AdamWConfig{.lr = 1e-2});
  Trainer compiled(b, loss_of(b), {x, y}, AdamWConfig{.lr = 1e-2}, counting);
  for (int i = 0; i < 10; ++i) {
    double want = reference.step({x, y}), got = compiled.step({x, y});
    EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want))) << "step " << i;
  }
  EXPECT_EQ(compiles, 1);
}

}  // namespace

namespace {

TEST(Optim, UnnamedCapturedTensorsAreConstantsNotParameters) {
  Tensor w = tensor(kW, {3}), x = tensor(kX, {3}), half = tensor({0.5}, {});
  w.set_name("w");
  TracedGraph loss =
      trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{(w * w * b[0]).sum() * half}; }, {x}, "loss");
  ASSERT_EQ(loss.parameters.size(), 2u);
  TrainStep ts = make_train_step(loss, SGDConfig{.lr = 0.1});
  EXPECT_EQ(ts.num_params, 1);
  EXPECT_TRUE(has(print_graph(ts.graph), "constant(size=[], dtype=f32, values=[0.5])")) << print_graph(ts.graph);
  TrainState st = ts.init({loss.parameters[0]});
  train(ts, st, {x.data()}, 1);
  // Half the gradient of the quadratic: w - 0.1 * w x.
  expect_near_all(st.params[0].to_doubles(), {0.45, -0.95, 2.05}, 1e-7);
}

}  // namespace
