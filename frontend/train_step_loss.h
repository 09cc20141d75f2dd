#pragma once
// What a compiled training step (kiln::compile(module, loss_fn, optimizer)) and the Trainer both
// do before building the step: trace the loss as one graph, and find the module's own tensor for
// each parameter the step trains. Their errors say what to do.
#include <string>
#include <vector>

#include "frontend/autograd.h"
#include "frontend/nn/module.h"
#include "frontend/trace.h"

namespace kiln {

// The loss traced as one graph named `name`. `who` names the step in errors ("kiln::compile
// 'train_step'", "Trainer"): reading a value inside it (item(), bool()) is an error that says a
// training step is one graph and what to do instead.
TracedGraph trace_training_loss(const ScalarFn& loss_fn, const std::vector<Tensor>& batch, const std::string& name,
                                const std::string& who);

// The module's parameter tensor for each trained parameter path of `loss` (TrainStep::param_paths,
// in order). A path that is not the module's names the tensor, the module's parameters of the
// same name, and the registration that makes it one.
std::vector<Tensor> module_parameters_for(const nn::Module& module, const TracedGraph& loss,
                                          const std::vector<std::string>& paths, const std::string& who);

}  // namespace kiln
