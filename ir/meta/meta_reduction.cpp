// Shape-and-dtype rules of reductions.
#include "ir/error.h"
#include "ir/meta/meta.h"

namespace kiln::meta {

std::vector<bool> reduced_dims(const TensorMeta& t, const std::optional<IntList>& dims) {
  std::vector<bool> r(t.shape.size(), false);
  if (!dims || dims->empty()) {
    r.assign(t.shape.size(), true);
    return r;
  }
  for (int64_t d : *dims) {
    int64_t n = normalize_dim(d, t.rank());
    if (t.rank() == 0) continue;
    if (r[n]) fail("dim {} appears more than once in the list of dims", n);
    r[n] = true;
  }
  return r;
}

Shape reduce_shape(const Shape& s, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!reduced[i]) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {
Metas reduce(const TensorMeta& in, const std::optional<IntList>& dims, bool keepdim, DType dt) {
  return {TensorMeta(dt, reduce_shape(in.shape, reduced_dims(in, dims), keepdim), in.device)};
}
void check_nonempty(const TensorMeta& in, const std::vector<bool>& reduced, const char* what) {
  for (size_t i = 0; i < reduced.size(); ++i)
    if (reduced[i] && in.shape[i] == 0) fail("cannot compute {} over an empty dimension (dim {} has size 0)", what, i);
}
}  // namespace

Metas meta_sum(In in, const Attrs& a) {
  DType dt = in[0].dtype;
  if (auto d = a.opt_dtype("dtype")) dt = *d;
  else if (!is_floating(dt)) dt = DType::I64;  // integer and bool sums accumulate in int64
  return reduce(in[0], a.opt_ints("dim"), a.get_bool("keepdim"), dt);
}

Metas meta_mean(In in, const Attrs& a) {
  DType dt = a.opt_dtype("dtype").value_or(in[0].dtype);
  if (!is_floating(dt))
    fail("mean needs a floating-point input or dtype, got {} (pass dtype=f32)", dtype_name(dt));
  return reduce(in[0], a.opt_ints("dim"), a.get_bool("keepdim"), dt);
}

Metas meta_minmax(In in, const Attrs& a) {
  auto dims = a.opt_ints("dim");
  check_nonempty(in[0], reduced_dims(in[0], dims), "a max or min");
  return reduce(in[0], dims, a.get_bool("keepdim"), in[0].dtype);
}

// The float type of the input (PyTorch's logsumexp of integers is a float); empty reductions
// are allowed (-inf).
Metas meta_logsumexp(In in, const Attrs& a) {
  return reduce(in[0], a.opt_ints("dim"), a.get_bool("keepdim"), is_floating(in[0].dtype) ? in[0].dtype : kDefaultFloat);
}

Metas meta_argmax(In in, const Attrs& a) {
  auto dim = a.opt_int("dim");
  if (!dim) {
    if (in[0].numel() == 0) fail("argmax of an empty tensor");
    return {TensorMeta(DType::I64, a.get_bool("keepdim") ? Shape(in[0].shape.size(), 1) : Shape{}, in[0].device)};
  }
  IntList dims{*dim};
  check_nonempty(in[0], reduced_dims(in[0], dims), "argmax");
  return reduce(in[0], dims, a.get_bool("keepdim"), DType::I64);
}

Metas meta_var(In in, const Attrs& a) {
  if (!is_floating(in[0].dtype)) fail("var needs a floating-point input, got {}", dtype_name(in[0].dtype));
  return reduce(in[0], a.opt_ints("dim"), a.get_bool("keepdim"), in[0].dtype);
}

Metas meta_prod(In in, const Attrs& a) {
  DType dt = in[0].dtype;
  if (auto d = a.opt_dtype("dtype")) dt = *d;
  else if (!is_floating(dt)) dt = DType::I64;
  auto dim = a.opt_int("dim");
  return reduce(in[0], dim ? std::optional<IntList>(IntList{*dim}) : std::nullopt, a.get_bool("keepdim"), dt);
}

}  // namespace kiln::meta
