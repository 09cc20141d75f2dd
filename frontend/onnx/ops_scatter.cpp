// ONNX's element-indexed operators, written with kiln's gather, scatter, scatter_add and
// scatter_fold: Scatter (opset 9) and ScatterElements (reduction none, add, mul, max, min),
// ScatterND (the same) and GatherND (any
// batch_dims). The N-d forms flatten the indexed leading dims into one, so that each index
// tuple becomes one position along it (a dot product with the dims' strides), and go through
// the element forms along that dim.
#include <fmt/format.h>

#include "frontend/onnx/op_table.h"

namespace kiln::onnx {

namespace {

// Indices made non-negative for an axis of `size` (ONNX counts negative ones from the end).
Var wrap_negative(Builder& b, Var idx, int64_t size) {
  Var i64 = b.to(idx, DType::I64);
  return b.where(b.lt(i64, b.scalar(0, DType::I64)), b.add(i64, b.scalar(static_cast<double>(size), DType::I64)), i64);
}

// data with updates written at idx along axis (reduction "none": replaced, the later of two
// writes to one place staying, as ONNX's reference applies them in order; "add": added; "mul"
// (opset 16): multiplied in; "max"/"min" (opset 18, past ONNX 1.12's 17, taken as well): the
// larger or smaller kept).
Var scatter_along(NodeContext& c, Var data, Var idx, Var updates, int64_t axis, const std::string& reduction) {
  Builder& b = c.b;
  if (reduction == "add") return b.scatter_add(data, idx, updates, axis);
  if (reduction == "mul" || reduction == "max" || reduction == "min") {
    const std::string fold = reduction == "mul" ? "prod" : reduction == "max" ? "amax" : "amin";
    return b.op(Op::ScatterFold, {data, idx, updates}, Attrs{{"dim", axis}, {"reduce", fold}});
  }
  if (reduction != "none") c.unsupported(fmt::format("reduction '{}'", reduction));
  return b.scatter(data, idx, updates, axis);
}

std::vector<Out> scatter_elements(NodeContext& c) {
  Var data = c.in(0);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), data.rank());
  const std::string reduction = c.attr_string("reduction", "none");
  Var idx = wrap_negative(c.b, c.in(1), data.shape()[static_cast<size_t>(axis)]);
  return one(scatter_along(c, data, idx, c.in(2), axis, reduction));
}

// Positions of the index tuples idx[..., k] in data's first k dims flattened (row-major).
Var flat_positions(Builder& b, Var idx, const Shape& dims) {
  const int64_t k = static_cast<int64_t>(dims.size());
  std::vector<double> strides(static_cast<size_t>(k));
  int64_t stride = 1;
  for (int64_t d = k - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = static_cast<double>(stride);
    stride *= dims[static_cast<size_t>(d)];
  }
  Var pos;
  for (int64_t d = 0; d < k; ++d) {
    Var part = b.reshape(b.slice(idx, idx.rank() - 1, d, d + 1), Shape(idx.shape().begin(), idx.shape().end() - 1));
    part = b.mul(wrap_negative(b, part, dims[static_cast<size_t>(d)]), b.scalar(strides[static_cast<size_t>(d)], DType::I64));
    pos = pos ? Var(b.add(pos, part)) : part;
  }
  return pos;
}

// Data viewed with its first `k` dims flattened into one ([prod(lead), rest...]), and each of
// the index tuples' position along that dim, broadcast over the rest ([M, rest...], M the count
// of tuples).
struct FlatTuples {
  Shape data_shape, tuple_shape;
  Var positions;
};
FlatTuples flatten_tuples(Builder& b, Var tuples, const Shape& ds, int64_t k) {
  const Shape lead(ds.begin(), ds.begin() + k), rest(ds.begin() + k, ds.end());
  int64_t flat = 1, m = 1;
  for (int64_t d : lead) flat *= d;
  for (size_t d = 0; d + 1 < tuples.shape().size(); ++d) m *= tuples.shape()[d];
  FlatTuples out{{flat}, {m}, Var()};
  out.data_shape.insert(out.data_shape.end(), rest.begin(), rest.end());
  out.tuple_shape.insert(out.tuple_shape.end(), rest.begin(), rest.end());
  Shape along(out.tuple_shape.size(), 1);
  along[0] = m;
  out.positions = b.expand(b.reshape(flat_positions(b, tuples, lead), along), out.tuple_shape);
  return out;
}

std::vector<Out> scatter_nd(NodeContext& c) {
  Builder& b = c.b;
  Var data = c.in(0), idx = c.in(1), updates = c.in(2);
  const std::string reduction = c.attr_string("reduction", "none");
  const Shape ds = data.shape(), is = idx.shape();
  if (is.empty()) c.error("indices must have rank at least 1");
  const int64_t k = is.back();
  if (k < 1 || k > data.rank()) c.error(fmt::format("index tuples of {} values for data of rank {}", k, data.rank()));
  FlatTuples f = flatten_tuples(b, idx, ds, k);
  Var y = scatter_along(c, b.reshape(data, f.data_shape), f.positions, b.reshape(updates, f.tuple_shape), 0, reduction);
  return one(b.reshape(y, ds));
}

std::vector<Out> gather_nd(NodeContext& c) {
  Builder& b = c.b;
  Var data = c.in(0), idx = c.in(1);
  const int64_t batch = c.attr_int("batch_dims", 0);
  const Shape ds = data.shape(), is = idx.shape();
  if (is.empty()) c.error("indices must have rank at least 1");
  const int64_t k = is.back();
  if (batch < 0 || batch + k > data.rank() || batch >= static_cast<int64_t>(is.size()))
    c.error(fmt::format("batch_dims {} and index tuples of {} values for data of rank {}", batch, k, data.rank()));
  // batch_dims: the first `batch` dims of data and indices go together; they become part of
  // each tuple (the batch position itself), so one flattened gather serves every batch.
  Var tuples = b.to(idx, DType::I64);
  if (batch > 0) {
    // prepend each index tuple with its batch coordinates
    std::vector<Value> parts;
    Shape tuple_shape(is.begin(), is.end() - 1);
    tuple_shape.push_back(1);
    for (int64_t d = 0; d < batch; ++d) {
      Shape ar(static_cast<size_t>(is.size()), 1);
      ar[static_cast<size_t>(d)] = is[static_cast<size_t>(d)];
      parts.push_back(b.expand(b.reshape(b.arange(is[static_cast<size_t>(d)]), ar), tuple_shape).v);
    }
    parts.push_back(tuples.v);
    tuples = b.cat(parts, static_cast<int64_t>(is.size()) - 1);
  }
  FlatTuples f = flatten_tuples(b, tuples, ds, batch + k);
  Var y = b.gather(b.reshape(data, f.data_shape), f.positions, 0);
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + batch + k, ds.end());
  return one(b.reshape(y, out));
}

}  // namespace

void add_scatter_ops(std::vector<OpEntry>& t) {
  t.push_back({"Scatter", scatter_elements});
  t.push_back({"ScatterElements", scatter_elements});
  t.push_back({"ScatterND", scatter_nd});
  t.push_back({"GatherND", gather_nd});
}

}  // namespace kiln::onnx
