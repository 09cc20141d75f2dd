#pragma once
// Custom operators, registered from C++ at run time, that work everywhere a built-in op does
// (kiln's torch.library.custom_op): the builder and Tensor code call them, graphs and .kir
// files name them, autograd differentiates them, and the backends compile them. An op with a
// scalar expression is pointwise and fuses with its neighbours in the generated kernels of both
// backends, which torch.compile's custom ops cannot: they are opaque to Inductor.
//
//   Op swish = register_custom_op({
//       .schema = "mylib::scaled_swish(Tensor x, float beta=1.0) -> Tensor",
//       .reference = [](auto in, const Attrs& a, auto out_metas) { ... },  // the definition
//       .vjp = [](autograd::VjpContext& c) -> std::vector<Value> { ... },   // optional
//       .scalar_expr = "x * sigmoid(beta * x)",
//   });
//   Tensor y = call_op("mylib::scaled_swish", {x}, {{"beta", 0.5}})[0];
//   Var z = b.op("mylib::scaled_swish", {x.value()}, {{"beta", 0.5}});
//
// An op with kernels of its own instead (opaque: a fusion boundary, a call of its own):
//   register_custom_op({.schema = "mylib::row_scale(Tensor x) -> Tensor", .meta = ..., .reference = ...,
//                       .cpu_kernel = [](auto in, auto out, const Attrs&) { ... },
//                       .cuda_kernel = {.source = "extern \"C\" __global__ void row_scale(...) {...}",
//                                       .entry = "row_scale"}});
//
// Everything is checked at registration, and an error there names the problem: a malformed
// schema, a name that is taken, a scalar expression that does not parse or calls an unknown
// function, a missing reference kernel, or no way to compile the op. Differentiating an op
// registered without a VJP rule is an error naming the op (autograd::build_joint).
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/opaque_kernels.h"
#include "frontend/tensor.h"
#include "ir/op_registry.h"
#include "passes/autograd/vjp.h"
#include "passes/decompose.h"

namespace kiln {

struct CustomOp {
  // "ns::name(Tensor x, Tensor y, float beta=1.0, int k=2) -> Tensor": tensor arguments are
  // the op's inputs, in order; the others are its attributes, by name (with their defaults).
  // Results: "Tensor" (one) or "Tensor[]" (as many as the shape rule gives).
  std::string schema{};
  // The shape and dtype of the results. May be left out with a scalar expression: the inputs
  // broadcast, and the result type is theirs as PyTorch promotes it (a floating type at least).
  MetaFn meta{};
  // The definition of what the op computes (ir/op_registry.h's ReferenceFn): the interpreter
  // runs it, eager CPU Tensors run it, and every compiled result is checked against it.
  ReferenceFn reference{};
  // Optional: the gradients of the inputs, built with the Builder like the built-in rules
  // (passes/autograd/vjp.h). Without one the op cannot be differentiated.
  autograd::VjpRule vjp{};
  // Optional: the op written with existing ops. Alone (no scalar expression, no kernels), the
  // compiler rewrites the op away before code generation: it is a composite. Without a VJP
  // rule, the decomposition also gives the op its gradient: it is differentiated with the
  // built-in ops' rules.
  DecompositionFn decomposition{};
  // Optional: one element of the (single) result as a formula over the inputs and numeric
  // attributes by name (codegen/scalar_expr.h), e.g. "x * sigmoid(beta * x)". The op is then
  // pointwise: the emitters generate it inline, and fusion puts it in its neighbours' kernels.
  std::string scalar_expr{};
  // Optional, instead of a scalar expression: kernels of the op's own (backend/opaque_kernels.h),
  // a C++ function for the CPU and CUDA C compiled by NVRTC, with a launch rule, for the GPU.
  // The op is then opaque: fusion leaves it a call of its own, on contiguous buffers. A
  // backend with no kernel of it refuses to compile it, naming the op.
  backend::CpuOpaqueKernel cpu_kernel{};
  backend::CudaOpaqueKernel cuda_kernel{};
};

// Registers the op (same table, same rules as the built-in ones) and returns it. kiln::Error,
// before anything is registered, for any problem with the definition.
Op register_custom_op(const CustomOp& def);

// Calls an op by name from Tensor code: through the dispatcher, so it runs eagerly on the
// tensors' device, is recorded by a trace, and logged by KILN_SHOW_DISPATCH_TRACE like a
// built-in. kiln::Error naming an unknown op.
std::vector<Tensor> call_op(std::string_view name, std::span<const Tensor> inputs, const Attrs& attrs = {});

}  // namespace kiln
