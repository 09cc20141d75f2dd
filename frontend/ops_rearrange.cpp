// pad, flip, roll, tile / repeat, index_select, one_hot, cumsum and cumprod (frontend/ops.h):
// composites of the table's slices, cats, gathers, views and pointwise ops, so each is traced,
// compiled and differentiated through those.
#include <fmt/format.h>

#include <algorithm>

#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {

namespace {

int64_t dim_of(const Tensor& x, int64_t dim, const char* fn) {
  const int64_t r = x.dim();
  if (dim < -std::max<int64_t>(r, 1) || dim >= std::max<int64_t>(r, 1)) fail("{}: dim {} is out of range for a tensor of rank {}", fn, dim, r);
  return dim < 0 ? dim + r : dim;
}

// A new tensor on x's device (a traced one is device-neutral: it goes where the graph runs).
Tensor beside(const Tensor& made, const Tensor& x) { return made.is_traced() ? made : made.to(x.device()); }

// x's slices along `dim` at constant `indices` (each in [0, size)).
Tensor take(const Tensor& x, int64_t dim, const std::vector<int64_t>& indices) {
  return index_select(x, dim, beside(tensor_of_ints(indices, {static_cast<int64_t>(indices.size())}), x));
}

// A tensor like x's with `n` slices along dim, every element `value`.
Tensor filler(const Tensor& x, int64_t dim, int64_t n, double value) {
  Shape s = x.shape();
  s[static_cast<size_t>(dim)] = n;
  return beside(full(s, value, x.dtype()), x);
}

// The inclusive scan of x along dim by `step` (add or mul), in ceil(log2 n) rounds (Hillis and
// Steele): round k combines each element with the one 2^k before it, `identity` before the start.
// Exact for integers; for floats its rounding differs from a running sum's by O(log n) ulps.
template <class Step>
Tensor scan(const Tensor& x, int64_t dim, double identity, Step step) {
  const int64_t n = x.size(dim);
  Tensor y = x;
  for (int64_t s = 1; s < n; s *= 2) y = step(y, cat({filler(y, dim, s, identity), slice(y, dim, 0, n - s)}, dim));
  return y;
}

DType scan_dtype(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_floating(x.dtype()) ? x.dtype() : DType::I64;  // PyTorch: integers and bool scan in int64
}

}  // namespace

Tensor pad(const Tensor& self, const IntList& pad, const std::string& mode, double value) {
  const int64_t r = self.dim();
  if (pad.size() % 2 != 0) fail("pad: the padding holds pairs (before, after) per dim from the last, got {} values", pad.size());
  if (static_cast<int64_t>(pad.size()) > 2 * r) fail("pad: {} values pad {} dims of a tensor of rank {}", pad.size(), pad.size() / 2, r);
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    fail("pad: mode '{}' is not one of constant, reflect, replicate, circular", mode);
  if (mode != "constant" && value != 0) fail("pad: a value applies to mode 'constant' only, not '{}'", mode);
  Tensor y = self;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t dim = r - 1 - static_cast<int64_t>(i);
    int64_t before = pad[2 * i], after = pad[2 * i + 1];
    const int64_t n = y.size(dim);
    // Negative padding crops, in every mode.
    if (before < 0 || after < 0) {
      const int64_t from = std::max<int64_t>(-before, 0), to = n - std::max<int64_t>(-after, 0);
      if (from > to) fail("pad: cropping {} and {} from a dim of {}", std::max<int64_t>(-before, 0), std::max<int64_t>(-after, 0), n);
      y = slice(y, dim, from, to);
      before = std::max<int64_t>(before, 0), after = std::max<int64_t>(after, 0);
    }
    if (before == 0 && after == 0) continue;
    const int64_t m = y.size(dim);
    if (mode == "constant") {
      std::vector<Tensor> parts;
      if (before) parts.push_back(filler(y, dim, before, value));
      parts.push_back(y);
      if (after) parts.push_back(filler(y, dim, after, value));
      y = cat(parts, dim);
      continue;
    }
    if (m == 0) fail("pad: {} padding of dim {}, which is empty", mode, dim);
    if (mode == "reflect" && (before >= m || after >= m))
      fail("pad: reflect padding of {} and {} on dim {} of size {} (each must be below the size)", before, after, dim, m);
    if (mode == "circular" && (before > m || after > m))
      fail("pad: circular padding of {} and {} on dim {} of size {} (each at most the size)", before, after, dim, m);
    std::vector<int64_t> idx;
    for (int64_t k = -before; k < m + after; ++k) {
      if (mode == "replicate") idx.push_back(std::clamp<int64_t>(k, 0, m - 1));
      else if (mode == "circular") idx.push_back((k % m + m) % m);
      else idx.push_back(k < 0 ? -k : k >= m ? 2 * (m - 1) - k : k);
    }
    y = take(y, dim, idx);
  }
  return y;
}

Tensor flip(const Tensor& self, const IntList& dims) {
  Tensor y = self;
  std::vector<int64_t> seen;
  for (int64_t d : dims) {
    const int64_t dim = dim_of(self, d, "flip");
    if (std::find(seen.begin(), seen.end(), dim) != seen.end()) fail("flip: dim {} appears more than once in {}", dim, shape_str(dims));
    seen.push_back(dim);
    const int64_t n = y.size(dim);
    if (n < 2) continue;
    std::vector<int64_t> idx;
    for (int64_t k = n - 1; k >= 0; --k) idx.push_back(k);
    y = take(y, dim, idx);
  }
  return y;
}

Tensor roll(const Tensor& self, const IntList& shifts, const IntList& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1) fail("roll: with no dims, one shift (of the flattened tensor), got {}", shifts.size());
    return reshape(roll(reshape(self, {self.numel()}), shifts, {0}), self.shape());
  }
  if (shifts.size() != dims.size()) fail("roll: {} shifts for {} dims", shifts.size(), dims.size());
  Tensor y = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = dim_of(self, dims[i], "roll"), n = y.size(dim);
    if (n == 0) continue;
    const int64_t s = (shifts[i] % n + n) % n;
    if (s == 0) continue;
    y = cat({slice(y, dim, n - s, n), slice(y, dim, 0, n - s)}, dim);
  }
  return y;
}

Tensor tile(const Tensor& self, const IntList& reps) {
  IntList r = reps;
  while (static_cast<int64_t>(r.size()) < self.dim()) r.insert(r.begin(), 1);
  return repeat(self, r);
}

Tensor repeat(const Tensor& self, const IntList& repeats) {
  if (static_cast<int64_t>(repeats.size()) < self.dim())
    fail("repeat: {} repeats for a tensor of rank {} (at least one per dim)", repeats.size(), self.dim());
  Shape s = self.shape();
  s.insert(s.begin(), repeats.size() - s.size(), 1);
  // x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], merged pairwise.
  Shape inter, expanded, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (repeats[i] < 0) fail("repeat: a negative repeat ({}) in {}", repeats[i], shape_str(repeats));
    inter.insert(inter.end(), {1, s[i]});
    expanded.insert(expanded.end(), {repeats[i], s[i]});
    out.push_back(repeats[i] * s[i]);
  }
  return reshape(contiguous(expand(reshape(self, inter), expanded)), out);
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  if (index.dim() > 1) fail("index_select: the index is a vector (or a scalar), got rank {}", index.dim());
  if (index.dtype() != DType::I64 && index.dtype() != DType::I32) fail("index_select: an i64 or i32 index, got {}", dtype_name(index.dtype()));
  if (self.dim() == 0) fail("index_select: a tensor of rank 0 has no dim to select from");
  const int64_t d = dim_of(self, dim, "index_select");
  const int64_t n = index.numel();
  Shape along(static_cast<size_t>(self.dim()), 1), out = self.shape();
  along[static_cast<size_t>(d)] = out[static_cast<size_t>(d)] = n;
  return gather(self, d, expand(reshape(to(index, DType::I64), along), out));
}

Tensor one_hot(const Tensor& self, int64_t num_classes) {
  if (self.dtype() != DType::I64 && self.dtype() != DType::I32) fail("one_hot: an integer tensor of class indices, got {}", dtype_name(self.dtype()));
  if (num_classes < 1) fail("one_hot: num_classes must be given and positive, got {} (kiln does not read it from the values)", num_classes);
  Shape along(static_cast<size_t>(self.dim()) + 1, 1);
  along.back() = num_classes;
  Tensor classes = reshape(beside(arange(num_classes, DType::I64), self), along);
  return to(eq(unsqueeze(to(self, DType::I64), -1), classes), DType::I64);
}

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  const int64_t d = dim_of(self, dim, "cumsum");
  Tensor x = to(self, scan_dtype(self, dtype));
  if (x.dim() == 0) return x;
  return scan(x, d, 0, [](const Tensor& a, const Tensor& b) { return add(a, b); });
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  const int64_t d = dim_of(self, dim, "cumprod");
  Tensor x = to(self, scan_dtype(self, dtype));
  if (x.dim() == 0) return x;
  return scan(x, d, 1, [](const Tensor& a, const Tensor& b) { return mul(a, b); });
}

namespace {

// Advanced indexing on the leading dims, flattened: self as [L, R] (L the indexed dims' sizes'
// product), and per element of the broadcast indices [S] its row, a [N, R] index for a gather or
// scatter along dim 0. A position out of range of its dim becomes L, which that op reports.
struct FlatIndex {
  Shape indexed;   // S
  Shape rest;      // self.shape[k:]
  int64_t L = 1, R = 1;
  Tensor rows;     // [N, R], i64
};

FlatIndex flat_index(const Tensor& self, const std::vector<Tensor>& indices, const char* what) {
  if (indices.empty()) fail("{}: no index tensors", what);
  if (static_cast<int64_t>(indices.size()) > self.dim())
    fail("{}: {} index tensors for a tensor of rank {}", what, indices.size(), self.dim());
  FlatIndex f;
  for (size_t d = 0; d < indices.size(); ++d) {
    const Tensor& i = indices[d];
    if (i.dtype() == DType::Bool)
      fail("{}: index {} is a bool mask, whose result's shape depends on its values (kiln's graphs have static shapes): "
           "use where(mask, values, self) to write, or an integer index",
           what, d);
    if (i.dtype() != DType::I64 && i.dtype() != DType::I32) fail("{}: index {} must be i64 or i32, got {}", what, d, dtype_name(i.dtype()));
    f.indexed = d == 0 ? i.shape() : broadcast_shapes(f.indexed, i.shape());
  }
  for (int64_t d = static_cast<int64_t>(indices.size()); d < self.dim(); ++d) {
    f.rest.push_back(self.size(d));
    f.R *= self.size(d);
  }
  Tensor pos, bad;
  for (size_t d = indices.size(); d-- > 0;) {
    const int64_t n = self.size(static_cast<int64_t>(d));
    Tensor i = to(indices[d], DType::I64);
    i = where(lt(i, 0), add(i, n), i);
    Tensor out = logical_or(lt(i, 0), ge(i, n));
    Tensor term = mul(i, f.L);
    pos = pos.defined() ? add(pos, term) : term;
    bad = bad.defined() ? logical_or(bad, out) : out;
    f.L *= n;
  }
  pos = expand(where(bad, f.L, pos), f.indexed);
  const int64_t N = numel(f.indexed);
  f.rows = expand(reshape(pos, {N, 1}), {N, f.R});
  return f;
}

Shape joined(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

}  // namespace

Tensor index(const Tensor& self, const std::vector<Tensor>& indices) {
  FlatIndex f = flat_index(self, indices, "index");
  Tensor taken = gather(reshape(self, {f.L, f.R}), 0, f.rows);
  return reshape(taken, joined(f.indexed, f.rest));
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const char* what = accumulate ? "index_put (accumulate)" : "index_put";
  FlatIndex f = flat_index(self, indices, what);
  if (values.dtype() != self.dtype())
    fail("{}: values of dtype {} into a tensor of {} (PyTorch's index_put wants them equal)", what, dtype_name(values.dtype()),
         dtype_name(self.dtype()));
  const Shape target = joined(f.indexed, f.rest);
  if (broadcast_shapes(values.shape(), target) != target)
    fail("{}: values of shape {} do not broadcast to the indexed shape {}", what, shape_str(values.shape()), shape_str(target));
  Tensor v = reshape(expand(values, target), {f.rows.size(0), f.R});
  Tensor flat = reshape(self, {f.L, f.R});
  Tensor out = accumulate ? scatter_add(flat, 0, f.rows, v) : scatter(flat, 0, f.rows, v);
  return reshape(out, self.shape());
}

}  // namespace kiln
