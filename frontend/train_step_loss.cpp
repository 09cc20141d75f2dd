#include "frontend/train_step_loss.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace kiln {

TracedGraph trace_training_loss(const ScalarFn& loss_fn, const std::vector<Tensor>& batch, const std::string& name,
                                const std::string& who) {
  return trace_one_graph([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{loss_fn(b)}; }, batch, name,
                         fmt::format("{} is a training step, one graph of the forward, the backward and the "
                                     "optimizer's update, and cannot break where a value is read as kiln::compile(fn) "
                                     "does. Keep the value a tensor (where(), clamp() or a mask in place of an `if` on "
                                     "it), or read it outside the step: the step returns the loss, and a separate "
                                     "kiln::compile(fn) of what you want to look at can read values",
                                     who));
}

namespace {
// The last component of a parameter path: "blocks.0.attn.weight" -> "weight".
std::string leaf_of(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}
}  // namespace

std::vector<Tensor> module_parameters_for(const nn::Module& module, const TracedGraph& loss,
                                          const std::vector<std::string>& paths, const std::string& who) {
  auto params = module.named_parameters();
  std::vector<Tensor> out;
  for (const std::string& path : paths) {
    auto it = std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == path; });
    if (it != params.end()) {
      out.push_back(it->second);
      continue;
    }
    std::string type;
    for (size_t i = 0; i < loss.parameter_paths.size() && i < loss.parameters.size(); ++i)
      if (loss.parameter_paths[i] == path) type = " (" + loss.parameters[i].meta().str() + ")";
    std::vector<std::string> same_name;
    for (const auto& [p, t] : params)
      if (leaf_of(p) == leaf_of(path)) same_name.push_back("'" + p + "'");
    std::string near = same_name.empty()
                           ? fmt::format("none of the module's {} parameters is named like it", params.size())
                           : fmt::format("the module's parameters of that name are {}, other tensors",
                                         fmt::join(same_name.begin(), same_name.begin() + std::min<size_t>(same_name.size(), 4), ", "));
    fail("{}: the loss reads tensor '{}'{}, which is not a parameter of the module ({}). A tensor is trained when the "
         "module owns it: if it belongs to a submodule, register that submodule in its parent with "
         "register_module(\"name\", submodule) (its parameters are then named 'name.{}'); if it is the module's own, "
         "register it with register_parameter(\"{}\", tensor). A constant should have no name: an unnamed tensor the "
         "loss reads is captured as a constant, not trained",
         who, path, type, near, leaf_of(path), leaf_of(path));
  }
  return out;
}

}  // namespace kiln
