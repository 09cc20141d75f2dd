// Reference kernels of views and shape ops. Views are real views, sharing storage with their
// input exactly as in PyTorch: the output meta's strides come from the shape rules
// (ir/meta/meta_view.cpp), so a kernel only has to find the element offset. reshape,
// contiguous and cat copy where PyTorch copies.
#include <algorithm>

#include "ir/error.h"
#include "ir/meta/meta.h"
#include "ir/reference/kernels.h"
#include "ir/reference/util.h"

namespace kiln::reference {

namespace {

using Ins = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

// Copies one element, exactly for integer-to-integer copies (i64 values beyond 2^53 would
// not survive a trip through double).
void copy_element(HostTensor& dst, int64_t di, const HostTensor& src, int64_t si) {
  if (is_floating(dst.dtype()) || is_floating(src.dtype())) dst.set(di, src.get(si));
  else dst.set_int(di, src.get_int(si));
}

// Kernels whose output is the input's storage seen through the inferred meta, at the
// input's own offset (permute, transpose, expand, squeeze, unsqueeze only re-stride).
std::vector<HostTensor> same_offset_view(Ins in, const Attrs&, Outs outs) {
  return {in[0].view(outs[0], in[0].offset())};
}

std::vector<HostTensor> slice(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& t = in[0];
  int64_t d = normalize_dim(a.get_int("dim"), t.rank());
  int64_t n = t.shape()[d];
  // Python's clamping, as in meta_slice; an empty slice starts at the clamped start.
  int64_t start = a.opt_int("start").value_or(0);
  if (start < 0) start += n;
  start = std::clamp<int64_t>(start, 0, n);
  return {t.view(outs[0], t.offset() + start * t.strides()[d])};
}

std::vector<HostTensor> split(Ins in, const Attrs& a, Outs outs) {
  const HostTensor& t = in[0];
  int64_t d = normalize_dim(a.get_int("dim"), t.rank());
  std::vector<HostTensor> pieces;
  int64_t at = 0;  // where the next piece starts along dim d
  for (const TensorMeta& m : outs) {
    pieces.push_back(t.view(m, t.offset() + at * t.strides()[d]));
    at += m.shape[d];
  }
  return pieces;
}

std::vector<HostTensor> reshape(Ins in, const Attrs&, Outs outs) {
  const HostTensor& t = in[0];
  // The shape rule already decided: a view exactly when PyTorch's computeStride succeeds.
  if (meta::view_strides(t.shape(), t.strides(), outs[0].shape)) return {t.view(outs[0], t.offset())};
  // Not viewable (so not contiguous): a row-major copy has the same logical order.
  return {t.contiguous().view(outs[0], 0)};
}

std::vector<HostTensor> contiguous(Ins in, const Attrs&, Outs) { return {in[0].contiguous()}; }

std::vector<HostTensor> cat(Ins in, const Attrs& a, Outs outs) {
  HostTensor out = HostTensor::empty(outs[0]);
  const Shape& shape = outs[0].shape;
  int64_t d = normalize_dim(a.get_int("dim"), outs[0].rank());
  int64_t at = 0;  // offset of the current input along dim d
  for (const HostTensor& t : in) {
    if (t.rank() == 1 && t.shape()[0] == 0) continue;  // skipped, as PyTorch does
    for (int64_t i = 0; i < t.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, t.shape());
      idx[d] += at;
      copy_element(out, ravel(idx, shape), t, i);
    }
    at += t.shape()[d];
  }
  return {out};
}

}  // namespace

void install_views(const Setter& set) {
  for (Op op : {Op::Permute, Op::Transpose, Op::Expand, Op::Squeeze, Op::Unsqueeze}) set(op, same_offset_view);
  set(Op::Slice, slice);
  set(Op::Split, split);
  set(Op::Reshape, reshape);
  set(Op::Contiguous, contiguous);
  set(Op::Cat, cat);
}

}  // namespace kiln::reference
