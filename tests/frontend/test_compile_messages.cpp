// Errors a new user meets building a model with kiln::compile (a Llama-style block, tried as a
// new user would), each saying what to do: a value read inside a compiled training step, a
// tensor the loss trains that the module does not own, and the one-tensor call of a function
// with several results.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "frontend/compile.h"
#include "frontend/nn/layers.h"
#include "frontend/ops.h"
#include "frontend/optim.h"
#include "frontend/trainer.h"
#include "runtime/cpu/jit.h"
#include "tests/support/support.h"

namespace kiln::testing {
namespace {

// A module whose submodule was made but never registered (a forgotten register_module).
struct Forgetful : nn::Module {
  Forgetful() : inner(std::make_shared<nn::Linear>(4, 4, true, 1)), head(register_module("head", std::make_shared<nn::Linear>(4, 1, true, 2))) {}
  Tensor operator()(const Tensor& x) const { return (*head)((*inner)(x)); }
  std::shared_ptr<nn::Linear> inner;
  std::shared_ptr<nn::Linear> head;
};

// A module that reads a value in its loss (a data-dependent `if`).
struct Branchy : nn::Module {
  Branchy() : fc(register_module("fc", std::make_shared<nn::Linear>(4, 4, true, 3))) {}
  std::shared_ptr<nn::Linear> fc;
};

TEST(CompileMessages, ItemInsideACompiledTrainingStepSaysTheStepIsOneGraph) {
  Branchy model;
  Tensor x = randn({2, 4}, 1);
  auto loss_fn = [&](const std::vector<Tensor>& b) {
    Tensor l = mean(square((*model.fc)(b[0])));
    return l.item() > 1.0 ? l * 0.5 : l;  // reads a traced value
  };
  CompiledTrainStep step = compile(model, loss_fn, AdamWConfig{});
  std::string e = error_of([&] { step({x}); });
  EXPECT_TRUE(has(e, "item() reads the value of traced tensor")) << e;
  EXPECT_TRUE(has(e, "kiln::compile(module, loss_fn, optimizer) 'train_step' is a training step, one graph")) << e;
  EXPECT_TRUE(has(e, "where(), clamp() or a mask in place of an `if`")) << e;
  EXPECT_TRUE(has(e, "read it outside the step")) << e;
  EXPECT_FALSE(has(e, "breaks the graph there instead")) << "the step cannot break: " << e;

  std::string t = error_of([&] { Trainer trainer(model, loss_fn, {x}, AdamWConfig{}); });
  EXPECT_TRUE(has(t, "Trainer is a training step, one graph")) << t;
  EXPECT_FALSE(has(t, "breaks the graph there instead")) << t;

  // kiln::trace itself still points at kiln::compile, which can break there.
  std::string traced = error_of([&] { trace([&](const Tensor& v) { return v * v.sum().item(); }, x); });
  EXPECT_TRUE(has(traced, "kiln::compile (frontend/compile.h) breaks the graph there instead")) << traced;
}

TEST(CompileMessages, ATrainedTensorTheModuleDoesNotOwnNamesTheRegistration) {
  Forgetful model;
  Tensor x = randn({3, 4}, 1);
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(model(b[0]))); };
  CompiledTrainStep step = compile(model, loss_fn, AdamWConfig{});
  std::string e = error_of([&] { step({x}); });
  EXPECT_TRUE(has(e, "the loss reads tensor 'weight' (f32[4,4]), which is not a parameter of the module")) << e;
  EXPECT_TRUE(has(e, "the module's parameters of that name are 'head.weight'")) << e;
  EXPECT_TRUE(has(e, "register_module(\"name\", submodule)")) << e;
  EXPECT_TRUE(has(e, "register_parameter(\"weight\", tensor)")) << e;
  std::string t = error_of([&] { Trainer trainer(model, loss_fn, {x}, AdamWConfig{}); });
  EXPECT_TRUE(has(t, "Trainer: the loss reads tensor 'weight'")) << t;
  EXPECT_TRUE(has(t, "register_module(")) << t;
}

TEST(CompileMessages, TheOneTensorFormOfAFunctionWithTwoResultsNamesTheListForm) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  NoGradGuard no_grad;
  CompiledFunction f = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0, in[0] + 1.0}; });
  Tensor x = randn({3}, 1);
  // f({x}) is the list form: both results.
  std::vector<Tensor> both = f({x});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_TRUE(tensors_close(both[1].host_data(), (x + 1.0).host_data(), 1e-6, 1e-6));
  // f(x) is the one-result form: the error names the list form.
  std::string e = error_of([&] { f(x); });
  EXPECT_TRUE(has(e, "called as f(x), the form that returns one tensor, but the function returned 2")) << e;
  EXPECT_TRUE(has(e, "call it as f({x}) (or f(std::vector<Tensor>{x})) to get all of them")) << e;
}

}  // namespace
}  // namespace kiln::testing
