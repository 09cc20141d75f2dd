// ONNX's neural-network operators: MatMul, Einsum, Gemm, Softmax and LogSoftmax, the normalizations
// (LayerNormalization, BatchNormalization, InstanceNormalization), global pools,
// Dropout, the Reduce* family with ArgMax/ArgMin, CumSum, EyeLike and LRN.
#include <cmath>

#include "frontend/onnx/op_table.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {


std::vector<Out> matmul(NodeContext& c) { return one(c.b.matmul(c.in(0), c.in(1))); }

// Einsum (opset 12): kiln's einsum, the same equation language (numpy's).
std::vector<Out> einsum(NodeContext& c) {
  std::vector<Value> operands;
  for (size_t i = 0; i < c.num_inputs(); ++i) operands.push_back(c.in(i));
  return one(c.b.op(Op::Einsum, operands, {{"equation", c.attr_string("equation")}}));
}

std::vector<Out> gemm(NodeContext& c) {
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  c.ignore_attr("broadcast");  // opset < 7: C broadcasts either way
  Var a = c.in(0), b = c.in(1);
  if (ta) a = c.b.transpose(a, 0, 1);
  if (tb) b = c.b.transpose(b, 0, 1);
  Var y = c.b.matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (c.has(2) && beta != 0.0) {
    Var bias = c.in(2);
    if (beta != 1.0) bias = bias * beta;
    y = c.b.add(y, bias);
  }
  return one(y);
}

// Softmax and LogSoftmax: from opset 13 over one axis (default -1); before it, the input is
// seen as 2-d, [prod(dims before axis), prod(dims from axis)] (default axis 1), and the
// softmax runs over the second.
Converter softmax_like(Op op) {
  return [op](NodeContext& c) {
    Shape s = c.meta(0).shape;
    int64_t r = static_cast<int64_t>(s.size());
    Attrs a;
    if (c.opset >= 13) {
      a.set("dim", normalize_axis(c, c.attr_int("axis", -1), r));
      return one(c.b.op(op, {c.in(0)}, a));
    }
    int64_t axis = c.attr_int("axis", 1);
    if (axis < 0) axis += r;
    if (axis < 0 || axis > r) c.error(fmt::format("axis {} is out of range for rank {}", axis, r));
    int64_t lead = 1, rest = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? lead : rest) *= s[i];
    a.set("dim", int64_t{1});
    Var y = c.b.op(op, {c.b.reshape(c.in(0), {lead, rest})}, a);
    return one(c.b.reshape(y, s));
  };
}

std::vector<Out> layer_norm(NodeContext& c) {
  Shape s = c.meta(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = normalize_axis(c, c.attr_int("axis", -1), r);
  double eps = c.attr_float("epsilon", 1e-5);
  c.require_attr_int("stash_type", 1, "statistics in float32 is what kiln computes");
  IntList normalized(s.begin() + axis, s.end());
  Attrs a;
  a.set("normalized_shape", normalized);
  a.set("eps", eps);
  std::vector<Value> ins{c.in(0), c.in(1)};
  ins.push_back(c.has(2) ? Value(c.in(2)) : Value());
  // layer_norm's weight and bias have the normalized shape: ONNX's Scale and B may be given
  // with leading 1s.
  for (size_t i = 1; i < 3; ++i)
    if (ins[i] && ins[i].meta().shape != normalized) ins[i] = c.b.expand(c.b.wrap(ins[i]), normalized);
  std::vector<Out> out = one(c.b.op(Op::LayerNorm, ins, a));
  if (c.num_outputs() > 1) {
    // Mean and InvStdDev (training exporters ask for them), in f32 (stash_type), with the
    // normalized dims kept as 1s: computed beside the layer_norm, which fusion puts in one
    // kernel with it.
    IntList dims;
    for (int64_t d = axis; d < r; ++d) dims.push_back(d);
    Var x = c.b.to(c.in(0), DType::F32);
    Var mean = c.b.mean(x, dims, true);
    Var centered = c.b.sub(x, mean);
    Var var = c.b.mean(c.b.mul(centered, centered), dims, true);
    out.emplace_back(mean);
    out.emplace_back(c.b.rsqrt(c.b.add(var, c.b.scalar(eps, DType::F32))));
  }
  return out;
}

// x of shape [N, C, ...], a per-channel vector viewed as [C, 1, ...] to broadcast over it.
Var per_channel(NodeContext& c, Var v, int64_t rank) {
  Shape s{v.shape().empty() ? 1 : v.shape()[0]};
  for (int64_t i = 2; i < rank; ++i) s.push_back(1);
  return c.b.reshape(v, s);
}

std::vector<Out> batch_norm(NodeContext& c) {
  double eps = c.attr_float("epsilon", 1e-5);
  c.ignore_attr("spatial");   // opset < 9: 1 is the only form exporters write
  c.ignore_attr("consumed_inputs");
  // Training mode: training_mode=1 from opset 14; before opset 7, is_test=0.
  const bool training = c.opset <= 6 ? c.attr_int("is_test", 0) == 0 : c.attr_int("training_mode", 0) != 0;
  const double momentum = c.attr_float("momentum", 0.9);
  Var x = c.in(0);
  int64_t r = x.rank();
  if (r < 2) c.error("needs an input of rank at least 2");
  Var scale = per_channel(c, c.in(1), r), bias = per_channel(c, c.in(2), r);
  if (!training) {
    if (c.num_outputs() > 1) c.error("the running-statistics outputs exist in training mode only (training_mode=1)");
    Var mean = per_channel(c, c.in(3), r), var = per_channel(c, c.in(4), r);
    Var inv = c.b.rsqrt(var + eps);
    return one((x - mean) * (inv * scale) + bias);
  }
  // Training mode: normalized by the batch's statistics (the variance without Bessel's
  // correction); the running statistics blended with them by momentum, as ONNX defines:
  // running = running * momentum + batch * (1 - momentum).
  IntList dims{0};
  for (int64_t i = 2; i < r; ++i) dims.push_back(i);
  Var mean = c.b.mean(x, dims, true);
  Var centered = x - mean;
  Var var = c.b.mean(centered * centered, dims, true);
  std::vector<Out> out = one(centered * (c.b.rsqrt(var + eps) * scale) + bias);
  const Shape channels{x.shape()[1]};
  auto blend = [&](Var running, Var batch) {
    return running * momentum + c.b.reshape(batch, channels) * (1 - momentum);
  };
  if (c.num_outputs() > 1) out.emplace_back(blend(c.in(3), mean));
  if (c.num_outputs() > 2) out.emplace_back(blend(c.in(4), var));
  return out;
}

std::vector<Out> instance_norm(NodeContext& c) {
  double eps = c.attr_float("epsilon", 1e-5);
  Var x = c.in(0);
  int64_t r = x.rank();
  if (r < 3) c.error("needs an input of rank at least 3 ([N, C, D1, ...])");
  IntList dims;
  for (int64_t i = 2; i < r; ++i) dims.push_back(i);
  Var mean = c.b.mean(x, dims, true);
  Var centered = x - mean;
  Var var = c.b.mean(centered * centered, dims, true);
  Var y = centered * c.b.rsqrt(var + eps);
  return one(y * per_channel(c, c.in(1), r) + per_channel(c, c.in(2), r));
}

std::vector<Out> mean_variance_norm(NodeContext& c) {
  Var x = c.in(0);
  IntList axes = c.attr_ints("axes", IntList{0, 2, 3});
  for (int64_t& a : axes) a = normalize_axis(c, a, x.rank());
  Var mean = c.b.mean(x, axes, true);
  Var centered = x - mean;
  Var var = c.b.mean(centered * centered, axes, true);
  // ONNX's reference divides by sqrt(var) + 1e-9
  return one(centered / (c.b.sqrt(var) + 1e-9));
}

Converter global_pool(bool max) {
  return [max](NodeContext& c) {
    Var x = c.in(0);
    IntList dims;
    for (int64_t i = 2; i < x.rank(); ++i) dims.push_back(i);
    if (dims.empty()) c.error("needs an input of rank at least 3 ([N, C, D1, ...])");
    return one(max ? c.b.amax(x, dims, true) : c.b.mean(x, dims, true));
  };
}

std::vector<Out> dropout(NodeContext& c) {
  // Inference, or training with ratio 0: the identity; the mask (output 1) all true. Training
  // with a ratio above 0 would draw from the model's random stream, which ONNX leaves to the
  // runtime (its test cases hold numpy's draws).
  c.ignore_attr("seed");
  c.ignore_attr("is_test");
  double ratio = c.has(1) ? c.known_doubles(1, "ratio").at(0) : c.attr_float("ratio", 0.5);
  if (c.has(2) && c.known_doubles(2, "training_mode").at(0) != 0 && ratio != 0)
    c.unsupported("training_mode=true with a ratio above 0 (kiln imports dropout for inference)");
  Var x = c.in(0);
  std::vector<Out> out{Out(x)};
  if (c.num_outputs() > 1) out.emplace_back(c.b.full(x.shape(), 1, DType::Bool));
  return out;
}

// ---- reductions

enum class Reduce { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

Converter reduce(Reduce kind) {
  return [kind](NodeContext& c) {
    Var x = c.in(0);
    int64_t r = x.rank();
    bool keep = c.attr_int("keepdims", 1) != 0;
    IntList axes;
    bool axes_input = kind == Reduce::Sum && c.opset >= 13;
    if (axes_input) {
      if (c.has(1)) axes = c.known_ints(1, "axes");
      if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return one(x);
    } else {
      axes = c.attr_ints("axes", IntList{});
    }
    if (axes.empty())
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    for (int64_t& a : axes) a = normalize_axis(c, a, r);
    Builder& b = c.b;
    switch (kind) {
      case Reduce::Sum: return one(b.sum(x, axes, keep));
      case Reduce::Mean: return one(b.mean(x, axes, keep));
      case Reduce::Max: return one(b.amax(x, axes, keep));
      case Reduce::Min: return one(b.amin(x, axes, keep));
      case Reduce::L1: return one(b.sum(b.abs(x), axes, keep));
      case Reduce::L2: return one(b.sqrt(b.sum(x * x, axes, keep)));
      case Reduce::SumSquare: return one(b.sum(x * x, axes, keep));
      case Reduce::LogSum: return one(b.log(b.sum(x, axes, keep)));
      case Reduce::LogSumExp: {
        Attrs a;
        a.set("dim", axes);
        a.set("keepdim", keep);
        return one(b.op(Op::Logsumexp, {x}, a));
      }
      case Reduce::Prod: {
        // kiln's prod takes one dim: one after another, from the last (so the dims stay put).
        std::sort(axes.begin(), axes.end());
        for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = b.prod(x, *it, keep);
        if (r == 0) x = b.prod(x);
        return one(x);
      }
    }
    c.error("unknown reduction");
  };
}

Converter arg(bool max) {
  return [max](NodeContext& c) {
    Var x = c.in(0);
    int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.rank());
    bool keep = c.attr_int("keepdims", 1) != 0;
    bool last = c.attr_int("select_last_index", 0) != 0;
    if (!max) {
      // the first minimum is the first maximum of the negation (bools and ints negate exactly
      // as values to compare: not(x) for bool)
      x = x.dtype() == DType::Bool ? c.b.logical_not(x) : c.b.neg(x);
    }
    if (!last) return one(c.b.argmax(x, axis, keep));
    // kiln's argmax takes the first of equal values: the last one is n-1 minus the first one of
    // the input reversed along the axis (a gather of reversed positions).
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    Shape along(x.rank(), 1);
    along[static_cast<size_t>(axis)] = n;
    Var reversed_pos = c.b.reshape(c.b.sub(c.b.scalar(static_cast<double>(n - 1), DType::I64), c.b.arange(n)), along);
    Var flipped = c.b.gather(x, c.b.expand(reversed_pos, x.shape()), axis);
    return one(c.b.sub(c.b.scalar(static_cast<double>(n - 1), DType::I64), c.b.argmax(flipped, axis, keep)));
  };
}

// TopK: k an attribute (opset 1) or an input known at import (10 on); largest and sorted from
// opset 11. kiln's topk puts the lower index first among equal values, as ONNX asks, and its
// values come out sorted, which sorted = 0 (any order) allows too.
std::vector<Out> top_k(NodeContext& c) {
  Var x = c.in(0);
  Attrs a;
  a.set("dim", normalize_axis(c, c.attr_int("axis", -1), std::max<int64_t>(x.rank(), 1)));
  int64_t k = 0;
  if (c.opset >= 10) {
    IntList ks = c.known_ints(1, "K");
    if (ks.size() != 1) c.error(fmt::format("K must hold one value, got {}", ks.size()));
    k = ks[0];
  } else {
    k = c.attr_int("k");
  }
  a.set("k", k);
  a.set("largest", c.opset >= 11 ? c.attr_int("largest", 1) != 0 : true);
  if (c.opset >= 11) a.set("sorted", c.attr_int("sorted", 1) != 0);
  std::vector<Var> r = c.b.op_n(Op::Topk, {x.v}, a);
  return {Out(r[0]), Out(r[1])};
}

// ---- losses

// NegativeLogLikelihoodLoss of log-probabilities x [N, C, d1...] and targets [N, d1...], with
// an optional per-class weight, ignore_index and reduction, written out with gather: the
// class dim moved last, each target's log-probability picked, weighted, reduced (mean divides
// by the sum of the weights of the targets not ignored, as ONNX and PyTorch do).
Var nll(NodeContext& c, Var x, Var target, std::optional<Var> weight) {
  Builder& b = c.b;
  std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none") c.error(fmt::format("reduction '{}'", reduction));
  std::optional<int64_t> ignore;
  if (c.has_attr("ignore_index")) ignore = c.attr_int("ignore_index");
  Shape xs = x.shape();
  if (xs.size() < 2) c.error("needs an input of rank at least 2 ([N, C, ...])");
  int64_t classes = xs[1];
  if (xs.size() > 2) {
    IntList perm{0};
    for (size_t d = 2; d < xs.size(); ++d) perm.push_back(static_cast<int64_t>(d));
    perm.push_back(1);
    x = b.permute(x, perm);
  }
  Shape ts = target.shape();
  int64_t m = numel(ts);
  x = b.reshape(x, {m, classes});
  Var t = b.reshape(b.to(target, DType::I64), {m});
  Var valid = ignore ? b.ne(t, b.scalar(static_cast<double>(*ignore), DType::I64)) : b.full({m}, 1, DType::Bool);
  Var safe = ignore ? b.where(valid, t, b.scalar(0, DType::I64)) : t;
  Var picked = b.reshape(b.gather(x, b.reshape(safe, {m, 1}), 1), {m});
  Var w = weight ? b.op(Op::Embedding, {b.reshape(*weight, {classes, 1}), safe}) : b.full({m}, 1.0, x.dtype());
  if (weight) w = b.reshape(w, {m});
  w = b.where(valid, w, b.scalar(0.0, x.dtype()));
  Var loss = b.neg(picked) * w;
  if (reduction == "none") return b.reshape(loss, ts);
  if (reduction == "sum") return b.sum(loss);
  return b.div(b.sum(loss), b.sum(w));
}

std::vector<Out> nll_loss(NodeContext& c) {
  std::optional<Var> w;
  if (c.has(2)) w = c.in(2);
  return one(nll(c, c.in(0), c.in(1), w));
}

std::vector<Out> softmax_cross_entropy(NodeContext& c) {
  Attrs a;
  a.set("dim", int64_t{1});
  Var logp = c.b.op(Op::LogSoftmax, {c.in(0)}, a);
  std::optional<Var> w;
  if (c.has(2)) w = c.in(2);
  std::vector<Out> out{Out(nll(c, logp, c.in(1), w))};
  if (c.num_outputs() > 1) out.emplace_back(logp);
  return out;
}

// Hardmax: 1 at the first largest value along the axis (opset 13; before it, of the input seen
// as 2-d as Softmax sees it), 0 elsewhere.
std::vector<Out> hardmax(NodeContext& c) {
  Var x = c.in(0);
  Shape s = x.shape();
  int64_t r = x.rank();
  Var v = x;
  int64_t axis;
  if (c.opset >= 13) {
    axis = normalize_axis(c, c.attr_int("axis", -1), r);
  } else {
    int64_t ax = c.attr_int("axis", 1);
    if (ax < 0) ax += r;
    int64_t lead = 1, rest = 1;
    for (int64_t i = 0; i < r; ++i) (i < ax ? lead : rest) *= s[i];
    v = c.b.reshape(x, {lead, rest});
    axis = 1;
  }
  Var idx = c.b.argmax(v, axis, true);
  Shape ar(v.rank(), 1);
  ar[axis] = v.shape()[axis];
  Var pos = c.b.reshape(c.b.arange(v.shape()[axis]), ar);
  Var y = c.b.to(c.b.eq(pos, idx), x.dtype());
  return one(c.b.reshape(y, s));
}

// OneHot(indices, depth, values=[off, on]): a new axis of size depth; negative indices count
// from the end, indices outside [-depth, depth) give all off.
std::vector<Out> one_hot(NodeContext& c) {
  Builder& b = c.b;
  Var idx = b.to(c.in(0), DType::I64);
  int64_t depth = static_cast<int64_t>(c.known_doubles(1, "depth")[0]);
  std::vector<double> values = c.known_doubles(2, "values");
  if (values.size() != 2) c.error("values must hold [off, on]");
  DType dt = c.meta(2).dtype;
  int64_t r = idx.rank() + 1;
  int64_t axis = normalize_axis(c, c.attr_int("axis", -1), r);
  idx = b.where(b.lt(idx, b.scalar(0, DType::I64)), b.add(idx, b.scalar(static_cast<double>(depth), DType::I64)), idx);
  Var u = b.unsqueeze(idx, axis);
  Shape ar(r, 1);
  ar[axis] = depth;
  Var hit = b.eq(b.reshape(b.arange(depth), ar), u);
  return one(b.where(hit, b.scalar(values[1], dt), b.scalar(values[0], dt)));
}

// CumSum(x, axis) with exclusive and reverse: the axis moved last and multiplied by a triangle
// of ones (x[..., j] reaches out[..., i] where j <= i; j < i exclusive; mirrored for reverse),
// one matmul on the BLAS/tensor-core path. Floating point only: an integer sum through a
// floating matmul would round past 2^53 (kiln has no scan op yet).
std::vector<Out> cumsum(NodeContext& c) {
  Builder& b = c.b;
  Var x = c.in(0);
  if (!is_floating(x.dtype()))
    c.unsupported(fmt::format("a cumulative sum of {} (kiln sums floating-point tensors by a triangular matmul)", dtype_name(x.dtype())));
  IntList axes = c.known_ints(1, "axis");
  if (axes.size() != 1) c.error("axis must hold one value");
  const int64_t r = x.rank();
  if (r == 0) c.error("needs an input of rank at least 1");
  const int64_t axis = normalize_axis(c, axes[0], r);
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  const int64_t n = x.shape()[static_cast<size_t>(axis)];
  IntList to_last, back(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis) to_last.push_back(d);
  to_last.push_back(axis);
  for (int64_t d = 0; d < r; ++d) back[static_cast<size_t>(to_last[static_cast<size_t>(d)])] = d;
  Attrs tri;
  tri.set("size", IntList{n, n});
  tri.set("dtype", x.dtype());
  tri.set("diagonal", reverse ? (exclusive ? int64_t{-1} : int64_t{0}) : (exclusive ? int64_t{1} : int64_t{0}));
  Var reach = b.op(reverse ? Op::Tril : Op::Triu, {}, tri);  // reach[j][i]: x[j] is summed into out[i]
  Var y = b.matmul(b.permute(x, to_last), reach);
  return one(b.permute(y, back));
}

// EyeLike(x): ones where column - row = k, in x's 2-d shape and the dtype attribute (else x's).
std::vector<Out> eye_like(NodeContext& c) {
  Builder& b = c.b;
  const TensorMeta m = c.meta(0);
  if (m.rank() != 2) c.error("needs a 2-d input");
  const int64_t k = c.attr_int("k", 0);
  DType dt = m.dtype;
  if (c.has_attr("dtype")) {
    std::optional<DType> d = dtype_of(static_cast<int>(c.attr_int("dtype")));
    if (!d) c.unsupported(fmt::format("dtype {}", elem_type_name(static_cast<int>(c.attr_int("dtype")))));
    dt = *d;
  }
  Var rows = b.reshape(b.arange(m.shape[0]), {m.shape[0], 1}), cols = b.reshape(b.arange(m.shape[1]), {1, m.shape[1]});
  return one(b.to(b.eq(b.sub(cols, rows), b.scalar(static_cast<double>(k), DType::I64)), dt));
}

// LRN: x / (bias + alpha / size * (sum of x^2 over the `size` channels around))^beta, the window
// [c - floor((size-1)/2), c + ceil((size-1)/2)] zero-padded at the ends.
std::vector<Out> lrn(NodeContext& c) {
  Builder& b = c.b;
  Var x = c.in(0);
  const int64_t size = c.attr_int("size");
  const double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75), bias = c.attr_float("bias", 1.0);
  if (size < 1) c.error("size must be at least 1");
  if (x.rank() < 3) c.error("needs an input [N, C, D1, ...]");
  const int64_t channels = x.shape()[1];
  Var padded = b.pad(b.mul(x, x), 1, (size - 1) / 2, size / 2, 0.0);
  Var sum = b.slice(padded, 1, 0, channels);
  for (int64_t k = 1; k < size; ++k) sum = b.add(sum, b.slice(padded, 1, k, k + channels));
  const DType dt = x.dtype();
  Var denom = b.pow(b.add(b.scalar(bias, dt), b.mul(sum, b.scalar(alpha / static_cast<double>(size), dt))), b.scalar(beta, dt));
  return one(b.div(x, denom));
}

}  // namespace

void add_nn_ops(std::vector<OpEntry>& t) {
  t.push_back({"CumSum", cumsum});
  t.push_back({"EyeLike", eye_like});
  t.push_back({"LRN", lrn});
  t.push_back({"NegativeLogLikelihoodLoss", nll_loss});
  t.push_back({"SoftmaxCrossEntropyLoss", softmax_cross_entropy});
  t.push_back({"Hardmax", hardmax});
  t.push_back({"OneHot", one_hot});
  t.push_back({"MatMul", matmul});
  t.push_back({"Einsum", einsum});
  t.push_back({"Gemm", gemm});
  t.push_back({"Softmax", softmax_like(Op::Softmax)});
  t.push_back({"LogSoftmax", softmax_like(Op::LogSoftmax)});
  t.push_back({"LayerNormalization", layer_norm});
  t.push_back({"BatchNormalization", batch_norm});
  t.push_back({"InstanceNormalization", instance_norm});
  t.push_back({"MeanVarianceNormalization", mean_variance_norm});
  t.push_back({"GlobalAveragePool", global_pool(false)});
  t.push_back({"GlobalMaxPool", global_pool(true)});
  t.push_back({"Dropout", dropout});
  t.push_back({"ReduceSum", reduce(Reduce::Sum)});
  t.push_back({"ReduceMean", reduce(Reduce::Mean)});
  t.push_back({"ReduceMax", reduce(Reduce::Max)});
  t.push_back({"ReduceMin", reduce(Reduce::Min)});
  t.push_back({"ReduceProd", reduce(Reduce::Prod)});
  t.push_back({"ReduceL1", reduce(Reduce::L1)});
  t.push_back({"ReduceL2", reduce(Reduce::L2)});
  t.push_back({"ReduceSumSquare", reduce(Reduce::SumSquare)});
  t.push_back({"ReduceLogSum", reduce(Reduce::LogSum)});
  t.push_back({"ReduceLogSumExp", reduce(Reduce::LogSumExp)});
  t.push_back({"ArgMax", arg(true)});
  t.push_back({"ArgMin", arg(false)});
  t.push_back({"TopK", top_k});
}

}  // namespace kiln::onnx
