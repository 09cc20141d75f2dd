// Shape-and-dtype rules of views and shape ops. Views keep PyTorch's strides (a transpose
// is a strided view, expand has stride 0), so the reference interpreter shares storage
// exactly as PyTorch does and later stages can fold views into index arithmetic.
#include <algorithm>

#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

Shape infer_reshape(const Shape& from, const IntList& to) {
  int64_t known = 1, infer_at = -1;
  bool overflow = false, has_zero = false;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      if (infer_at >= 0) fail("only one dimension can be -1 in shape {}", shape_str(to));
      infer_at = static_cast<int64_t>(i);
    } else if (to[i] < 0) {
      fail("invalid size {} in shape {}", to[i], shape_str(to));
    } else {
      has_zero |= to[i] == 0;
      overflow |= __builtin_mul_overflow(known, to[i], &known);  // (found under UBSan)
    }
  }
  if (has_zero) known = 0;
  else if (overflow) fail("shape {} has more than 2^63 elements", shape_str(to));
  int64_t total = numel(from);
  Shape out(to.begin(), to.end());
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      fail("shape {} is invalid for an input of {} elements", shape_str(to), total);
    out[infer_at] = total / known;
  } else if (known != total) {
    fail("shape {} is invalid for an input of {} elements (shape {})", shape_str(to), total, shape_str(from));
  }
  return out;
}

std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape) {
  // PyTorch's at::detail::computeStride: walk chunks of old dims that are contiguous with
  // each other and match them against runs of new dims with the same element count.
  if (old_shape.empty()) return Strides(shape.size(), 1);
  int64_t n = numel(old_shape);
  if (n == 0) return old_shape == shape ? std::optional<Strides>(old_strides) : std::optional<Strides>(contiguous_strides(shape));
  Strides out(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Metas meta_reshape(In in, const Attrs& a) {
  Shape s = infer_reshape(in[0].shape, a.get_ints("shape"));
  if (auto st = view_strides(in[0].shape, in[0].strides, s)) return {TensorMeta(in[0].dtype, s, *st, in[0].device)};
  return {TensorMeta(in[0].dtype, s, in[0].device)};  // not viewable: reshape copies
}

Metas meta_permute(In in, const Attrs& a) {
  IntList dims = a.get_ints("dims");
  if (static_cast<int64_t>(dims.size()) != in[0].rank())
    fail("dims {} must list each of the input's {} dims once", shape_str(dims), in[0].rank());
  std::vector<bool> seen(dims.size(), false);
  Shape s;
  Strides st;
  for (int64_t d : dims) {
    int64_t n = normalize_dim(d, in[0].rank());
    if (seen[n]) fail("dim {} repeats in permutation {}", n, shape_str(dims));
    seen[n] = true;
    s.push_back(in[0].shape[n]);
    st.push_back(in[0].strides[n]);
  }
  return {TensorMeta(in[0].dtype, s, st, in[0].device)};
}

Metas meta_transpose(In in, const Attrs& a) {
  TensorMeta m = in[0];
  if (m.rank() == 0) return {m};
  int64_t d0 = normalize_dim(a.get_int("dim0"), m.rank(), "dim0");
  int64_t d1 = normalize_dim(a.get_int("dim1"), m.rank(), "dim1");
  std::swap(m.shape[d0], m.shape[d1]);
  std::swap(m.strides[d0], m.strides[d1]);
  return {m};
}

Metas meta_expand(In in, const Attrs& a) {
  IntList size = a.get_ints("size");
  const TensorMeta& t = in[0];
  if (static_cast<int64_t>(size.size()) < t.rank())
    fail("the expanded size {} has fewer dims than the input {}", shape_str(size), shape_str(t.shape));
  size_t lead = size.size() - t.shape.size();
  Shape s(size.size());
  Strides st(size.size());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) fail("size -1 is not allowed in a new leading dim (dim {})", i);
      s[i] = size[i];
      st[i] = 0;
      continue;
    }
    int64_t have = t.shape[i - lead];
    int64_t want = size[i] == -1 ? have : size[i];
    if (want < 0) fail("invalid size {} at dim {}", size[i], i);
    if (have != want && have != 1)
      fail("cannot expand {} to {}: dim {} has size {}, which is not 1", shape_str(t.shape), shape_str(size), i, have);
    s[i] = want;
    st[i] = have == want ? t.strides[i - lead] : 0;
  }
  return {TensorMeta(t.dtype, s, st, t.device)};
}

Metas meta_squeeze(In in, const Attrs& a) {
  const TensorMeta& t = in[0];
  std::vector<bool> drop(t.shape.size(), false);
  if (auto dims = a.opt_ints("dim")) {
    for (int64_t d : *dims) {
      int64_t n = normalize_dim(d, t.rank());
      if (t.rank() > 0 && t.shape[n] == 1) drop[n] = true;  // PyTorch leaves dims of size != 1
    }
  } else {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = t.shape[i] == 1;
  }
  Shape s;
  Strides st;
  for (size_t i = 0; i < drop.size(); ++i)
    if (!drop[i]) { s.push_back(t.shape[i]); st.push_back(t.strides[i]); }
  return {TensorMeta(t.dtype, s, st, t.device)};
}

Metas meta_unsqueeze(In in, const Attrs& a) {
  const TensorMeta& t = in[0];
  int64_t d = normalize_dim(a.get_int("dim"), t.rank() + 1);
  Shape s = t.shape;
  Strides st = t.strides;
  int64_t stride = d < t.rank() ? t.shape[d] * t.strides[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return {TensorMeta(t.dtype, s, st, t.device)};
}

Metas meta_slice(In in, const Attrs& a) {
  const TensorMeta& t = in[0];
  if (t.rank() == 0) fail("slice() cannot be applied to a 0-dim tensor");
  int64_t d = normalize_dim(a.get_int("dim"), t.rank());
  int64_t step = a.get_int("step");
  if (step <= 0) fail("slice step must be positive, got {}", step);
  int64_t n = t.shape[d];
  auto clampi = [n](int64_t v) {  // Python slice semantics: negatives count from the end
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  int64_t start = clampi(a.opt_int("start").value_or(0));
  int64_t end = clampi(a.opt_int("end").value_or(n));
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  TensorMeta m = t;
  m.shape[d] = len;
  m.strides[d] = t.strides[d] * step;
  return {m};
}

Metas meta_cat(In in, const Attrs& a) {
  if (in.empty()) fail("cat needs at least one tensor");
  // As in PyTorch, 1-d empty tensors are skipped when checking shapes.
  const TensorMeta* ref = nullptr;
  for (auto& m : in)
    if (!(m.rank() == 1 && m.shape[0] == 0)) { ref = &m; break; }
  if (!ref) ref = &in[0];
  if (ref->rank() == 0) fail("zero-dimensional tensors cannot be concatenated");
  int64_t d = normalize_dim(a.get_int("dim"), ref->rank());
  Shape s = ref->shape;
  s[d] = 0;
  DType dt = in[0].dtype;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorMeta& m = in[i];
    dt = promote_types(dt, m.dtype);
    if (m.rank() == 1 && m.shape[0] == 0) continue;
    if (m.rank() != ref->rank())
      fail("tensor {} has rank {} but tensor 0 has rank {} ({} vs {})", i, m.rank(), ref->rank(), m.str(), ref->str());
    for (int64_t k = 0; k < m.rank(); ++k)
      if (k != d && m.shape[k] != ref->shape[k])
        fail("sizes must match except in dim {}: tensor {} is {}, tensor 0 is {}", d, i, shape_str(m.shape), shape_str(ref->shape));
    s[d] += m.shape[d];
  }
  return {TensorMeta(dt, s, in[0].device)};
}

Metas meta_split(In in, const Attrs& a) {
  const TensorMeta& t = in[0];
  if (t.rank() == 0) fail("split() cannot be applied to a 0-dim tensor");
  int64_t d = normalize_dim(a.get_int("dim"), t.rank());
  auto size = a.opt_int("split_size");
  auto sizes = a.opt_ints("split_sizes");
  if (size.has_value() == sizes.has_value()) fail("give exactly one of split_size and split_sizes");
  // One result per part: a split into millions of values is a mistake (found by libFuzzer: a
  // split of f16[62777777777777] into parts of 1 tried to build 6e13 results).
  constexpr int64_t kMaxParts = int64_t{1} << 16;
  IntList parts;
  if (size) {
    if (*size <= 0 && t.shape[d] > 0) fail("split_size must be positive, got {}", *size);
    if (*size > 0 && t.shape[d] / *size >= kMaxParts)
      fail("split of dim {} (size {}) into parts of {} would make more than {} results", d, t.shape[d], *size, kMaxParts);
    if (t.shape[d] == 0) parts.push_back(0);
    for (int64_t at = 0; at < t.shape[d]; at += *size) {
      parts.push_back(std::min(*size, t.shape[d] - at));
      if (*size >= t.shape[d] - at) break;  // the last part (and no overflow of `at`)
    }
  } else {
    int64_t total = 0;
    for (int64_t p : *sizes) {
      if (p < 0) fail("split_sizes {} has a negative entry", shape_str(*sizes));
      if (p > t.shape[d] - total) fail("split_sizes {} add up to more than dim {}'s size {}", shape_str(*sizes), d, t.shape[d]);
      total += p;
    }
    if (total != t.shape[d])
      fail("split_sizes {} add up to {}, but dim {} has size {}", shape_str(*sizes), total, d, t.shape[d]);
    parts = *sizes;
  }
  Metas out;
  for (int64_t p : parts) {
    TensorMeta m = t;
    m.shape[d] = p;
    out.push_back(m);
  }
  return out;
}

Metas meta_contiguous(In in, const Attrs&) { return {in[0].contiguous()}; }

}  // namespace kiln::meta
