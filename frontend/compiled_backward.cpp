// Tensor::backward(): runs the compiled backward graph of the kiln::compile'd call that made
// the tensor, and accumulates the gradients into the leaves' .grad(), as PyTorch's
// CompiledFunction.backward does for torch.compile.
#include "frontend/compiled_backward.h"

#include "frontend/device.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {

namespace {
Tensor filled(const TensorMeta& meta, double value, Device device) {
  HostTensor h = HostTensor::empty(TensorMeta(meta.dtype, meta.shape));
  if (value != 0)
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, value);
  return Tensor(std::move(h)).to(device);
}
}  // namespace

void Tensor::backward(const Tensor& gradient) const {
  if (!defined()) fail("backward() of an undefined tensor");
  if (is_traced())
    fail("backward() of traced tensor {}: inside a traced function, differentiate with kiln::grad or let "
         "kiln::compile build the backward (mark the inputs with requires_grad_())",
         str());
  const std::shared_ptr<CompiledBackward>& bw = impl()->grad_fn;
  if (!bw)
    fail("backward() of tensor {}: it was not returned by a kiln::compile'd call that computes gradients. kiln has "
         "no eager autograd: mark the function's inputs or parameters with requires_grad_() and call the compiled "
         "function, or use kiln::grad / kiln::value_and_grad",
         str());
  if (bw->ran)
    fail("backward() through the call of compiled function '{}' a second time: its saved tensors were freed after "
         "the first backward (call the function again)",
         bw->name);
  int tangent = bw->tangent_for_output.at(static_cast<size_t>(impl()->grad_fn_output));
  if (tangent < 0) fail("backward() of tensor {}: it is not differentiable (not a floating-point result)", str());
  const TensorMeta& tmeta = bw->tangent_metas[static_cast<size_t>(tangent)];
  Tensor g = gradient;
  if (!g.defined()) {
    if (numel() != 1)
      fail("backward() of tensor {} with {} elements needs a gradient of its shape (only a one-element result "
           "takes 1 by default)",
           str(), numel());
    g = filled(tmeta, 1.0, bw->device);
  } else if (g.dtype() != tmeta.dtype || g.shape() != tmeta.shape) {
    fail("backward(): the gradient {} must have the result's type {}", g.str(), tmeta.str());
  }

  std::vector<Tensor> inputs = bw->saved;
  for (size_t i = 0; i < bw->tangent_metas.size(); ++i)
    inputs.push_back(static_cast<int>(i) == tangent ? g.to(bw->device) : filled(bw->tangent_metas[i], 0.0, bw->device));
  std::vector<Tensor> grads = run(*bw->graph, inputs);
  KILN_INTERNAL_ASSERT(grads.size() == bw->leaves.size(), "the backward returns one gradient per leaf");
  bw->ran = true;
  bw->saved.clear();
  for (size_t i = 0; i < grads.size(); ++i) {
    TensorImpl* leaf = bw->leaves[i].impl();
    Tensor gi = grads[i].to(leaf->meta.device);
    leaf->grad = leaf->grad ? (Tensor(leaf->grad) + gi).impl_ptr() : gi.impl_ptr();
  }
}

}  // namespace kiln
