#pragma once
// The check both interpreters (interpreter.cpp, group.cpp) make of a graph input: its tensor
// matches the declared dtype and shape, and comes back laid out with the declared strides
// (view kernels downstream compute their strides from the declared layout).
#include <string>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::reference {

// `who` prefixes the error ("input %x" or "rank 1, input %x").
inline HostTensor checked_input(const Node& param, const HostTensor& got, const std::string& who) {
  const TensorMeta& want = param.meta();
  if (!got.defined() || got.dtype() != want.dtype || got.shape() != want.shape)
    fail("{}: expected {}, got {}", who, TensorMeta(want.dtype, want.shape).str(),
         got.defined() ? TensorMeta(got.dtype(), got.shape()).str() : "an undefined tensor");
  return got.strides() == want.strides ? got : got.laid_out(want.strides, got.dtype());
}

}  // namespace kiln::reference
