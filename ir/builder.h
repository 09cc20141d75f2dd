#pragma once
// Builder: adds nodes to a graph at an insertion point, one method per op, so that graph
// rewrites (derivative rules, decompositions, optimizer steps) read like the math they build.
// Every call goes through Graph::add_node, so each node is type-checked as it is made and a
// bad combination throws kiln::Error naming the op and the shapes.
//
// Var pairs a Value with its Builder so that rules can use operators: `g * (1 - y * y)`.
// A plain number next to a Var becomes a 0-d constant of the Var's dtype (PyTorch's rule for
// Python scalars: it never promotes the tensor).
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

class Builder;

struct Var {
  Builder* b = nullptr;
  Value v;
  Var() = default;
  Var(Builder* builder, Value value) : b(builder), v(value) {}
  operator Value() const { return v; }
  explicit operator bool() const { return static_cast<bool>(v); }
  const TensorMeta& meta() const { return v.meta(); }
  const Shape& shape() const { return v.meta().shape; }
  DType dtype() const { return v.meta().dtype; }
  int64_t rank() const { return v.meta().rank(); }
};

class Builder {
 public:
  // Nodes go at the end of `g`, or just before `before`.
  explicit Builder(Graph& g, Node* before = nullptr) : g_(g), before_(before) {}
  Graph& graph() { return g_; }
  void set_insertion_point(Node* before) { before_ = before; }
  // Names given to new results get this prefix (e.g. "grad_"); empty = the op's name.
  void set_name_prefix(std::string p) { prefix_ = std::move(p); }

  Var wrap(Value v) { return Var(this, v); }
  Var op(Op op, std::vector<Value> inputs, const Attrs& attrs = {}, const std::string& name = "");
  // An op by name ("mylib::scaled_swish": custom ops); kiln::Error naming an unknown one.
  Var op(std::string_view op_name, std::vector<Value> inputs, const Attrs& attrs = {}, const std::string& name = "");
  std::vector<Var> op_n(Op op, std::vector<Value> inputs, const Attrs& attrs = {}, const std::string& name = "");

  // ---- constants
  Var scalar(double v, DType dt);                            // 0-d full
  Var full(const Shape& shape, double v, DType dt);
  Var zeros(const Shape& shape, DType dt) { return full(shape, 0.0, dt); }
  Var zeros_like(Value v) { return full(v.meta().shape, 0.0, v.meta().dtype); }
  Var ones_like(Value v) { return full(v.meta().shape, 1.0, v.meta().dtype); }
  Var arange(int64_t end, DType dt = DType::I64);

  // ---- pointwise
  Var neg(Value x) { return op(Op::Neg, {x}); }
  Var abs(Value x) { return op(Op::Abs, {x}); }
  Var exp(Value x) { return op(Op::Exp, {x}); }
  Var log(Value x) { return op(Op::Log, {x}); }
  Var sqrt(Value x) { return op(Op::Sqrt, {x}); }
  Var rsqrt(Value x) { return op(Op::Rsqrt, {x}); }
  Var reciprocal(Value x) { return op(Op::Reciprocal, {x}); }
  Var sin(Value x) { return op(Op::Sin, {x}); }
  Var cos(Value x) { return op(Op::Cos, {x}); }
  Var tanh(Value x) { return op(Op::Tanh, {x}); }
  Var sigmoid(Value x) { return op(Op::Sigmoid, {x}); }
  Var erf(Value x) { return op(Op::Erf, {x}); }
  Var log1p(Value x) { return op(Op::Log1p, {x}); }
  Var relu(Value x) { return op(Op::Relu, {x}); }
  Var gelu(Value x, const std::string& approximate = "none") { return op(Op::Gelu, {x}, attrs1("approximate", approximate)); }
  Var silu(Value x) { return op(Op::Silu, {x}); }
  Var sign(Value x) { return op(Op::Sign, {x}); }
  Var floor(Value x) { return op(Op::Floor, {x}); }
  Var ceil(Value x) { return op(Op::Ceil, {x}); }
  Var round(Value x) { return op(Op::Round, {x}); }
  Var trunc(Value x) { return op(Op::Trunc, {x}); }
  Var log2(Value x) { return op(Op::Log2, {x}); }
  Var exp2(Value x) { return op(Op::Exp2, {x}); }
  Var square(Value x) { return op(Op::Square, {x}); }
  Var logical_not(Value x) { return op(Op::LogicalNot, {x}); }
  Var bitwise_not(Value x) { return op(Op::BitwiseNot, {x}); }
  Var erfinv(Value x) { return op(Op::Erfinv, {x}); }
  Var to(Value x, DType dt);  // no node when x already has dtype dt
  Var add(Value a, Value b) { return op(Op::Add, {a, b}); }
  Var sub(Value a, Value b) { return op(Op::Sub, {a, b}); }
  Var mul(Value a, Value b) { return op(Op::Mul, {a, b}); }
  Var div(Value a, Value b) { return op(Op::Div, {a, b}); }
  Var pow(Value a, Value b) { return op(Op::Pow, {a, b}); }
  Var maximum(Value a, Value b) { return op(Op::Maximum, {a, b}); }
  Var minimum(Value a, Value b) { return op(Op::Minimum, {a, b}); }
  Var fmod(Value a, Value b) { return op(Op::Fmod, {a, b}); }
  Var remainder(Value a, Value b) { return op(Op::Remainder, {a, b}); }
  Var atan2(Value a, Value b) { return op(Op::Atan2, {a, b}); }
  Var eq(Value a, Value b) { return op(Op::Eq, {a, b}); }
  Var ne(Value a, Value b) { return op(Op::Ne, {a, b}); }
  Var lt(Value a, Value b) { return op(Op::Lt, {a, b}); }
  Var le(Value a, Value b) { return op(Op::Le, {a, b}); }
  Var gt(Value a, Value b) { return op(Op::Gt, {a, b}); }
  Var ge(Value a, Value b) { return op(Op::Ge, {a, b}); }
  Var logical_and(Value a, Value b) { return op(Op::LogicalAnd, {a, b}); }
  Var bitwise_and(Value a, Value b) { return op(Op::BitwiseAnd, {a, b}); }
  Var bitwise_or(Value a, Value b) { return op(Op::BitwiseOr, {a, b}); }
  Var bitwise_xor(Value a, Value b) { return op(Op::BitwiseXor, {a, b}); }
  Var logical_or(Value a, Value b) { return op(Op::LogicalOr, {a, b}); }
  Var where(Value cond, Value a, Value b) { return op(Op::Where, {cond, a, b}); }
  // Bounds and fill values are stored as ints for integer tensors when they are whole numbers
  // (so an int clamp stays int), else as floats.
  Var clamp(Value x, std::optional<double> min, std::optional<double> max);
  Var masked_fill(Value x, Value mask, double value);

  // ---- reductions (dims may be negative; empty = all)
  Var sum(Value x, const IntList& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
  Var mean(Value x, const IntList& dims = {}, bool keepdim = false);
  Var amax(Value x, const IntList& dims = {}, bool keepdim = false);
  Var amin(Value x, const IntList& dims = {}, bool keepdim = false);
  Var var(Value x, const IntList& dims = {}, double correction = 1, bool keepdim = false);
  Var prod(Value x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
  Var argmax(Value x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

  // ---- views
  Var reshape(Value x, const Shape& shape);  // no node when the shape is unchanged
  Var expand(Value x, const Shape& shape);   // no node when the shape is unchanged
  Var permute(Value x, const IntList& dims);
  Var transpose(Value x, int64_t d0, int64_t d1) { return op(Op::Transpose, {x}, attrs2("dim0", d0, "dim1", d1)); }
  Var unsqueeze(Value x, int64_t dim) { return op(Op::Unsqueeze, {x}, attrs1("dim", dim)); }
  Var squeeze(Value x, const IntList& dims);
  Var slice(Value x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
  Var cat(const std::vector<Value>& xs, int64_t dim);
  // x with `lo` and `hi` elements of `fill` added before and after along dim (a cat of full
  // blocks); a negative amount crops instead. No node when both are 0.
  Var pad(Value x, int64_t dim, int64_t lo, int64_t hi, double fill);
  std::vector<Var> split(Value x, const IntList& sizes, int64_t dim);
  Var contiguous(Value x) { return op(Op::Contiguous, {x}); }

  // ---- linear algebra and indexing
  Var matmul(Value a, Value b) { return op(Op::Matmul, {a, b}); }
  Var bmm(Value a, Value b) { return op(Op::Bmm, {a, b}); }
  Var gather(Value x, Value index, int64_t dim) { return op(Op::Gather, {x, index}, attrs1("dim", dim)); }
  Var scatter(Value x, Value index, Value src, int64_t dim) { return op(Op::Scatter, {x, index, src}, attrs1("dim", dim)); }
  Var scatter_add(Value x, Value index, Value src, int64_t dim) {
    return op(Op::ScatterAdd, {x, index, src}, attrs1("dim", dim));
  }

  // ---- helpers for gradients
  // Sums x over the dims that broadcasting added or stretched, so it gets `shape` (the
  // gradient of an operand that was broadcast to x's shape). No node when shapes agree.
  Var sum_to(Value x, const Shape& shape);
  // x expanded back over the dims a reduction removed (`dims` as given to it; empty = all),
  // then broadcast to `shape`: the gradient of a sum.
  Var unreduce(Value x, const Shape& shape, const IntList& dims, bool keepdim);
  // x (a reduction's result over `dims` of a tensor of `shape`) with the removed dims put
  // back as size 1, not expanded: what broadcasts against the reduction's input.
  Var restore_reduced_dims(Value x, const Shape& shape, const IntList& dims, bool keepdim);

 private:
  static Attrs attrs1(const char* k, AttrValue v) {
    Attrs a;
    a.set(k, std::move(v));
    return a;
  }
  static Attrs attrs2(const char* k1, AttrValue v1, const char* k2, AttrValue v2) {
    Attrs a = attrs1(k1, std::move(v1));
    a.set(k2, std::move(v2));
    return a;
  }
  Graph& g_;
  Node* before_;
  std::string prefix_;
};

// Operators on Vars (both sides Vars, or a Var and a number).
Var operator+(Var a, Var b);
Var operator-(Var a, Var b);
Var operator*(Var a, Var b);
Var operator/(Var a, Var b);
Var operator-(Var a);
Var operator+(Var a, double b);
Var operator-(Var a, double b);
Var operator*(Var a, double b);
Var operator/(Var a, double b);
Var operator+(double a, Var b);
Var operator-(double a, Var b);
Var operator*(double a, Var b);
Var operator/(double a, Var b);

}  // namespace kiln
