// Shape rules of sort and topk (ir/ops.def): values of the input's dtype and int64 indices,
// the sorted dim kept (sort) or cut to k (topk).
#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

namespace {
Metas values_and_indices(const TensorMeta& self, int64_t dim, int64_t size) {
  Shape shape = self.shape;
  if (!shape.empty()) shape[static_cast<size_t>(dim)] = size;
  return {TensorMeta(self.dtype, shape, self.device), TensorMeta(DType::I64, shape, self.device)};
}
}  // namespace

Metas meta_sort(In in, const Attrs& a) {
  const TensorMeta& self = in[0];
  const int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  return values_and_indices(self, dim, self.rank() == 0 ? 1 : self.shape[static_cast<size_t>(dim)]);
}

Metas meta_topk(In in, const Attrs& a) {
  const TensorMeta& self = in[0];
  const int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  const int64_t size = self.rank() == 0 ? 1 : self.shape[static_cast<size_t>(dim)];
  const int64_t k = a.get_int("k");
  if (k < 0 || k > size) fail("k {} is out of range for dim {} of size {}", k, dim, size);
  return values_and_indices(self, dim, k);
}

}  // namespace kiln::meta
