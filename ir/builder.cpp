#include "ir/builder.h"

#include "ir/error.h"

namespace kiln {

Var Builder::op(Op op, std::vector<Value> inputs, const Attrs& attrs, const std::string& name) {
  for (const Value& v : inputs) KILN_INTERNAL_ASSERT(v, "Builder::op inputs are non-empty values");
  std::string n = !name.empty() || prefix_.empty() ? name : prefix_ + std::string(op_short_name(op));
  return Var(this, g_.add_node(op, std::move(inputs), attrs, n, before_)->result(0));
}

Var Builder::op(std::string_view op_name, std::vector<Value> inputs, const Attrs& attrs, const std::string& name) {
  const OpInfo* info = find_op(op_name);
  if (!info) fail("no op named '{}' (a custom op must be registered before it is used)", op_name);
  return op(info->op, std::move(inputs), attrs, name);
}

std::vector<Var> Builder::op_n(Op op, std::vector<Value> inputs, const Attrs& attrs, const std::string& name) {
  std::string n = !name.empty() || prefix_.empty() ? name : prefix_ + std::string(op_short_name(op));
  Node* node = g_.add_node(op, std::move(inputs), attrs, n, before_);
  std::vector<Var> out;
  for (int i = 0; i < node->num_results(); ++i) out.emplace_back(this, node->result(i));
  return out;
}

Var Builder::scalar(double v, DType dt) { return full({}, v, dt); }

Var Builder::full(const Shape& shape, double v, DType dt) {
  Attrs a;
  a.set("size", IntList(shape.begin(), shape.end()));
  // Integer and bool constants keep an integer fill value so they print as such.
  if (is_floating(dt)) a.set("fill_value", v);
  else a.set("fill_value", static_cast<int64_t>(v));
  a.set("dtype", dt);
  return op(Op::Full, {}, a);
}

Var Builder::arange(int64_t end, DType dt) {
  Attrs a;
  a.set("end", end);
  a.set("dtype", dt);
  return op(Op::Arange, {}, a);
}

Var Builder::to(Value x, DType dt) {
  if (x.meta().dtype == dt) return wrap(x);
  return op(Op::To, {x}, attrs1("dtype", dt));
}

namespace {
// A Scalar attribute for a tensor of dtype dt: whole numbers stay ints on integer tensors.
AttrValue scalar_attr(double v, DType dt) {
  if (!is_floating(dt) && v == static_cast<double>(static_cast<int64_t>(v))) return static_cast<int64_t>(v);
  return v;
}
}  // namespace

Var Builder::clamp(Value x, std::optional<double> min, std::optional<double> max) {
  Attrs a;
  if (min) a.set("min", scalar_attr(*min, x.meta().dtype));
  if (max) a.set("max", scalar_attr(*max, x.meta().dtype));
  return op(Op::Clamp, {x}, a);
}

Var Builder::masked_fill(Value x, Value mask, double value) {
  return op(Op::MaskedFill, {x, mask}, attrs1("value", scalar_attr(value, x.meta().dtype)));
}

namespace {
Attrs reduce_attrs(const IntList& dims, bool keepdim) {
  Attrs a;
  if (!dims.empty()) a.set("dim", dims);
  a.set("keepdim", keepdim);
  return a;
}
}  // namespace

Var Builder::sum(Value x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  Attrs a = reduce_attrs(dims, keepdim);
  if (dtype) a.set("dtype", *dtype);
  return op(Op::Sum, {x}, a);
}
Var Builder::mean(Value x, const IntList& dims, bool keepdim) { return op(Op::Mean, {x}, reduce_attrs(dims, keepdim)); }
Var Builder::amax(Value x, const IntList& dims, bool keepdim) { return op(Op::Amax, {x}, reduce_attrs(dims, keepdim)); }
Var Builder::amin(Value x, const IntList& dims, bool keepdim) { return op(Op::Amin, {x}, reduce_attrs(dims, keepdim)); }

Var Builder::var(Value x, const IntList& dims, double correction, bool keepdim) {
  Attrs a = reduce_attrs(dims, keepdim);
  a.set("correction", correction);
  return op(Op::Var, {x}, a);
}

Var Builder::prod(Value x, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) {
  Attrs a;
  if (dim) a.set("dim", *dim);
  a.set("keepdim", keepdim);
  if (dtype) a.set("dtype", *dtype);
  return op(Op::Prod, {x}, a);
}

Var Builder::argmax(Value x, std::optional<int64_t> dim, bool keepdim) {
  Attrs a;
  if (dim) a.set("dim", *dim);
  a.set("keepdim", keepdim);
  return op(Op::Argmax, {x}, a);
}

Var Builder::reshape(Value x, const Shape& shape) {
  if (x.meta().shape == shape) return wrap(x);
  return op(Op::Reshape, {x}, attrs1("shape", IntList(shape.begin(), shape.end())));
}

Var Builder::expand(Value x, const Shape& shape) {
  if (x.meta().shape == shape) return wrap(x);
  return op(Op::Expand, {x}, attrs1("size", IntList(shape.begin(), shape.end())));
}

Var Builder::permute(Value x, const IntList& dims) { return op(Op::Permute, {x}, attrs1("dims", dims)); }

Var Builder::squeeze(Value x, const IntList& dims) {
  Attrs a;
  if (!dims.empty()) a.set("dim", dims);
  return op(Op::Squeeze, {x}, a);
}

Var Builder::slice(Value x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Attrs a;
  a.set("dim", dim);
  a.set("start", start);
  a.set("end", end);
  a.set("step", step);
  return op(Op::Slice, {x}, a);
}

Var Builder::pad(Value x, int64_t dim, int64_t lo, int64_t hi, double fill) {
  Var v = wrap(x);
  if (lo < 0 || hi < 0) {
    int64_t n = v.shape()[dim];
    v = slice(v, dim, std::max<int64_t>(-lo, 0), n - std::max<int64_t>(-hi, 0));
    lo = std::max<int64_t>(lo, 0);
    hi = std::max<int64_t>(hi, 0);
  }
  if (lo == 0 && hi == 0) return v;
  std::vector<Value> parts;
  Shape s = v.shape();
  if (lo) {
    s[dim] = lo;
    parts.push_back(full(s, fill, v.dtype()));
  }
  parts.push_back(v);
  if (hi) {
    s[dim] = hi;
    parts.push_back(full(s, fill, v.dtype()));
  }
  return cat(parts, dim);
}

Var Builder::cat(const std::vector<Value>& xs, int64_t dim) { return op(Op::Cat, xs, attrs1("dim", dim)); }

std::vector<Var> Builder::split(Value x, const IntList& sizes, int64_t dim) {
  Attrs a;
  a.set("split_sizes", sizes);
  a.set("dim", dim);
  return op_n(Op::Split, {x}, a);
}

Var Builder::sum_to(Value x, const Shape& shape) {
  const Shape& from = x.meta().shape;
  if (from == shape) return wrap(x);
  int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(shape.size());
  if (lead < 0) fail("cannot sum {} down to {}: the target has more dims", shape_str(from), shape_str(shape));
  IntList dims;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead) dims.push_back(d);
    else if (shape[d - lead] == 1 && from[d] != 1) dims.push_back(d);
    else if (shape[d - lead] != from[d]) fail("cannot sum {} down to {}", shape_str(from), shape_str(shape));
  }
  Var r = wrap(x);
  if (!dims.empty()) r = sum(x, dims, /*keepdim=*/true);
  return reshape(r, shape);  // drops the leading dims kept above
}

Var Builder::restore_reduced_dims(Value x, const Shape& shape, const IntList& dims, bool keepdim) {
  if (keepdim) return wrap(x);
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return reshape(x, {});
  Shape kept = shape;
  if (dims.empty()) {
    for (auto& s : kept) s = 1;
  } else {
    for (int64_t d : dims) kept[normalize_dim(d, rank)] = 1;
  }
  return reshape(x, kept);
}

Var Builder::unreduce(Value x, const Shape& shape, const IntList& dims, bool keepdim) {
  return expand(restore_reduced_dims(x, shape, dims, keepdim), shape);
}

// ---- operators
namespace {
Builder& builder_of(const Var& a, const Var& b) {
  Builder* bl = a.b ? a.b : b.b;
  KILN_INTERNAL_ASSERT(bl, "a Var operator has a Builder");
  return *bl;
}
Var num(const Var& like, double v) { return like.b->scalar(v, like.dtype()); }
}  // namespace

Var operator+(Var a, Var b) { return builder_of(a, b).add(a, b); }
Var operator-(Var a, Var b) { return builder_of(a, b).sub(a, b); }
Var operator*(Var a, Var b) { return builder_of(a, b).mul(a, b); }
Var operator/(Var a, Var b) { return builder_of(a, b).div(a, b); }
Var operator-(Var a) { return a.b->neg(a); }
Var operator+(Var a, double b) { return a + num(a, b); }
Var operator-(Var a, double b) { return a - num(a, b); }
Var operator*(Var a, double b) { return a * num(a, b); }
Var operator/(Var a, double b) { return a / num(a, b); }
Var operator+(double a, Var b) { return num(b, a) + b; }
Var operator-(double a, Var b) { return num(b, a) - b; }
Var operator*(double a, Var b) { return num(b, a) * b; }
Var operator/(double a, Var b) { return num(b, a) / b; }

}  // namespace kiln
