// Shape-and-dtype rules of matrix products and of the composite ops built on them.
#include <algorithm>

#include "ir/error.h"
#include "ir/einsum.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

namespace {
void check_same_dtype(const TensorMeta& a, const TensorMeta& b, const char* what) {
  if (a.dtype != b.dtype)
    fail("{} needs operands of one dtype, got {} and {}", what, dtype_name(a.dtype), dtype_name(b.dtype));
  if (a.dtype == DType::Bool) fail("{} is not defined for bool tensors", what);
}
}  // namespace

Metas meta_matmul(In in, const Attrs&) {
  const TensorMeta &a = in[0], &b = in[1];
  check_same_dtype(a, b, "matmul");
  if (a.rank() == 0 || b.rank() == 0) fail("both arguments to matmul need at least 1 dimension");
  // 1-d operands are promoted to matrices and the added dim is removed afterwards.
  Shape sa = a.shape, sb = b.shape;
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), k2 = sb[sb.size() - 2], n = sb.back();
  if (k != k2)
    fail("shapes {} and {} cannot be multiplied ({}x{} and {}x{})", shape_str(a.shape), shape_str(b.shape), m, k, k2, n);
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  Shape out = broadcast_shapes(batch_a, batch_b);
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  return {TensorMeta(a.dtype, out, a.device)};
}

Metas meta_bmm(In in, const Attrs&) {
  const TensorMeta &a = in[0], &b = in[1];
  check_same_dtype(a, b, "bmm");
  if (a.rank() != 3 || b.rank() != 3) fail("bmm needs two 3-d tensors, got {} and {}", shape_str(a.shape), shape_str(b.shape));
  if (a.shape[0] != b.shape[0]) fail("batch sizes differ: {} and {}", a.shape[0], b.shape[0]);
  if (a.shape[2] != b.shape[1]) fail("shapes {} and {} cannot be multiplied", shape_str(a.shape), shape_str(b.shape));
  return {TensorMeta(a.dtype, Shape{a.shape[0], a.shape[1], b.shape[2]}, a.device)};
}

Metas meta_einsum(In in, const Attrs& a) {
  if (in.empty()) fail("einsum needs at least one operand");
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (const TensorMeta& m : in) {
    check_same_dtype(in[0], m, "einsum");
    ranks.push_back(m.rank());
    shapes.push_back(m.shape);
  }
  if (in[0].dtype == DType::Bool) fail("einsum of bool tensors (PyTorch has none): cast them to a number type first");
  const EinsumSpec spec = parse_einsum(a.get_string("equation"), ranks);
  const std::vector<int64_t> sizes = einsum_label_sizes(spec, shapes);
  Shape out;
  for (int l : spec.output) out.push_back(sizes[static_cast<size_t>(l)]);
  return {TensorMeta(in[0].dtype, out, in[0].device)};
}

Metas meta_linear(In in, const Attrs&) {
  const TensorMeta &x = in[0], &w = in[1];
  check_same_dtype(x, w, "linear");
  if (w.rank() != 2 && w.rank() != 1) fail("weight must be 2-d [out_features, in_features], got {}", shape_str(w.shape));
  if (x.rank() == 0) fail("input must have at least 1 dim");
  int64_t in_features = w.shape.back();
  if (x.shape.back() != in_features)
    fail("input's last dim {} does not match weight {} (in_features {})", x.shape.back(), shape_str(w.shape), in_features);
  Shape out(x.shape.begin(), x.shape.end() - 1);
  if (w.rank() == 2) out.push_back(w.shape[0]);
  if (in.size() > 2) {
    check_same_dtype(x, in[2], "linear");
    Shape b = broadcast_shapes(out, in[2].shape);
    if (b != out) fail("bias {} does not broadcast to the output {}", shape_str(in[2].shape), shape_str(out));
  }
  return {TensorMeta(x.dtype, out, x.device)};
}

Metas meta_addmm(In in, const Attrs&) {
  const TensorMeta &bias = in[0], &a = in[1], &b = in[2];
  check_same_dtype(a, b, "addmm");
  check_same_dtype(bias, a, "addmm");
  if (a.rank() != 2 || b.rank() != 2) fail("mat1 and mat2 must be 2-d, got {} and {}", shape_str(a.shape), shape_str(b.shape));
  if (a.shape[1] != b.shape[0]) fail("mat1 {} and mat2 {} cannot be multiplied", shape_str(a.shape), shape_str(b.shape));
  Shape out{a.shape[0], b.shape[1]};
  if (broadcast_shapes(out, bias.shape) != out)
    fail("self {} does not broadcast to the product's shape {}", shape_str(bias.shape), shape_str(out));
  return {TensorMeta(a.dtype, out, a.device)};
}

Metas meta_softmax(In in, const Attrs& a) {
  normalize_dim(a.get_int("dim"), in[0].rank());
  DType dt = a.opt_dtype("dtype").value_or(in[0].dtype);
  if (!is_floating(dt)) fail("softmax needs a floating-point input or dtype, got {}", dtype_name(dt));
  return {TensorMeta(dt, in[0].shape, in[0].device)};
}

Metas meta_layer_norm(In in, const Attrs& a) {
  const TensorMeta& x = in[0];
  IntList ns = a.get_ints("normalized_shape");
  if (ns.empty()) fail("normalized_shape must not be empty");
  if (!is_floating(x.dtype)) fail("layer_norm needs a floating-point input, got {}", dtype_name(x.dtype));
  if (static_cast<int64_t>(ns.size()) > x.rank() ||
      !std::equal(ns.begin(), ns.end(), x.shape.end() - static_cast<int64_t>(ns.size())))
    fail("normalized_shape {} must match the input's last dims (input {})", shape_str(ns), shape_str(x.shape));
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != Shape(ns.begin(), ns.end()))
      fail("{} has shape {} but normalized_shape is {}", i == 1 ? "weight" : "bias", shape_str(in[i].shape), shape_str(ns));
    if (in[i].dtype != x.dtype) fail("{} is {} but the input is {}", i == 1 ? "weight" : "bias", dtype_name(in[i].dtype), dtype_name(x.dtype));
  }
  return {TensorMeta(x.dtype, x.shape, x.device)};
}

Metas meta_embedding(In in, const Attrs&) {
  const TensorMeta &w = in[0], &idx = in[1];
  if (w.rank() != 2) fail("weight must be 2-d [num_embeddings, dim], got {}", shape_str(w.shape));
  if (!is_integral(idx.dtype)) fail("indices must be i64 or i32, got {}", dtype_name(idx.dtype));
  Shape out = idx.shape;
  out.push_back(w.shape[1]);
  return {TensorMeta(w.dtype, out, w.device)};
}

namespace {
Metas loss_meta(const TensorMeta& x, const TensorMeta& t, const std::string& reduction, const char* what) {
  if (!is_floating(x.dtype)) fail("{} input must be floating-point, got {}", what, dtype_name(x.dtype));
  if (!is_integral(t.dtype)) fail("target must hold class indices (i64 or i32), got {}", dtype_name(t.dtype));
  if (x.rank() == 1) {
    if (t.rank() != 0) fail("for an input of shape {} the target must be 0-d, got {}", shape_str(x.shape), shape_str(t.shape));
  } else if (x.rank() == 2) {
    if (t.rank() != 1 || t.shape[0] != x.shape[0])
      fail("input {} needs a target of shape [{}], got {}", shape_str(x.shape), x.shape[0], shape_str(t.shape));
  } else {
    fail("input must be [C] or [N,C] (class scores), got {}", shape_str(x.shape));
  }
  if (reduction == "none") return {TensorMeta(x.dtype, t.shape, x.device)};
  if (reduction != "mean" && reduction != "sum")
    fail("reduction must be \"mean\", \"sum\" or \"none\", got \"{}\"", reduction);
  return {TensorMeta(x.dtype, Shape{}, x.device)};
}
}  // namespace

Metas meta_cross_entropy(In in, const Attrs& a) {
  double ls = a.get_float("label_smoothing");
  if (!(ls >= 0 && ls <= 1)) fail("label_smoothing must be in [0, 1], got {}", ls);
  return loss_meta(in[0], in[1], a.get_string("reduction"), "cross_entropy");
}

Metas meta_nll_loss(In in, const Attrs& a) { return loss_meta(in[0], in[1], a.get_string("reduction"), "nll_loss"); }

namespace {
// torch.gather / scatter_add's index rules: same rank as the data (0-d counts as 1-d), and
// every dim of the index no larger than the data's, except `dim` itself for the tensor
// that `dim` indexes into.
void check_index(const TensorMeta& data, const TensorMeta& index, int64_t dim, bool check_dim, const char* what) {
  if (!is_integral(index.dtype) || index.dtype == DType::Bool)
    fail("index must be i64 or i32, got {}", dtype_name(index.dtype));
  if (std::max<int64_t>(index.rank(), 1) != std::max<int64_t>(data.rank(), 1))
    fail("index {} must have as many dims as {} {}", shape_str(index.shape), what, shape_str(data.shape));
  for (int64_t d = 0; d < index.rank() && d < data.rank(); ++d)
    if ((check_dim || d != dim) && index.shape[d] > data.shape[d])
      fail("index {} is larger than {} {} in dim {}", shape_str(index.shape), what, shape_str(data.shape), d);
}
}  // namespace

Metas meta_gather(In in, const Attrs& a) {
  const TensorMeta &self = in[0], &index = in[1];
  int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  check_index(self, index, dim, false, "self");
  return {TensorMeta(self.dtype, index.shape, self.device)};
}

Metas meta_scatter_add(In in, const Attrs& a) {
  const TensorMeta &self = in[0], &index = in[1], &src = in[2];
  int64_t dim = normalize_dim(a.get_int("dim"), std::max<int64_t>(self.rank(), 1));
  if (src.dtype != self.dtype)
    fail("src must have self's dtype {}, got {}", dtype_name(self.dtype), dtype_name(src.dtype));
  check_index(self, index, dim, false, "self");
  check_index(src, index, dim, true, "src");
  return {self.contiguous()};
}

Metas meta_scatter_reduce(In in, const Attrs& a) {
  const std::string& reduce = a.get_string("reduce");
  if (reduce != "sum" && reduce != "prod" && reduce != "mean" && reduce != "amax" && reduce != "amin")
    fail("reduce must be one of sum, prod, mean, amax, amin; got '{}'", reduce);
  if (reduce == "mean" && !is_floating(in[0].dtype))
    fail("reduce='mean' of {} is not supported (PyTorch floors an integer mean): reduce a float tensor", dtype_name(in[0].dtype));
  if (in[0].dtype == DType::Bool && reduce != "amax" && reduce != "amin")
    fail("reduce='{}' of bool is not supported: amax and amin are (or, and)", reduce);
  return meta_scatter_add(in, a);
}

Metas meta_scatter_fold(In in, const Attrs& a) {
  const std::string& reduce = a.get_string("reduce");
  if (reduce != "prod" && reduce != "amax" && reduce != "amin")
    fail("reduce must be one of prod, amax, amin; got '{}' (sum is scatter_add)", reduce);
  if (in[0].dtype == DType::Bool && reduce == "prod")
    fail("reduce='prod' of bool is not supported");
  return meta_scatter_add(in, a);
}

}  // namespace kiln::meta

#include "ir/meta/conv_geometry.h"

namespace kiln::meta {

Metas meta_convolution(In in, const Attrs& a) {
  ConvGeometry g = conv_geometry(in[0], in[1], in.size() > 2 ? &in[2] : nullptr, a);
  Shape s{g.batch, g.out_channels};
  s.insert(s.end(), g.out_size.begin(), g.out_size.end());
  return {TensorMeta(in[0].dtype, s, in[0].device)};
}

Metas meta_pool(In in, const Attrs& a) {
  PoolGeometry g = pool_geometry(in[0], a);
  Shape s(in[0].shape.begin(), in[0].shape.end() - g.spatial);
  s.insert(s.end(), g.out_size.begin(), g.out_size.end());
  return {TensorMeta(in[0].dtype, s, in[0].device)};
}

}  // namespace kiln::meta

namespace kiln::meta {

Metas meta_rms_norm(In in, const Attrs& a) {
  const TensorMeta& x = in[0];
  IntList ns = a.get_ints("normalized_shape");
  if (ns.empty()) fail("normalized_shape must not be empty");
  if (!is_floating(x.dtype)) fail("rms_norm needs a floating-point input, got {}", dtype_name(x.dtype));
  if (static_cast<int64_t>(ns.size()) > x.rank() || !std::equal(ns.begin(), ns.end(), x.shape.end() - static_cast<int64_t>(ns.size())))
    fail("normalized_shape {} must match the input's last dims (input {})", shape_str(ns), shape_str(x.shape));
  if (in.size() > 1) {
    if (in[1].shape != Shape(ns.begin(), ns.end())) fail("weight has shape {} but normalized_shape is {}", shape_str(in[1].shape), shape_str(ns));
    if (in[1].dtype != x.dtype) fail("weight is {} but the input is {}", dtype_name(in[1].dtype), dtype_name(x.dtype));
  }
  return {TensorMeta(x.dtype, x.shape, x.device)};
}

Metas meta_group_norm(In in, const Attrs& a) {
  const TensorMeta& x = in[0];
  if (!is_floating(x.dtype)) fail("group_norm needs a floating-point input, got {}", dtype_name(x.dtype));
  if (x.rank() < 2) fail("input {} must be [N, C, ...]", shape_str(x.shape));
  int64_t g = a.get_int("num_groups"), c = x.shape[1];
  if (g < 1 || c % g) fail("{} channels do not split into {} groups", c, g);
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != Shape{c}) fail("{} has shape {}; it needs one value per channel, [{}]", i == 1 ? "weight" : "bias", shape_str(in[i].shape), c);
    if (in[i].dtype != x.dtype) fail("{} is {} but the input is {}", i == 1 ? "weight" : "bias", dtype_name(in[i].dtype), dtype_name(x.dtype));
  }
  return {TensorMeta(x.dtype, x.shape, x.device)};
}

}  // namespace kiln::meta
