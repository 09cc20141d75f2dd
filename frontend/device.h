#pragma once
// Tensors on devices and compiled graphs run on them (frontend/device.cpp).
//
//   nn::MiniGPT model(cfg, 0);
//   model.to(Device::cuda());                  // parameters move once, in place
//   Tensor tokens = randint(0, 600, {8, 32}, 1).cuda();
//   auto compiled = backend::compile(graph, {.device = Device::cuda()});
//   std::vector<Tensor> out = run(compiled.executable, {tokens, ...});  // no host copies
//
// Tensor::to / cuda / cpu are declared in frontend/tensor.h, Module::to in frontend/nn/module.h.
#include <vector>

#include "backend/compile.h"
#include "frontend/tensor.h"

namespace kiln {

// Runs a compiled graph on tensors of its device: on a device with memory of its own (a GPU),
// device tensors in, device tensors out, with no host copies (backend::run_on_device); on the
// CPU, host tensors. kiln::Error for a tensor on another device (naming the input), a traced
// tensor, or a wrong type.
std::vector<Tensor> run(const backend::Executable& exe, const std::vector<Tensor>& inputs);

// Wraps a device's storage as an eager Tensor (no copy).
Tensor from_device(backend::StoragePtr t, std::string name = "");

}  // namespace kiln
