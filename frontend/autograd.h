#pragma once
// The training API: gradients of C++ functions over Tensors, in the spirit of JAX's
// grad / value_and_grad and functorch, with a module-oriented form for nn::Modules.
//
//   auto df = kiln::grad([](const std::vector<Tensor>& a) { return (a[0] * a[1]).sum(); }, {0, 1});
//   std::vector<Tensor> g = df({x, y});                 // d/dx, d/dy
//
//   nn::MLP mlp(16);
//   ModuleGrads r = kiln::value_and_grad(mlp, [&](const std::vector<Tensor>& b) {
//     return mean(square(mlp(b[0]) - b[1]));
//   }, {x, target});
//   r.loss.item(); r["fc.weight"];
//
// Each call traces the function (kiln::trace), builds the joint graph (build_joint) and runs
// it with an Executor, feeding 1.0 as the tangent of the scalar result. The executor is the
// reference interpreter unless one is given, so kiln::compile can take its place later.
// Tracing again on every call keeps captured parameters current (no guards yet).
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frontend/nn/module.h"
#include "frontend/tensor.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

// Runs a graph on inputs in its input order and returns its outputs.
using Executor = std::function<std::vector<HostTensor>(const Graph&, std::span<const HostTensor>)>;
// The reference interpreter as an Executor.
Executor reference_executor();
// The compiler as an Executor: each graph it is given is compiled once for `device` (the CPU
// backend, or a GPU with host tensors copied over and back) and run compiled from then on.
// What train(), train_step() and a Trainer on the CPU take to run the compiled training step:
//   Trainer trainer(model, loss_fn, batch, AdamWConfig{}, compiled_executor());
// kiln::Error from the first run where the device's backend is missing.
Executor compiled_executor(Device device = Device::cpu());

// A function of Tensors to one scalar floating-point Tensor (a loss).
using ScalarFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct ValueAndGrads {
  Tensor value;               // the function's (scalar) result
  std::vector<Tensor> grads;  // one per argnum, same shape and dtype as that argument
};

using GradFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using ValueAndGradFn = std::function<ValueAndGrads(const std::vector<Tensor>&)>;

// jax.grad: the gradients of fn's scalar result with respect to the arguments `argnums`
// (negative counts from the end). kiln::Error when fn's result is not a 0-d floating tensor,
// when an argnum is out of range, or when it names an integer argument.
GradFn grad(ScalarFn fn, std::vector<int> argnums = {0}, Executor executor = {});
// jax.value_and_grad: the result and the gradients, from one run of the joint graph.
ValueAndGradFn value_and_grad(ScalarFn fn, std::vector<int> argnums = {0}, Executor executor = {});

// The loss and one gradient per parameter of a module.
struct ModuleGrads {
  Tensor loss;
  std::vector<std::pair<std::string, Tensor>> grads;  // (parameter path, gradient), named_parameters() order
  // The gradient of the parameter at `path` ("fc.weight"); kiln::Error naming it if unknown.
  const Tensor& operator[](const std::string& path) const;
};

// `loss_fn` calls the module on the batch and returns a scalar loss; parameters the loss does
// not use get zero gradients.
ModuleGrads value_and_grad(const nn::Module& module, const ScalarFn& loss_fn, const std::vector<Tensor>& batch,
                           Executor executor = {});

// Gradients: off inside a NoGradGuard's scope on this thread (torch.no_grad()), so that a model
// whose parameters require gradients compiles a forward-only graph for inference.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln
