// relayout (see host_layout.h).
#include "backend/host_layout.h"

#include <cstring>
#include <vector>

namespace kiln::backend {

HostTensor relayout(const HostTensor& t, const TensorMeta& meta, int64_t extent) {
  HostTensor flat = HostTensor::empty(meta.dtype, {extent});
  HostTensor src = t.contiguous();
  int64_t size = dtype_size(meta.dtype);
  const auto* from = static_cast<const std::byte*>(src.data());
  auto* to = static_cast<std::byte*>(flat.data());
  std::vector<int64_t> idx(meta.shape.size(), 0);
  for (int64_t i = 0; i < meta.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * meta.strides[d];
    std::memcpy(to + off * size, from + i * size, static_cast<size_t>(size));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < meta.shape[d]) break;
      idx[d] = 0;
    }
  }
  return flat;
}

}  // namespace kiln::backend
