// Reference kernels of sort and topk (ir/ops.def): each row along `dim` ordered by a stable
// sort, NaN above every number (PyTorch's order), descending by the reversed comparison of
// values with the indices of equal ones still increasing; topk is the first k of the row
// sorted descending (largest) or ascending.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/reference/kernels.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

// `a` before `b` in ascending order: numbers by value, NaN after every number.
template <class K>
bool less_key(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <class K>
std::vector<HostTensor> sort_rows(const HostTensor& x, int64_t dim, bool descending, int64_t k, Outs outs) {
  const Shape& shape = x.shape();
  const int64_t n = x.rank() == 0 ? 1 : shape[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t outer = n == 0 || inner == 0 ? 0 : x.numel() / (n * inner);
  HostTensor values = HostTensor::empty(outs[0]), indices = HostTensor::empty(outs[1]);
  std::vector<K> key(static_cast<size_t>(n));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = (o * n + j) * inner + i;
        if constexpr (std::is_floating_point_v<K>) key[static_cast<size_t>(j)] = x.get(at);
        else key[static_cast<size_t>(j)] = x.get_int(at);
      }
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const K ka = key[static_cast<size_t>(a)], kb = key[static_cast<size_t>(b)];
        return descending ? less_key(kb, ka) : less_key(ka, kb);
      });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + i, from = order[static_cast<size_t>(j)];
        if constexpr (std::is_floating_point_v<K>) values.set(at, key[static_cast<size_t>(from)]);
        else values.set_int(at, key[static_cast<size_t>(from)]);
        indices.set_int(at, from);
      }
    }
  return {values, indices};
}

std::vector<HostTensor> sorted(const HostTensor& x, int64_t dim_attr, bool descending, int64_t k, Outs outs) {
  const int64_t dim = normalize_dim(dim_attr, std::max<int64_t>(x.rank(), 1));
  if (is_floating(x.dtype())) return sort_rows<double>(x, dim, descending, k, outs);
  return sort_rows<int64_t>(x, dim, descending, k, outs);
}

std::vector<HostTensor> sort(Ins in, const Attrs& a, Outs outs) {
  const int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(in[0].rank(), 1));
  const int64_t n = in[0].rank() == 0 ? 1 : in[0].shape()[static_cast<size_t>(dim)];
  return sorted(in[0], dim, a.get_bool("descending"), n, outs);
}

std::vector<HostTensor> topk(Ins in, const Attrs& a, Outs outs) {
  return sorted(in[0], a.get_int("dim"), a.get_bool("largest"), a.get_int("k"), outs);
}

}  // namespace

void install_sort(const Setter& set) {
  set(Op::Sort, sort);
  set(Op::Topk, topk);
}

}  // namespace kiln::reference
