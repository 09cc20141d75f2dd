#include "frontend/cpu_kernel.h"

#include "ir/reference/reference.h"

namespace kiln {

std::vector<Tensor> cpu_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  std::vector<HostTensor> args;
  args.reserve(inputs.size());
  for (const Tensor& t : inputs) args.push_back(t.data());
  std::vector<Tensor> out;
  for (HostTensor& r : run_reference(op, args, attrs)) out.emplace_back(std::move(r));
  return out;
}

}  // namespace kiln
