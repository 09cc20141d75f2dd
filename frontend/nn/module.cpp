#include "frontend/nn/module.h"

#include "ir/error.h"

namespace kiln::nn {

uint64_t derive_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name ...
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (h | 1);  // ... mixed with the seed by splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos) fail("'{}' is not a name for a parameter or buffer (no dots, not empty)", name);
  for (auto& [n, p] : params_)
    if (n == name) fail("'{}' is registered twice (a parameter of that name exists)", name);
  for (auto& [n, b] : buffers_)
    if (n == name) fail("'{}' is registered twice (a buffer of that name exists)", name);
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  if (!value.defined() || value.is_traced()) fail("buffer '{}' must be a concrete tensor", name);
  check_new_name(name);
  value.set_name(prefix_ + name);
  value.impl()->requires_grad = false;
  value.impl()->is_buffer = true;
  buffers_.emplace_back(name, value);
  return value;
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  if (!value.defined() || value.is_traced()) fail("parameter '{}' must be a concrete tensor", name);
  check_new_name(name);
  value.set_name(prefix_ + name);
  // As torch.nn.Parameter: a floating parameter requires a gradient (read by kiln::compile).
  if (is_floating(value.dtype())) value.impl()->requires_grad = true;
  params_.emplace_back(name, value);
  return value;
}

void Module::adopt(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) fail("submodule '{}' is null", name);
  for (auto& [n, m] : children_)
    if (n == name) fail("submodule '{}' is registered twice", name);
  module->set_prefix(prefix_ + name + ".");
  children_.emplace_back(name, std::move(module));
}

void Module::set_prefix(const std::string& prefix) {
  prefix_ = prefix;
  for (auto& [name, p] : params_) p.set_name(prefix_ + name);
  for (auto& [name, b] : buffers_) b.set_name(prefix_ + name);
  for (auto& [name, m] : children_) m->set_prefix(prefix_ + name + ".");
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out, bool buffers) const {
  for (auto& [name, t] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, t);
  for (auto& [name, m] : children_) m->collect(prefix + name + ".", out, buffers);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, false);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, true);
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (auto& [name, b] : named_buffers()) out.push_back(b);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

Module& Module::to(Device device) {
  auto move = [&](const std::vector<std::pair<std::string, Tensor>>& tensors) {
    for (auto& [path, t] : tensors)
      if (t.device() != device) t.impl()->set_storage_from(*t.to(device).impl());
  };
  move(named_parameters());
  move(named_buffers());
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [name, m] : children_) m->train(on);
  return *this;
}

void Module::zero_grad() {
  for (auto& [path, p] : named_parameters()) p.zero_grad();
}

}  // namespace kiln::nn
