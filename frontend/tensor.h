#pragma once
// kiln::Tensor: the user-facing tensor handle of the builder API. A Tensor is a shared handle
// (copies alias, as in PyTorch) to a TensorImpl that holds the tensor's type and either
//   - concrete data in host memory (a HostTensor: the eager CPU path),
//   - concrete data in a device's own memory (a backend::DeviceStorage that the device's
//     backend made, after .to(Device::cuda()) or .cuda(): ops on it compile and run on that
//     device, frontend/device_kernel.h), or
//   - a traced Value (a node result in the graph being recorded by kiln::trace).
// Every op on Tensors goes through the dispatcher (frontend/dispatcher.h), which picks the
// eager or the tracing kernel from the kinds of its inputs.
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "backend/device_storage.h"
#include "frontend/arg_types.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "ir/tensor_meta.h"

namespace kiln {
class DispatchKeySet;
struct CompiledBackward;  // frontend/compiled_backward.h

struct TensorImpl {
  TensorMeta meta;         // meta.device says where the data is
  HostTensor data;         // defined for eager tensors on the CPU
  backend::StoragePtr device_data;  // defined for eager tensors in a device's own memory
  Value value;             // set for traced tensors
  uint64_t trace_id = 0;   // which trace `value` belongs to (0: not traced)
  std::string name;        // parameters: their module path, e.g. "blocks.0.attn.qkv.weight"
  // Autograd through kiln::compile (frontend/compile.h), as PyTorch's leaf tensors: a tensor
  // that requires a gradient gets one in `grad` from backward() on a compiled result.
  bool requires_grad = false;
  // A module's buffer (nn::Module::register_buffer): named, but never trained by a training step.
  bool is_buffer = false;
  std::shared_ptr<TensorImpl> grad;
  // Set on the results of a compiled call that computed a gradient-carrying forward: the
  // compiled backward graph and what it saved, shared by the call's results.
  std::shared_ptr<CompiledBackward> grad_fn;
  int grad_fn_output = 0;  // which result of that call this tensor is

  // Takes `other`'s type and storage (host or device memory), keeping this impl's identity
  // (name, gradient state): an in-place update that every holder of the tensor sees, as a
  // module's parameters after a training step or a move to another device.
  void set_storage_from(const TensorImpl& other) {
    meta = other.meta;
    data = other.data;
    device_data = other.device_data;
  }
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no impl
  explicit Tensor(HostTensor data, std::string name = "");
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const TensorMeta& meta() const;
  DType dtype() const { return meta().dtype; }
  const Shape& shape() const { return meta().shape; }
  int64_t dim() const { return meta().rank(); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return meta().numel(); }

  bool is_traced() const { return defined() && impl_->trace_id != 0; }
  // The concrete values of an eager tensor on the CPU; kiln::Error for a traced tensor (it has
  // none) or one on a GPU (move it with .cpu() first, as PyTorch's .numpy() asks).
  const HostTensor& data() const;
  // The values of an eager tensor wherever it is: a copy from the GPU for a device tensor.
  HostTensor host_data() const;
  // The single value of a one-element tensor (copied back from a GPU, as PyTorch's item()).
  // Inside kiln::compile, reading a traced tensor's value is a graph break: the graph so far
  // is compiled and run, and `where` names the break in KILN_LOGS=graph_breaks. Inside
  // kiln::trace, which records one graph, it is a kiln::Error.
  double item(std::source_location where = std::source_location::current()) const;
  // PyTorch's bool(t): the truth of a one-element tensor, so that `if (x.sum() > 0)` works
  // eagerly and, inside kiln::compile, breaks the graph as item() does.
  explicit operator bool() const;
  bool is_nonzero(std::source_location where = std::source_location::current()) const;
  std::vector<double> to_doubles() const { return host_data().to_doubles(); }
  std::vector<int64_t> to_ints() const { return host_data().to_ints(); }

  // ---- devices (frontend/device.cpp), as PyTorch's: model.cuda(), x.to(device)
  const Device& device() const { return meta().device; }
  bool is_cuda() const { return device().kind == Device::Kind::CUDA; }
  // The tensor on `device`: itself when it is there already, else a copy (host <-> device,
  // contiguous). kiln::Error for a traced tensor, a build without CUDA, or no such GPU.
  Tensor to(Device device) const;
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor cpu() const { return to(Device::cpu()); }
  // The device memory of an eager tensor off the host (on a GPU); kiln::Error otherwise.
  const backend::DeviceStorage& device_data() const;
  const backend::StoragePtr& device_storage() const;  // the same, shared

  const std::string& name() const;
  Tensor& set_name(std::string name);

  // ---- gradients through kiln::compile (frontend/compile.h, frontend/compiled_backward.cpp)
  bool requires_grad() const;
  // Marks a leaf tensor (an input or a parameter) as one whose gradient backward() computes.
  Tensor& requires_grad_(bool on = true);
  // The gradient accumulated by backward() calls; undefined until the first.
  Tensor grad() const;
  void zero_grad();  // forgets the gradient (PyTorch's set_to_none)
  // Runs the compiled backward of the call that returned this tensor, with `gradient` as its
  // tangent (default: 1 for a one-element tensor), and adds the gradients into .grad() of the
  // inputs and parameters that require one. Once per call (its saved tensors are then freed).
  // kiln::Error for a tensor that no compiled, gradient-carrying call returned.
  void backward(const Tensor& gradient = Tensor()) const;
  DispatchKeySet key_set() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // "f32[2,3] (eager)" / "f32[2,3] (traced %add_1)": for messages.
  std::string str() const;

  // ---- methods for the common ops (each forwards to the free function in frontend/ops.h)
  Tensor reshape(const IntList& shape) const;
  Tensor view(const IntList& shape) const { return reshape(shape); }
  Tensor permute(const IntList& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor expand(const IntList& size) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(const Dims& dim = {}) const;
  Tensor contiguous() const;
  Tensor flatten() const { return reshape({-1}); }
  Tensor sum(const Dims& dim = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(const Dims& dim = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor amax(const Dims& dim = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;
  Tensor to(DType dtype) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor relu() const;
  Tensor softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;

  // PyTorch's copy_: writes `src` (broadcast to this shape, cast to this dtype) into this
  // tensor in place; every holder of the tensor sees the new values. Eager, the storage is
  // replaced. While tracing, later reads in the trace get the new value, and a concrete tensor
  // written (a module's buffer) becomes an output of the traced graph that its runner writes
  // back (TracedGraph::written): a compiled training step writes BatchNorm's running statistics.
  Tensor& copy_(const Tensor& src);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// ---- factories of concrete (eager) tensors. Under a trace they stay concrete and are lifted
// into graph inputs where used; zeros/ones/full/arange (frontend/ops.h) are ops instead and
// are recorded into the graph.
Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype = DType::F32);
Tensor tensor_of_ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::I64);
Tensor scalar_tensor(Scalar value, std::optional<DType> dtype = std::nullopt);
// Counter-based (ir/random.h): element i is a function of (seed, i) only, so the same seed
// gives the same tensor on any machine. randn: N(0, 1). (rand, U[0, 1), is an op: frontend/ops.h.)
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::F32);
// Integers in [low, high) (e.g. a batch of token ids), i64 unless told otherwise.
Tensor randint(int64_t low, int64_t high, const Shape& shape, uint64_t seed, DType dtype = DType::I64);

}  // namespace kiln
