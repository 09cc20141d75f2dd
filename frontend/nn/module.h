#pragma once
// nn::Module: the base of the neural-network modules, as in PyTorch: a module owns named
// parameters (concrete Tensors) and named submodules; named_parameters() lists them in
// registration order with their dotted paths ("blocks.0.attn.qkv.weight"). Each parameter
// Tensor also carries its path as its name, which is how kiln::trace names the graph input it
// becomes.
//
// Modules are built whole by their constructors and held by shared_ptr (like torch::nn's
// module holders), so registered submodules never move. Initialization is deterministic: a
// module takes a seed and derives its children's and parameters' seeds from it by name
// (derive_seed), so a parameter's values depend only on the root seed and its path.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::nn {

// A seed for the part `name` of something seeded with `seed` (a hash of both).
uint64_t derive_seed(uint64_t seed, std::string_view name);

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Buffers (register_buffer): named tensors a module keeps that are not trained (RoPE's
  // tables, a mask, running statistics), listed, named by path and moved as parameters are.
  // Traced, they are inputs of the graph as parameters are (kiln::compile reads their current
  // values at each call, and a compiled training step at each step), but get no gradient.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  std::vector<Tensor> buffers() const;

  // (path, parameter) pairs: this module's own, then each submodule's, in registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Total number of parameter elements.
  int64_t num_parameters() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

  // Training or evaluation mode, as PyTorch's module.train() / eval(): set on this module and
  // every submodule; modules that behave differently read is_training() (BatchNorm: the batch's
  // statistics and an update of the running ones, or the running ones). New modules train.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Forgets every parameter's gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  // Moves every parameter and buffer to `device` in place, as PyTorch's module.to(): the
  // Tensors the module (and whoever holds its parameters) see now live there. One copy per
  // tensor, none after: graphs then run on the parameters' device memory.
  Module& to(Device device);
  Module& cuda(int index = 0) { return to(Device::cuda(index)); }
  Module& cpu() { return to(Device::cpu()); }

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  // A tensor the module keeps but does not train (requires no gradient); named by its path.
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    adopt(name, module);
    return module;
  }

 private:
  void adopt(const std::string& name, std::shared_ptr<Module> module);
  // Re-names every parameter below this module after its path under `prefix`.
  void set_prefix(const std::string& prefix);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const;
  void check_new_name(const std::string& name) const;

  std::string prefix_;  // "blocks.0." once adopted; "" for a root
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace kiln::nn
