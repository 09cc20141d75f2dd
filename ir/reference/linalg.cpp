// Reference kernels of matrix products. Sums accumulate in double (int64 for integer
// tensors, so integer matmul is exact) and are rounded once, after bias and scaling, into the
// result dtype.
#include <cmath>
#include <type_traits>
#include <variant>

#include "ir/einsum.h"
#include "ir/error.h"
#include "ir/reference/kernels.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

template <typename T>
T load(const HostTensor& t, int64_t i) {
  if constexpr (std::is_same_v<T, double>) return t.get(i);
  else return t.get_int(i);
}

template <typename T>
void store(HostTensor& t, int64_t i, T v) {
  if constexpr (std::is_same_v<T, double>) t.set(i, v);
  else t.set_int(i, v);
}

// torch.matmul of a and b in every case (1-d operands, broadcast batch dims) as a row-major
// list of the result's elements. A 1-d operand is read as a [1,k] or [k,1] matrix: adding a
// size-1 dim leaves every element's logical index unchanged, so no reshape is needed.
template <typename T>
std::vector<T> matmul_values(const HostTensor& a, const HostTensor& b) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b);
  BroadcastIndexer bia(batch_a, batch), bib(batch_b, batch);
  int64_t batches = numel(batch);
  std::vector<T> out(static_cast<size_t>(batches * m * n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t base_a = bia(bi) * m * k, base_b = bib(bi) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += load<T>(a, base_a + i * k + p) * load<T>(b, base_b + p * n + j);
        out[(bi * m + i) * n + j] = acc;
      }
  }
  return out;
}

// A Scalar attribute (beta, alpha) in the accumulation type. For integer tensors PyTorch's
// addmm converts a float scalar to the integer type, truncating (beta=1.5 acts as 1).
template <typename T>
T scalar_attr(const Attrs& a, const std::string& name) {
  const AttrValue& v = *a.find(name);
  if constexpr (std::is_same_v<T, double>) return a.get_float(name);
  else if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  else return static_cast<int64_t>(a.get_float(name));
}

// out = alpha * (a @ b) + beta * self, where `self` (if given) broadcasts to the result; a zero
// beta skips self altogether, so nan and inf in it do not propagate (PyTorch's addmm).
template <typename T>
HostTensor product(const HostTensor& a, const HostTensor& b, const HostTensor* self, T beta, T alpha,
                   const TensorMeta& meta) {
  std::vector<T> prod = matmul_values<T>(a, b);
  HostTensor out = HostTensor::empty(meta);
  bool add_self = self && beta != T(0);
  BroadcastIndexer self_index(self ? self->shape() : Shape{}, meta.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    T v = alpha * prod[i];
    if (add_self) v += beta * load<T>(*self, self_index(i));
    store<T>(out, i, v);
  }
  return out;
}

// Dispatches `product` on the accumulation type of the result dtype.
HostTensor product_for(const HostTensor& a, const HostTensor& b, const HostTensor* self, const Attrs* scales,
                       const TensorMeta& meta) {
  if (is_floating(meta.dtype)) {
    double beta = scales ? scalar_attr<double>(*scales, "beta") : 1, alpha = scales ? scalar_attr<double>(*scales, "alpha") : 1;
    return product<double>(a, b, self, beta, alpha, meta);
  }
  int64_t beta = scales ? scalar_attr<int64_t>(*scales, "beta") : 1, alpha = scales ? scalar_attr<int64_t>(*scales, "alpha") : 1;
  return product<int64_t>(a, b, self, beta, alpha, meta);
}

std::vector<HostTensor> matmul(Ins in, const Attrs&, Outs outs) {
  return {product_for(in[0], in[1], nullptr, nullptr, outs[0])};
}

std::vector<HostTensor> linear(Ins in, const Attrs&, Outs outs) {
  const HostTensor& w = in[1];
  // weight [out, in] is used as weight^T, a strided view; a 1-d weight is already a column.
  HostTensor wt = w.rank() == 2 ? w.view(TensorMeta(w.dtype(), {w.shape()[1], w.shape()[0]},
                                                    {w.strides()[1], w.strides()[0]}, w.meta().device),
                                         w.offset())
                                : w;
  return {product_for(in[0], wt, in.size() > 2 ? &in[2] : nullptr, nullptr, outs[0])};
}

std::vector<HostTensor> addmm(Ins in, const Attrs& a, Outs outs) {
  return {product_for(in[1], in[2], &in[0], &a, outs[0])};
}

// The multi-index of `index`'s element i, and with `dim` replaced by the index value checked
// against `size` (the extent of the tensor indexed into).
int64_t indexed_offset(const HostTensor& index, int64_t i, int64_t dim, const Shape& target, std::vector<int64_t>& pos) {
  pos = unravel(i, index.shape());
  if (pos.empty()) pos.push_back(0);  // 0-d acts as 1-d
  int64_t v = index.get_int(i);
  int64_t size = target.empty() ? 1 : target[dim];
  if (v < -size || v >= size) fail("index {} is out of range for dim {} of size {}", v, dim, size);
  pos[dim] = v < 0 ? v + size : v;
  return target.empty() ? 0 : ravel(pos, target);
}

std::vector<HostTensor> gather(Ins in, const Attrs& a, Outs outs) {
  const HostTensor &self = in[0], &index = in[1];
  int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  HostTensor out = HostTensor::empty(outs[0]);
  bool exact = !is_floating(self.dtype());
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t from = indexed_offset(index, i, dim, self.shape(), pos);
    if (exact) out.set_int(i, self.get_int(from));
    else out.set(i, self.get(from));
  }
  return {out};
}

// Accumulates in double (int64 for integers) per destination element, in index order; or,
// for scatter, writes (the last write to a place stays).
template <bool Add>
std::vector<HostTensor> scatter_into(Ins in, const Attrs& a, Outs outs) {
  const HostTensor &self = in[0], &index = in[1], &src = in[2];
  int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  bool exact = !is_floating(self.dtype());
  std::vector<double> acc(static_cast<size_t>(self.numel()));
  std::vector<int64_t> iacc(exact ? acc.size() : 0);
  for (int64_t i = 0; i < self.numel(); ++i) exact ? void(iacc[i] = self.get_int(i)) : void(acc[i] = self.get(i));
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t to = indexed_offset(index, i, dim, self.shape(), pos);
    std::vector<int64_t> src_pos = unravel(i, index.shape());
    int64_t from = src.rank() == 0 ? 0 : ravel(src_pos, src.shape());
    if (exact) iacc[to] = Add ? iacc[to] + src.get_int(from) : src.get_int(from);
    else acc[to] = Add ? acc[to] + src.get(from) : src.get(from);
  }
  HostTensor out = HostTensor::empty(outs[0]);
  for (int64_t i = 0; i < out.numel(); ++i) exact ? out.set_int(i, iacc[i]) : out.set(i, acc[i]);
  return {out};
}

// scatter_reduce and scatter_fold: per destination element, self's value (include_self) and the
// src elements index sends there, in index order, reduced in double (int64 for integers:
// products wrap as two's complement); amax/amin propagate NaN; mean divides by how many were
// reduced. An element nothing reached keeps self's.
std::vector<HostTensor> scatter_reduce(Ins in, const Attrs& a, Outs outs) {
  const HostTensor &self = in[0], &index = in[1], &src = in[2];
  const int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  const std::string& reduce = a.get_string("reduce");
  const bool include_self = !a.has("include_self") || a.get_bool("include_self");
  const bool exact = !is_floating(self.dtype());
  const size_t n = static_cast<size_t>(self.numel());
  std::vector<double> acc(n);
  std::vector<int64_t> iacc(exact ? n : 0), count(n, include_self ? 1 : 0);
  for (size_t i = 0; i < n; ++i) exact ? void(iacc[i] = self.get_int(static_cast<int64_t>(i))) : void(acc[i] = self.get(static_cast<int64_t>(i)));
  auto fold = [&](auto x, auto v) -> decltype(x) {
    using T = decltype(x);
    if (reduce == "sum" || reduce == "mean") {
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(v));
      else return x + v;
    }
    if (reduce == "prod") {
      if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(v));
      else return x * v;
    }
    if constexpr (std::is_same_v<T, double>)
      if (std::isnan(x) || std::isnan(v)) return std::isnan(x) ? x : v;
    return reduce == "amax" ? (v > x ? v : x) : (v < x ? v : x);
  };
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < index.numel(); ++i) {
    const size_t to = static_cast<size_t>(indexed_offset(index, i, dim, self.shape(), pos));
    const int64_t from = src.rank() == 0 ? 0 : ravel(unravel(i, index.shape()), src.shape());
    const bool first = count[to] == 0;  // the first element reduced here (self's left out)
    if (exact) iacc[to] = first ? src.get_int(from) : fold(iacc[to], src.get_int(from));
    else acc[to] = first ? src.get(from) : fold(acc[to], src.get(from));
    ++count[to];
  }
  HostTensor out = HostTensor::empty(outs[0]);
  for (size_t i = 0; i < n; ++i) {
    if (exact) out.set_int(static_cast<int64_t>(i), iacc[i]);
    else out.set(static_cast<int64_t>(i), reduce == "mean" && count[i] > 0 ? acc[i] / static_cast<double>(count[i]) : acc[i]);
  }
  return {out};
}

// einsum by its definition: every assignment of the labels' values, the product of the
// operands' elements it picks added to the result element it names.
template <typename T>
HostTensor einsum_of(Ins in, const EinsumSpec& spec, const std::vector<int64_t>& sizes, const TensorMeta& out_meta) {
  const size_t L = sizes.size();
  std::vector<T> acc(static_cast<size_t>(out_meta.numel()), T(0));
  int64_t total = 1;
  for (int64_t n : sizes) total *= n;
  // Per operand and per label: the step of the operand's linear (logical) index for one step of
  // the label (a diagonal adds its dims' steps; a broadcast size-1 dim steps by 0).
  auto steps_of = [&](const std::vector<int>& labels, const Shape& shape) {
    std::vector<int64_t> step(L, 0);
    int64_t stride = 1;
    for (size_t d = labels.size(); d-- > 0;) {
      if (shape[d] != 1) step[static_cast<size_t>(labels[d])] += stride;
      stride *= shape[d];
    }
    return step;
  };
  std::vector<std::vector<int64_t>> in_step;
  for (size_t i = 0; i < in.size(); ++i) in_step.push_back(steps_of(spec.inputs[i], in[i].shape()));
  const std::vector<int64_t> out_step = steps_of(spec.output, out_meta.shape);
  std::vector<int64_t> value(L, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t rest = k;
    for (size_t l = L; l-- > 0;) {
      value[l] = rest % sizes[l];
      rest /= sizes[l];
    }
    T prod = T(1);
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t at = 0;
      for (size_t l = 0; l < L; ++l) at += value[l] * in_step[i][l];
      prod *= load<T>(in[i], at);
    }
    int64_t at = 0;
    for (size_t l = 0; l < L; ++l) at += value[l] * out_step[l];
    acc[static_cast<size_t>(at)] += prod;
  }
  HostTensor out = HostTensor::empty(out_meta);
  for (int64_t i = 0; i < out.numel(); ++i) store<T>(out, i, acc[static_cast<size_t>(i)]);
  return out;
}

std::vector<HostTensor> einsum(Ins in, const Attrs& a, Outs outs) {
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (const HostTensor& t : in) {
    ranks.push_back(t.rank());
    shapes.push_back(t.shape());
  }
  const EinsumSpec spec = parse_einsum(a.get_string("equation"), ranks);
  const std::vector<int64_t> sizes = einsum_label_sizes(spec, shapes);
  if (is_floating(outs[0].dtype)) return {einsum_of<double>(in, spec, sizes, outs[0])};
  return {einsum_of<int64_t>(in, spec, sizes, outs[0])};
}

}  // namespace

void install_linalg(const Setter& set) {
  set(Op::Gather, gather);
  set(Op::ScatterAdd, scatter_into<true>);
  set(Op::Scatter, scatter_into<false>);
  set(Op::ScatterReduce, scatter_reduce);
  set(Op::ScatterFold, scatter_reduce);  // include_self absent: true
  set(Op::Matmul, matmul);
  set(Op::Bmm, matmul);  // bmm is matmul restricted (by its shape rule) to 3-d operands
  set(Op::Linear, linear);
  set(Op::Einsum, einsum);
  set(Op::Addmm, addmm);
}

}  // namespace kiln::reference
