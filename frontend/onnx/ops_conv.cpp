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

Converter pool(bool max) {
  return [max](NodeContext& c) {
    Shape xs = c.meta(0).shape;
    if (xs.size() < 3 || xs.size() > 5) c.unsupported(fmt::format("a {}-d input (kiln pools 1 to 3 spatial dims)", xs.size()));
    if (max && c.num_outputs() > 1) c.unsupported("the Indices output is not supported");
    c.require_attr_int("storage_order", 0, "row-major indices only");
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
      return one(c.b.op(Op::MaxPool, {x}, a));
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
