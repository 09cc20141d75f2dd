// ONNX's Conv, ConvTranspose, MaxPool and AveragePool onto kiln's convolution, max_pool and
// avg_pool: ONNX's begin/end pads (kiln's ops pad both sides alike) and auto_pad resolved here,
// an uneven pad applied to the input (or, for ConvTranspose, cropped off the output).
#include <cmath>
#include <limits>

#include "frontend/onnx/op_table.h"

namespace kiln::onnx {

namespace {


struct Window {
  IntList kernel, stride, dilation, begin, end;
};

// The window attributes of a node over x's spatial dims (all but the first two), with
// auto_pad's SAME_UPPER / SAME_LOWER / VALID resolved (SAME: ceil(L / stride) outputs).
Window window(NodeContext& c, const Shape& x, const IntList& kernel) {
  const int64_t n = static_cast<int64_t>(x.size()) - 2;
  Window w;
  w.kernel = kernel;
  if (static_cast<int64_t>(w.kernel.size()) != n) c.error(fmt::format("kernel_shape {} for {} spatial dims", shape_str(w.kernel), n));
  w.stride = c.attr_ints("strides", IntList(n, 1));
  w.dilation = c.attr_ints("dilations", IntList(n, 1));
  IntList pads = c.attr_ints("pads", IntList(2 * n, 0));
  if (static_cast<int64_t>(w.stride.size()) != n || static_cast<int64_t>(w.dilation.size()) != n || static_cast<int64_t>(pads.size()) != 2 * n)
    c.error("strides, dilations and pads must have one value per spatial dim (pads two)");
  w.begin.assign(pads.begin(), pads.begin() + n);
  w.end.assign(pads.begin() + n, pads.end());
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    w.begin.assign(n, 0);
    w.end.assign(n, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int64_t d = 0; d < n; ++d) {
      int64_t l = x[2 + d], s = w.stride[d], out = (l + s - 1) / s;
      int64_t total = std::max<int64_t>((out - 1) * s + (w.kernel[d] - 1) * w.dilation[d] + 1 - l, 0);
      w.begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[d] = total - w.begin[d];
    }
  } else if (auto_pad != "NOTSET") {
    c.error(fmt::format("auto_pad '{}'", auto_pad));
  }
  return w;
}

// x padded with `fill` in spatial dim d by the part of begin/end beyond `even` (what the op
// pads itself on both sides).
Var pad_extra(NodeContext& c, Var x, const Window& w, const IntList& even, double fill) {
  for (size_t d = 0; d < w.begin.size(); ++d)
    x = c.b.pad(x, static_cast<int64_t>(d) + 2, w.begin[d] - even[d], w.end[d] - even[d], fill);
  return x;
}

IntList even_part(const Window& w) {
  IntList e;
  for (size_t d = 0; d < w.begin.size(); ++d) e.push_back(std::min(w.begin[d], w.end[d]));
  return e;
}

std::vector<Out> conv(NodeContext& c) {
  Shape xs = c.meta(0).shape, ws = c.meta(1).shape;
  if (xs.size() < 3 || xs.size() > 5) c.unsupported(fmt::format("a {}-d input (kiln convolves 1 to 3 spatial dims)", xs.size()));
  Window w = window(c, xs, c.attr_ints("kernel_shape", IntList(ws.begin() + 2, ws.end())));
  int64_t groups = c.attr_int("group", 1);
  IntList even = even_part(w);
  Var x = pad_extra(c, c.in(0), w, even, 0.0);
  Attrs a;
  a.set("stride", w.stride);
  a.set("padding", even);
  a.set("dilation", w.dilation);
  a.set("transposed", false);
  a.set("output_padding", IntList{0});
  a.set("groups", groups);
  std::vector<Value> ins{x, c.in(1)};
  if (c.has(2)) ins.push_back(c.in(2));
  return one(c.b.op(Op::Convolution, ins, a));
}

std::vector<Out> conv_transpose(NodeContext& c) {
  Shape xs = c.meta(0).shape, ws = c.meta(1).shape;
  if (xs.size() < 3 || xs.size() > 5) c.unsupported(fmt::format("a {}-d input (kiln convolves 1 to 3 spatial dims)", xs.size()));
  const int64_t n = static_cast<int64_t>(xs.size()) - 2;
  IntList kernel = c.attr_ints("kernel_shape", IntList(ws.begin() + 2, ws.end()));
  IntList stride = c.attr_ints("strides", IntList(n, 1)), dilation = c.attr_ints("dilations", IntList(n, 1));
  IntList out_pad = c.attr_ints("output_padding", IntList(n, 0));
  IntList pads = c.attr_ints("pads", IntList(2 * n, 0));
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  int64_t groups = c.attr_int("group", 1);
  IntList begin(pads.begin(), pads.begin() + n), end(pads.begin() + n, pads.end());
  // The full output (no padding) has (L - 1) s + d (k - 1) + 1 + output_padding elements; ONNX's
  // pads (given, or derived from output_shape or auto_pad) are cropped off its two ends.
  Shape full(n);
  for (int64_t d = 0; d < n; ++d) full[d] = (xs[2 + d] - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1 + out_pad[d];
  if (c.has_attr("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    IntList want = c.attr_ints("output_shape", IntList{});
    if (want.size() > static_cast<size_t>(n)) want.erase(want.begin(), want.end() - n);
    for (int64_t d = 0; d < n; ++d) {
      int64_t target = want.empty() ? xs[2 + d] * stride[d] : want[d];
      int64_t total = full[d] - target;
      bool upper = auto_pad == "SAME_UPPER";
      begin[d] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
      end[d] = total - begin[d];  // negative: the output grows at the end (no input reaches there)
    }
  } else if (auto_pad == "VALID") {
    begin.assign(n, 0);
    end.assign(n, 0);
  }
  Attrs a;
  a.set("stride", stride);
  a.set("padding", IntList{0});
  a.set("dilation", dilation);
  a.set("transposed", true);
  a.set("output_padding", IntList{0});
  a.set("groups", groups);
  // output_padding is added to the end here (kiln's must stay below the stride or dilation;
  // ONNX's end pad may exceed it).
  std::vector<Value> ins{c.in(0), c.in(1)};
  Var y = c.b.op(Op::Convolution, ins, a);
  for (int64_t d = 0; d < n; ++d) {
    // output_padding and a negative end pad grow the end; begin and a positive end crop
    y = c.b.pad(y, 2 + d, -begin[d], out_pad[d] - end[d], 0.0);
  }
  if (c.has(2)) {
    Shape bs{y.shape()[1]};
    for (int64_t d = 0; d < n; ++d) bs.push_back(1);
    y = c.b.add(y, c.b.reshape(c.in(2), bs));
  }
  return one(y);
}

// MaxPool's Indices output: for each window, the position of its first maximum (in the
// window's row-major order) in the input flattened whole (N, C, then the spatial dims row-major,
// or column-major with storage_order 1).
// Each kernel offset's strided view of the -inf-padded input is stacked on a last dim; the
// first argmax over it picks the offset, from which the spatial coordinates follow.
Var max_pool_indices(NodeContext& c, Var input, const Window& w, const Shape& out, bool column_major) {
  Builder& b = c.b;
  const int64_t n = static_cast<int64_t>(w.kernel.size()), r = n + 2;
  const Shape xs = input.shape();
  Var xp = input;
  for (int64_t d = 0; d < n; ++d) {
    // padded enough for every window of the output (ceil_mode's last one may run past the pads)
    const int64_t need = (out[2 + d] - 1) * w.stride[d] + (w.kernel[d] - 1) * w.dilation[d] + 1;
    const int64_t end = std::max(w.end[d], need - xs[2 + d] - w.begin[d]);
    xp = b.pad(xp, 2 + d, w.begin[d], end, -std::numeric_limits<double>::infinity());
  }
  int64_t offsets = 1;
  for (int64_t k : w.kernel) offsets *= k;
  std::vector<Value> views;
  std::vector<std::vector<int64_t>> coords;  // each offset's kernel coordinates
  for (int64_t o = 0; o < offsets; ++o) {
    std::vector<int64_t> k(static_cast<size_t>(n));
    for (int64_t d = n - 1, rest = o; d >= 0; --d) {
      k[static_cast<size_t>(d)] = rest % w.kernel[d];
      rest /= w.kernel[d];
    }
    Var v = xp;
    for (int64_t d = 0; d < n; ++d) {
      const int64_t start = k[static_cast<size_t>(d)] * w.dilation[d];
      v = b.slice(v, 2 + d, start, start + (out[2 + d] - 1) * w.stride[d] + 1, w.stride[d]);
    }
    views.push_back(b.unsqueeze(v, r).v);
    coords.push_back(k);
  }
  Var which = b.argmax(b.cat(views, r), r, false);  // [N, C, out...]: the offset of the first maximum
  Shape along_k(static_cast<size_t>(r + 1), 1);
  along_k[static_cast<size_t>(r)] = offsets;
  Var pick = b.to(b.eq(b.unsqueeze(which, r), b.reshape(b.arange(offsets), along_k)), DType::I64);  // one-hot over offsets
  // flat = ((n * C + c) * L1 + l1) * L2 + l2 ..., with l_d = o_d * stride - begin + k_d * dilation
  auto coordinate = [&](int64_t dim) {  // the index of output dim `dim` broadcast over [N, C, out...]
    Shape s(static_cast<size_t>(r), 1);
    s[static_cast<size_t>(dim)] = out[static_cast<size_t>(dim)];
    return b.reshape(b.arange(out[static_cast<size_t>(dim)]), s);
  };
  Var batch_channel = b.add(b.mul(coordinate(0), b.scalar(static_cast<double>(xs[1]), DType::I64)), coordinate(1));
  std::vector<Var> spatial;  // l_d per spatial dim
  for (int64_t d = 0; d < n; ++d) {
    std::vector<double> offs;
    for (const auto& k : coords) offs.push_back(static_cast<double>(k[static_cast<size_t>(d)] * w.dilation[d]));
    Var koff = b.sum(b.mul(pick, b.reshape(constant_1d(b, offs, DType::I64), along_k)), {r});
    Var l = b.add(b.sub(b.mul(coordinate(2 + d), b.scalar(static_cast<double>(w.stride[d]), DType::I64)),
                        b.scalar(static_cast<double>(w.begin[d]), DType::I64)),
                  koff);
    spatial.push_back(l);
  }
  // storage_order 0: the spatial dims row-major (the last fastest); 1: column-major (the first
  // fastest); batch and channel outermost either way.
  Var flat = batch_channel;
  int64_t plane = 1;
  for (int64_t d = 0; d < n; ++d) plane *= xs[2 + d];
  flat = b.mul(flat, b.scalar(static_cast<double>(plane), DType::I64));
  int64_t stride = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = column_major ? i : n - 1 - i;
    flat = b.add(flat, b.mul(spatial[static_cast<size_t>(d)], b.scalar(static_cast<double>(stride), DType::I64)));
    stride *= xs[2 + d];
  }
  return flat;
}

Converter pool(bool max) {
  return [max](NodeContext& c) {
    Shape xs = c.meta(0).shape;
    if (xs.size() < 3 || xs.size() > 5) c.unsupported(fmt::format("a {}-d input (kiln pools 1 to 3 spatial dims)", xs.size()));
    const bool column_major = c.attr_int("storage_order", 0) != 0;
    bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
    Window w = window(c, xs, c.attr_ints("kernel_shape"));
    bool include_pad = !max && c.attr_int("count_include_pad", 0) != 0;
    IntList even = even_part(w);
    // kiln pads at most half the kernel on each side, the same on both: the rest is padded here
    // (-inf for max; for avg only where the padding counts, zeros counted in the divisor).
    for (size_t d = 0; d < even.size(); ++d) even[d] = std::min(even[d], w.kernel[d] / 2);
    bool uneven = false;
    for (size_t d = 0; d < even.size(); ++d) uneven |= w.begin[d] != even[d] || w.end[d] != even[d];
    // Uneven pads not counted in the divisor: every pad is made here with zeros, the window
    // sums divided by how many of the input's own elements each window holds (the same pool
    // over a mask of ones, which depends on shapes only).
    const bool count_valid = uneven && !max && !include_pad;
    if (count_valid) std::fill(even.begin(), even.end(), 0);
    Var x = pad_extra(c, c.in(0), w, even, max ? -std::numeric_limits<double>::infinity() : 0.0);
    Attrs a;
    a.set("kernel_size", w.kernel);
    a.set("stride", w.stride);
    a.set("padding", even);
    a.set("ceil_mode", ceil_mode);
    if (max) {
      a.set("dilation", w.dilation);
      Var y = c.b.op(Op::MaxPool, {x}, a);
      if (c.num_outputs() < 2) return one(y);
      return std::vector<Out>{Out(y), Out(max_pool_indices(c, c.in(0), w, y.shape(), column_major))};
    }
    for (int64_t d : w.dilation)
      if (d != 1) c.unsupported("dilations in AveragePool");
    a.set("count_include_pad", include_pad || count_valid);
    Var y = c.b.op(Op::AvgPool, {x}, a);
    if (!count_valid) return one(y);
    Shape ms(xs.size(), 1);
    std::copy(xs.begin() + 2, xs.end(), ms.begin() + 2);
    Var mask = pad_extra(c, c.b.full(ms, 1.0, x.dtype()), w, even, 0.0);
    return one(c.b.div(y, c.b.op(Op::AvgPool, {mask}, a)));
  };
}

}  // namespace

void add_conv_ops(std::vector<OpEntry>& t) {
  t.push_back({"Conv", conv});
  t.push_back({"ConvTranspose", conv_transpose});
  t.push_back({"MaxPool", pool(true)});
  t.push_back({"AveragePool", pool(false)});
}

}  // namespace kiln::onnx
