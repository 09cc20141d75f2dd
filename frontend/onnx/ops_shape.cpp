// ONNX's shape and index operators: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
// Split, Slice, Gather, GatherElements, Shape, Size, Constant, ConstantOfShape, Range, Tile,
// Expand, Trilu, Pad, DepthToSpace, SpaceToDepth. Sizes, starts and repeats must be known at
// import (kiln's shapes are static); an exporter's shape computations fold to them.
#include <algorithm>
#include <numeric>

#include "frontend/onnx/op_table.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {


int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// ONNX Gather along `axis` with integer indices of any shape: out = data.shape[:axis] +
// indices.shape + data.shape[axis+1:]. Negative indices count from the end.
Var take(NodeContext& c, Var data, Var idx, int64_t axis) {
  Builder& b = c.b;
  const Shape ds = data.shape();
  const int64_t dim = ds[axis];
  idx = b.to(idx, DType::I64);
  idx = b.where(b.lt(idx, b.scalar(0, DType::I64)), b.add(idx, b.scalar(static_cast<double>(dim), DType::I64)), idx);
  Shape is = idx.shape();
  int64_t n = numel(is);
  Shape out = Shape(ds.begin(), ds.begin() + axis);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), ds.begin() + axis + 1, ds.end());
  if (axis == 0 && ds.size() == 2) return b.op(Op::Embedding, {data, idx});  // a lookup table's rows
  // torch.gather takes an index of the data's rank: the indices along `axis`, broadcast over
  // the other dims.
  Shape one_hot(ds.size(), 1), target = ds;
  one_hot[axis] = n;
  target[axis] = n;
  Var g = b.gather(data, b.expand(b.reshape(idx, one_hot), target), axis);
  return b.reshape(g, out);
}

Var take_known(NodeContext& c, Var data, const IntList& indices, int64_t axis) {
  return take(c, data, constant_1d(c.b, std::vector<double>(indices.begin(), indices.end()), DType::I64), axis);
}

std::vector<Out> reshape(NodeContext& c) {
  Shape in = c.meta(0).shape;
  IntList shape = c.opset < 5 ? c.attr_ints("shape") : c.known_ints(1, "shape");
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= in.size()) c.error(fmt::format("shape {} copies dim {} of an input of rank {}", shape_str(shape), i, in.size()));
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) c.error(fmt::format("shape {} has two -1s", shape_str(shape)));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      c.error(fmt::format("shape {} has a negative size", shape_str(shape)));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    int64_t total = numel(in);
    if (known == 0 || total % known) c.error(fmt::format("cannot reshape {} to {}", shape_str(in), shape_str(shape)));
    shape[infer] = total / known;
  }
  return one(c.b.reshape(c.in(0), shape));
}

std::vector<Out> flatten(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = c.attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) c.error(fmt::format("axis {} is out of range for rank {}", c.attr_int("axis", 1), r));
  return one(c.b.reshape(c.in(0), {product(s, 0, axis), product(s, axis, s.size())}));
}

std::vector<Out> transpose(NodeContext& c) {
  int64_t r = c.meta(0).rank();
  IntList rev(r);
  for (int64_t i = 0; i < r; ++i) rev[i] = r - 1 - i;
  IntList perm = c.attr_ints("perm", rev);
  for (int64_t& p : perm) p = normalize_axis(c, p, r);
  return one(c.b.permute(c.in(0), perm));
}

IntList axes_of(NodeContext& c, size_t input, int opset_of_input, std::optional<IntList> dflt = std::nullopt) {
  if (c.opset >= opset_of_input) {
    if (c.has(input)) return c.known_ints(input, "axes");
    return dflt.value_or(IntList{});
  }
  return c.attr_ints("axes", dflt.value_or(IntList{}));
}

std::vector<Out> squeeze(NodeContext& c) {
  Shape s = c.meta(0).shape;
  IntList axes = axes_of(c, 1, 13);
  int64_t r = static_cast<int64_t>(s.size());
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i)
      if (s[i] == 1) axes.push_back(i);
  for (int64_t& a : axes) {
    a = normalize_axis(c, a, r);
    if (s[a] != 1) c.error(fmt::format("cannot squeeze dim {} of size {} (shape {})", a, s[a], shape_str(s)));
  }
  return one(c.b.squeeze(c.in(0), axes));
}

std::vector<Out> unsqueeze(NodeContext& c) {
  IntList axes = axes_of(c, 1, 13);
  int64_t r = c.meta(0).rank() + static_cast<int64_t>(axes.size());
  for (int64_t& a : axes) a = normalize_axis(c, a, r);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.error("axes repeat an axis");
  Var x = c.in(0);
  for (int64_t a : axes) x = c.b.unsqueeze(x, a);
  return one(x);
}

std::vector<Out> concat(NodeContext& c) {
  std::vector<Value> xs = c.present_inputs();
  if (xs.empty()) c.error("needs at least one input");
  int64_t axis = normalize_axis(c, c.attr_int("axis"), xs[0].meta().rank());
  if (xs.size() == 1) return one(c.b.wrap(xs[0]));
  return one(c.b.cat(xs, axis));
}

std::vector<Out> split(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t axis = normalize_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(s.size()));
  IntList sizes;
  if (c.opset >= 13) {
    if (c.has(1)) sizes = c.known_ints(1, "split");
  } else {
    sizes = c.attr_ints("split", IntList{});
  }
  int n = c.num_outputs();
  if (sizes.empty() && c.has_attr("num_outputs")) {
    // opset 18's form (which PyTorch 2's dynamo exporter writes): parts of ceil(size / n), the
    // last one what remains
    const int64_t parts = c.attr_int("num_outputs");
    if (parts != n) c.error(fmt::format("num_outputs {} for {} outputs", parts, n));
    const int64_t chunk = (s[axis] + parts - 1) / parts;
    for (int64_t left = s[axis]; left > 0; left -= chunk) sizes.push_back(std::min(chunk, left));
    if (static_cast<int>(sizes.size()) != n) c.error(fmt::format("dim {} of size {} does not make {} parts of {}", axis, s[axis], n, chunk));
  }
  if (sizes.empty()) {
    if (s[axis] % n) c.error(fmt::format("cannot split dim {} of size {} into {} equal parts", axis, s[axis], n));
    sizes.assign(n, s[axis] / n);
  }
  if (static_cast<int>(sizes.size()) != n) c.error(fmt::format("{} split sizes for {} outputs", sizes.size(), n));
  std::vector<Out> out;
  if (n == 1) return one(c.in(0));
  for (Var v : c.b.split(c.in(0), sizes, axis)) out.emplace_back(v);
  return out;
}

std::vector<Out> slice(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  IntList starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes", IntList{});
  } else {
    starts = c.known_ints(1, "starts");
    ends = c.known_ints(2, "ends");
    if (c.has(3)) axes = c.known_ints(3, "axes");
    if (c.has(4)) steps = c.known_ints(4, "steps");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.error("starts, ends, axes and steps must have the same length");
  Var x = c.in(0);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalize_axis(c, axes[i], r), dim = s[a], step = steps[i];
    if (step == 0) c.error("a step of 0");
    // ONNX's clamping: negative starts and ends count from the end, then clamp into the dim
    // ([0, dim] going forward, [-1, dim - 1] going backward).
    int64_t st = starts[i] < 0 ? starts[i] + dim : starts[i], en = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (ends[i] <= std::numeric_limits<int64_t>::min() / 2) en = -1;  // "to the very start" going backward
    if (step > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
      if (st == 0 && en == dim && step == 1) continue;
      x = c.b.slice(x, a, st, std::max(st, en), step);
    } else {
      st = std::clamp<int64_t>(st, -1, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
      IntList idx;
      for (int64_t k = st; k > en; k += step) idx.push_back(k);
      if (idx.empty()) {
        Shape e = x.shape();
        e[a] = 0;
        x = c.b.full(e, 0, x.dtype());
      } else {
        x = take_known(c, x, idx, a);
      }
    }
  }
  return one(x);
}

std::vector<Out> gather(NodeContext& c) {
  int64_t r = c.meta(0).rank();
  int64_t axis = normalize_axis(c, c.attr_int("axis", 0), r);
  return one(take(c, c.in(0), c.in(1), axis));
}

std::vector<Out> gather_elements(NodeContext& c) {
  Shape ds = c.meta(0).shape;
  int64_t axis = normalize_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(ds.size()));
  Builder& b = c.b;
  Var idx = b.to(c.in(1), DType::I64);
  idx = b.where(b.lt(idx, b.scalar(0, DType::I64)), b.add(idx, b.scalar(static_cast<double>(ds[axis]), DType::I64)), idx);
  return one(b.gather(c.in(0), idx, axis));
}

HostTensor ints_tensor(const IntList& v, Shape shape) {
  return HostTensor::from_ints(DType::I64, shape, v);
}

std::vector<Out> shape(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  IntList v(s.begin() + start, s.begin() + end);
  return {Out::of_known(ints_tensor(v, {static_cast<int64_t>(v.size())}))};
}

std::vector<Out> size(NodeContext& c) { return {Out::of_known(ints_tensor({numel(c.meta(0).shape)}, {}))}; }

HostTensor tensor_attr(NodeContext& c, const char* name) {
  const auto* a = c.attr(name);
  return to_host_tensor(a->t(), c.where() + fmt::format(" attribute '{}'", name));
}

std::vector<Out> constant(NodeContext& c) {
  if (c.has_attr("value")) return {Out::of_known(tensor_attr(c, "value"))};
  if (c.has_attr("value_float")) return {Out::of_known(HostTensor::scalar(DType::F32, c.attr_float("value_float")))};
  if (c.has_attr("value_int")) return {Out::of_known(ints_tensor({c.attr_int("value_int")}, {}))};
  if (c.has_attr("value_ints")) {
    IntList v = c.attr_ints("value_ints");
    return {Out::of_known(ints_tensor(v, {static_cast<int64_t>(v.size())}))};
  }
  if (c.has_attr("value_floats")) {
    const auto* a = c.attr("value_floats");
    std::vector<double> v(a->floats().begin(), a->floats().end());
    return {Out::of_known(HostTensor::from_doubles(DType::F32, {static_cast<int64_t>(v.size())}, v))};
  }
  for (const char* s : {"value_string", "value_strings"})
    if (c.has_attr(s)) c.unsupported("string constants are not supported");
  if (c.has_attr("sparse_value")) c.unsupported("sparse constants are not supported");
  c.error("has no value attribute");
}

std::vector<Out> constant_of_shape(NodeContext& c) {
  IntList shape = c.known_ints(0, "shape");
  DType dt = DType::F32;
  double v = 0;
  if (c.has_attr("value")) {
    HostTensor t = tensor_attr(c, "value");
    if (t.numel() != 1) c.error("its value must hold one element");
    dt = t.dtype();
    v = t.get(0);
  }
  return one(c.b.full(shape, v, dt));
}

std::vector<Out> range(NodeContext& c) {
  DType dt = c.meta(0).dtype;
  double start = c.known_doubles(0, "start")[0], limit = c.known_doubles(1, "limit")[0], delta = c.known_doubles(2, "delta")[0];
  if (delta == 0) c.error("delta is 0");
  auto scalar = [&](double v) -> AttrValue {
    if (!is_floating(dt)) return static_cast<int64_t>(v);
    return v;
  };
  int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
  if (n == 0) return one(c.b.full({0}, 0, dt));
  Attrs a;
  a.set("start", scalar(start));
  a.set("end", scalar(limit));  // kiln counts as ONNX does: max(ceil((limit - start) / delta), 0)
  a.set("step", scalar(delta));
  a.set("dtype", dt);
  return one(c.b.op(Op::Arange, {}, a));
}

std::vector<Out> tile(NodeContext& c) {
  Shape s = c.meta(0).shape;
  IntList reps = c.known_ints(1, "repeats");
  if (reps.size() != s.size()) c.error(fmt::format("{} repeats for an input of rank {}", reps.size(), s.size()));
  // x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], then merged pairwise.
  Shape inter, expanded, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (reps[i] < 0) c.error("a negative repeat");
    inter.insert(inter.end(), {1, s[i]});
    expanded.insert(expanded.end(), {reps[i], s[i]});
    out.push_back(reps[i] * s[i]);
  }
  Var x = c.in(0);
  return one(c.b.reshape(c.b.expand(c.b.reshape(x, inter), expanded), out));
}

std::vector<Out> expand(NodeContext& c) {
  Shape s = c.meta(0).shape;
  IntList want = c.known_ints(1, "shape");
  // Bidirectional broadcasting: either side's 1s stretch.
  size_t r = std::max(s.size(), want.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t a = i + s.size() >= r ? s[i + s.size() - r] : 1;
    int64_t w = i + want.size() >= r ? want[i + want.size() - r] : 1;
    if (a != w && a != 1 && w != 1) c.error(fmt::format("cannot expand {} to {}", shape_str(s), shape_str(want)));
    out[i] = a == 1 ? w : a;
  }
  return one(c.b.expand(c.in(0), out));
}

std::vector<Out> trilu(NodeContext& c) {
  int64_t k = c.has(1) ? c.known_ints(1, "k")[0] : 0;
  bool upper = c.attr_int("upper", 1) != 0;
  Attrs a;
  a.set("diagonal", k);
  return one(c.b.op(upper ? Op::Triu : Op::Tril, {c.in(0)}, a));
}

std::vector<Out> pad(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  std::string mode = c.attr_string("mode", "constant");
  IntList pads;
  double value = 0;
  IntList axes;
  if (c.opset < 11) {
    pads = c.attr_ints(c.opset < 2 ? "paddings" : "pads");
    value = c.attr_float("value", 0.0);
  } else {
    pads = c.known_ints(1, "pads");
    if (c.has(2)) value = c.known_doubles(2, "constant_value")[0];
    if (c.has(3)) axes = c.known_ints(3, "axes");
  }
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) c.error(fmt::format("{} pads for {} axes", pads.size(), axes.size()));
  if (mode != "constant" && mode != "reflect" && mode != "edge") c.unsupported(fmt::format("mode '{}'", mode));
  Var x = c.in(0);
  size_t n = axes.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t a = normalize_axis(c, axes[i], r), before = pads[i], after = pads[i + n];
    if (before == 0 && after == 0) continue;
    if (mode == "constant") {
      x = c.b.pad(x, a, before, after, value);  // negative pads crop
      continue;
    }
    // Negative pads crop.
    x = c.b.pad(x, a, std::min<int64_t>(before, 0), std::min<int64_t>(after, 0), 0.0);
    before = std::max<int64_t>(before, 0);
    after = std::max<int64_t>(after, 0);
    const int64_t dim = x.shape()[a];
    if (dim == 0) c.error(fmt::format("{} padding of an empty dim", mode));
    if (mode == "reflect" && (before >= dim || after >= dim))
      c.error(fmt::format("reflect padding of {} and {} on a dim of {} (each must be below it)", before, after, dim));
    IntList idx;
    for (int64_t k = -before; k < dim + after; ++k) {
      int64_t j = k;
      if (mode == "edge") j = std::clamp<int64_t>(k, 0, dim - 1);
      else if (k < 0) j = -k;
      else if (k >= dim) j = 2 * (dim - 1) - k;
      idx.push_back(j);
    }
    x = take_known(c, x, idx, a);
  }
  return one(x);
}

std::vector<Out> depth_to_space(NodeContext& c) {
  Shape s = c.meta(0).shape;
  if (s.size() != 4) c.error("needs a 4-d input");
  int64_t bs = c.attr_int("blocksize");
  std::string mode = c.attr_string("mode", "DCR");
  int64_t n = s[0], ch = s[1], h = s[2], w = s[3], oc = ch / (bs * bs);
  Var x = c.in(0);
  if (mode == "DCR") {
    x = c.b.permute(c.b.reshape(x, {n, bs, bs, oc, h, w}), {0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    x = c.b.permute(c.b.reshape(x, {n, oc, bs, bs, h, w}), {0, 1, 4, 2, 5, 3});
  } else {
    c.error(fmt::format("mode '{}' (DCR or CRD)", mode));
  }
  return one(c.b.reshape(x, {n, oc, h * bs, w * bs}));
}

std::vector<Out> space_to_depth(NodeContext& c) {
  Shape s = c.meta(0).shape;
  if (s.size() != 4) c.error("needs a 4-d input");
  int64_t bs = c.attr_int("blocksize");
  int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
  Var x = c.b.permute(c.b.reshape(c.in(0), {n, ch, h / bs, bs, w / bs, bs}), {0, 3, 5, 1, 2, 4});
  return one(c.b.reshape(x, {n, ch * bs * bs, h / bs, w / bs}));
}

}  // namespace

void add_shape_ops(std::vector<OpEntry>& t) {
  t.push_back({"Reshape", reshape});
  t.push_back({"Flatten", flatten});
  t.push_back({"Transpose", transpose});
  t.push_back({"Squeeze", squeeze});
  t.push_back({"Unsqueeze", unsqueeze});
  t.push_back({"Concat", concat});
  t.push_back({"Split", split});
  t.push_back({"Slice", slice});
  t.push_back({"Gather", gather});
  t.push_back({"GatherElements", gather_elements});
  t.push_back({"Shape", shape});
  t.push_back({"Size", size});
  t.push_back({"Constant", constant});
  t.push_back({"ConstantOfShape", constant_of_shape});
  t.push_back({"Range", range});
  t.push_back({"Tile", tile});
  t.push_back({"Expand", expand});
  t.push_back({"Trilu", trilu});
  t.push_back({"Pad", pad});
  t.push_back({"DepthToSpace", depth_to_space});
  t.push_back({"SpaceToDepth", space_to_depth});
}

}  // namespace kiln::onnx
