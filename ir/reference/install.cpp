// Hands every built-in op's reference kernel to the op table.
#include "ir/error.h"
#include "ir/reference/kernels.h"
#include "ir/reference/reference.h"

namespace kiln {

void install_reference_kernels(const std::function<void(Op, ReferenceFn)>& set) {
  reference::install_pointwise(set);
  reference::install_reductions(set);
  reference::install_views(set);
  reference::install_creation(set);
  reference::install_linalg(set);
  reference::install_composites(set);
  reference::install_collectives(set);
  reference::install_attention(set);
  reference::install_conv(set);
  reference::install_norms(set);
  reference::install_sort(set);
}

std::vector<HostTensor> run_reference(Op op, std::span<const HostTensor> inputs, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  std::vector<TensorMeta> metas;
  for (auto& t : inputs) metas.push_back(t.meta());
  Attrs full = complete_attrs(info, attrs, inputs.size());
  std::vector<TensorMeta> outs = infer_meta(info, metas, full);
  if (!info.reference) fail("op '{}' has no reference kernel", info.name);
  try {
    return info.reference(inputs, full, outs);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", info.name, e.what()));
  }
}

}  // namespace kiln
