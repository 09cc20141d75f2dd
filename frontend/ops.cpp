// The op wrappers: each packs its arguments for call(); the dispatcher does the rest.
#include "frontend/ops.h"

#include "frontend/dispatcher.h"
#include "ir/error.h"

namespace kiln {

std::vector<Tensor> call(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return dispatch(op, inputs, attrs);
}

Tensor call1(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<Tensor> out = call(op, inputs, attrs);
  KILN_INTERNAL_ASSERT(out.size() == 1, "call1 is used for single-result ops");
  return out[0];
}

namespace {

// An attribute that may be None (left out of the Attrs).
struct AttrArg {
  std::string name;
  std::optional<AttrValue> value;
};
Attrs attrs(std::initializer_list<AttrArg> args) {
  Attrs a;
  for (const AttrArg& arg : args)
    if (arg.value) a.set(arg.name, *arg.value);
  return a;
}
template <typename T>
std::optional<AttrValue> opt(const std::optional<T>& v) {
  return v ? std::optional<AttrValue>(AttrValue(*v)) : std::nullopt;
}
std::optional<AttrValue> opt(const std::optional<Scalar>& v) {
  return v ? std::optional<AttrValue>(v->attr()) : std::nullopt;
}
std::optional<AttrValue> opt(const Dims& d) { return opt(d.get()); }

// A binary op's operands as tensors: a number becomes a 0-d `full` typed after the other side.
std::vector<Tensor> operands(Op op, const Operand& a, const Operand& b) {
  if (!a.is_tensor() && !b.is_tensor()) fail("{} needs at least one tensor operand, got two numbers", op_name(op));
  return {a.is_tensor() ? a.tensor() : wrap_scalar(a.scalar(), b.tensor()),
          b.is_tensor() ? b.tensor() : wrap_scalar(b.scalar(), a.tensor())};
}
Tensor binary(Op op, const Operand& a, const Operand& b) { return call1(op, operands(op, a, b)); }

}  // namespace

Tensor wrap_scalar(const Scalar& s, const Tensor& other) {
  DType t = other.dtype();
  DType dt = s.is_bool()       ? DType::Bool
             : s.is_floating() ? (is_floating(t) ? t : kDefaultFloat)
                               : (t == DType::Bool ? DType::I64 : t);
  return full({}, s, dt);
}

// ---- pointwise unary: the same one-line wrapper for each row
#define KILN_UNARY_OPS(X)                                                                                         \
  X(neg, Neg) X(abs, Abs) X(exp, Exp) X(log, Log) X(log1p, Log1p) X(sqrt, Sqrt) X(rsqrt, Rsqrt)                   \
  X(reciprocal, Reciprocal) X(sin, Sin) X(cos, Cos) X(tanh, Tanh) X(sigmoid, Sigmoid) X(relu, Relu) X(silu, Silu) \
  X(square, Square) X(erf, Erf) X(sign, Sign) X(logical_not, LogicalNot) X(floor, Floor) X(ceil, Ceil)           \
  X(round, Round) X(trunc, Trunc) X(log2, Log2) X(exp2, Exp2) X(erfinv, Erfinv) X(bitwise_not, BitwiseNot)
#define KILN_DEFINE_UNARY(fn, E) \
  Tensor fn(const Tensor& self) { return call1(Op::E, {self}); }
KILN_UNARY_OPS(KILN_DEFINE_UNARY)
#undef KILN_DEFINE_UNARY
#undef KILN_UNARY_OPS

Tensor gelu(const Tensor& self, const std::string& approximate) {
  return call1(Op::Gelu, {self}, attrs({{"approximate", approximate}}));
}
Tensor hardsigmoid(const Tensor& self) { return call1(Op::Hardsigmoid, {self}, attrs({})); }
Tensor hardswish(const Tensor& self) { return call1(Op::Hardswish, {self}, attrs({})); }
Tensor leaky_relu(const Tensor& self, double negative_slope) {
  return call1(Op::LeakyRelu, {self}, attrs({{"negative_slope", negative_slope}}));
}
Tensor elu(const Tensor& self, double alpha) { return call1(Op::Elu, {self}, attrs({{"alpha", alpha}})); }
Tensor selu(const Tensor& self) { return call1(Op::Selu, {self}, attrs({})); }
Tensor softplus(const Tensor& self, double beta, double threshold) {
  return call1(Op::Softplus, {self}, attrs({{"beta", beta}, {"threshold", threshold}}));
}
Tensor mish(const Tensor& self) { return call1(Op::Mish, {self}, attrs({})); }
Tensor isnan(const Tensor& self) { return call1(Op::Isnan, {self}, attrs({})); }
Tensor isinf(const Tensor& self) { return call1(Op::Isinf, {self}, attrs({})); }
Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf) {
  Attrs a;
  if (nan) a.set("nan", *nan);
  if (posinf) a.set("posinf", *posinf);
  if (neginf) a.set("neginf", *neginf);
  return call1(Op::NanToNum, {self}, a);
}
Tensor to(const Tensor& self, DType dtype) { return call1(Op::To, {self}, attrs({{"dtype", dtype}})); }

// ---- pointwise binary
#define KILN_BINARY_OPS(X)                                                                                    \
  X(add, Add) X(sub, Sub) X(mul, Mul) X(div, Div) X(pow, Pow) X(maximum, Maximum) X(minimum, Minimum) X(eq, Eq) \
  X(ne, Ne) X(lt, Lt) X(le, Le) X(gt, Gt) X(ge, Ge) X(logical_and, LogicalAnd) X(logical_or, LogicalOr)     \
  X(fmod, Fmod) X(remainder, Remainder) X(atan2, Atan2) X(bitwise_and, BitwiseAnd) X(bitwise_or, BitwiseOr)  \
  X(bitwise_xor, BitwiseXor)
#define KILN_DEFINE_BINARY(fn, E) \
  Tensor fn(const Operand& a, const Operand& b) { return binary(Op::E, a, b); }
KILN_BINARY_OPS(KILN_DEFINE_BINARY)
#undef KILN_DEFINE_BINARY
#undef KILN_BINARY_OPS

Tensor where(const Tensor& condition, const Operand& self, const Operand& other) {
  std::vector<Tensor> xy = operands(Op::Where, self, other);
  return call1(Op::Where, {condition, xy[0], xy[1]});
}
Tensor clamp(const Tensor& self, std::optional<Scalar> min, std::optional<Scalar> max) {
  return call1(Op::Clamp, {self}, attrs({{"min", opt(min)}, {"max", opt(max)}}));
}
Tensor masked_fill(const Tensor& self, const Tensor& mask, Scalar value) {
  return call1(Op::MaskedFill, {self, mask}, attrs({{"value", value.attr()}}));
}

// ---- reductions
Tensor sum(const Tensor& self, const Dims& dim, bool keepdim, std::optional<DType> dtype) {
  return call1(Op::Sum, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}, {"dtype", opt(dtype)}}));
}
Tensor mean(const Tensor& self, const Dims& dim, bool keepdim, std::optional<DType> dtype) {
  return call1(Op::Mean, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}, {"dtype", opt(dtype)}}));
}
Tensor amax(const Tensor& self, const Dims& dim, bool keepdim) {
  return call1(Op::Amax, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}}));
}
Tensor logsumexp(const Tensor& self, const Dims& dim, bool keepdim) {
  return call1(Op::Logsumexp, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}}));
}
Tensor amin(const Tensor& self, const Dims& dim, bool keepdim) {
  return call1(Op::Amin, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}}));
}
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return call1(Op::Argmax, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}}));
}
Tensor var(const Tensor& self, const Dims& dim, Scalar correction, bool keepdim) {
  return call1(Op::Var, {self}, attrs({{"dim", opt(dim)}, {"correction", correction.attr()}, {"keepdim", keepdim}}));
}
Tensor prod(const Tensor& self, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) {
  return call1(Op::Prod, {self}, attrs({{"dim", opt(dim)}, {"keepdim", keepdim}, {"dtype", opt(dtype)}}));
}

// ---- views and shape ops
Tensor reshape(const Tensor& self, const IntList& shape) { return call1(Op::Reshape, {self}, attrs({{"shape", shape}})); }
Tensor permute(const Tensor& self, const IntList& dims) { return call1(Op::Permute, {self}, attrs({{"dims", dims}})); }
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  return call1(Op::Transpose, {self}, attrs({{"dim0", dim0}, {"dim1", dim1}}));
}
Tensor expand(const Tensor& self, const IntList& size) { return call1(Op::Expand, {self}, attrs({{"size", size}})); }
Tensor squeeze(const Tensor& self, const Dims& dim) { return call1(Op::Squeeze, {self}, attrs({{"dim", opt(dim)}})); }
Tensor unsqueeze(const Tensor& self, int64_t dim) { return call1(Op::Unsqueeze, {self}, attrs({{"dim", dim}})); }
Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  return call1(Op::Slice, {self}, attrs({{"dim", dim}, {"start", opt(start)}, {"end", opt(end)}, {"step", step}}));
}
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { return call1(Op::Cat, tensors, attrs({{"dim", dim}})); }
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  return call(Op::Split, {self}, attrs({{"split_size", split_size}, {"dim", dim}}));
}
std::vector<Tensor> split(const Tensor& self, const IntList& split_sizes, int64_t dim) {
  return call(Op::Split, {self}, attrs({{"split_sizes", split_sizes}, {"dim", dim}}));
}
Tensor contiguous(const Tensor& self) { return call1(Op::Contiguous, {self}); }

// ---- creation
Tensor full(const IntList& size, Scalar fill_value, std::optional<DType> dtype) {
  return call1(Op::Full, {}, attrs({{"size", size}, {"fill_value", fill_value.attr()}, {"dtype", opt(dtype)}}));
}
Tensor zeros(const IntList& size, DType dtype) { return call1(Op::Zeros, {}, attrs({{"size", size}, {"dtype", dtype}})); }
Tensor ones(const IntList& size, DType dtype) { return call1(Op::Ones, {}, attrs({{"size", size}, {"dtype", dtype}})); }
Tensor arange(Scalar end, std::optional<DType> dtype) {
  return call1(Op::Arange, {}, attrs({{"end", end.attr()}, {"dtype", opt(dtype)}}));
}
Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  return call1(Op::Arange, {},
               attrs({{"end", end.attr()}, {"start", start.attr()}, {"step", step.attr()}, {"dtype", opt(dtype)}}));
}
Tensor constant(const IntList& size, DType dtype, const FloatList& values) {
  return call1(Op::Constant, {}, attrs({{"size", size}, {"dtype", dtype}, {"values", values}}));
}
Tensor rand(const IntList& size, int64_t seed, DType dtype) {
  return call1(Op::Rand, {}, attrs({{"size", size}, {"seed", seed}, {"dtype", dtype}}));
}

// ---- linear algebra
Tensor matmul(const Tensor& self, const Tensor& other) { return call1(Op::Matmul, {self, other}); }
Tensor bmm(const Tensor& self, const Tensor& mat2) { return call1(Op::Bmm, {self, mat2}); }
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  return call1(Op::Einsum, operands, attrs({{"equation", equation}}));
}
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  return bias ? call1(Op::Linear, {input, weight, *bias}) : call1(Op::Linear, {input, weight});
}
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha) {
  return call1(Op::Addmm, {self, mat1, mat2}, attrs({{"beta", beta.attr()}, {"alpha", alpha.attr()}}));
}

// ---- normalizations beside layer_norm
Tensor rms_norm(const Tensor& input, const IntList& normalized_shape, const std::optional<Tensor>& weight, std::optional<double> eps) {
  Attrs a = attrs({{"normalized_shape", normalized_shape}, {"eps", opt(eps)}});
  return weight ? call1(Op::RmsNorm, {input, *weight}, a) : call1(Op::RmsNorm, {input}, a);
}
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps) {
  Attrs a = attrs({{"num_groups", num_groups}, {"eps", eps}});
  if (bias && !weight) fail("group_norm: a bias needs a weight (give ones)");
  if (bias) return call1(Op::GroupNorm, {input, *weight, *bias}, a);
  return weight ? call1(Op::GroupNorm, {input, *weight}, a) : call1(Op::GroupNorm, {input}, a);
}

// ---- convolution and pooling
namespace {
Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const IntList& stride,
                   const IntList& padding, const IntList& dilation, bool transposed, const IntList& output_padding, int64_t groups) {
  Attrs a = attrs({{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"transposed", transposed},
                   {"output_padding", output_padding}, {"groups", groups}});
  return bias ? call1(Op::Convolution, {input, weight, *bias}, a) : call1(Op::Convolution, {input, weight}, a);
}
}  // namespace
Tensor conv(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const IntList& stride,
            const IntList& padding, const IntList& dilation, int64_t groups) {
  return convolution(input, weight, bias, stride, padding, dilation, false, {0}, groups);
}
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const IntList& stride,
                      const IntList& padding, const IntList& output_padding, int64_t groups, const IntList& dilation) {
  return convolution(input, weight, bias, stride, padding, dilation, true, output_padding, groups);
}
Tensor max_pool(const Tensor& self, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                const IntList& dilation, bool ceil_mode) {
  return call1(Op::MaxPool, {self}, attrs({{"kernel_size", kernel_size}, {"stride", stride}, {"padding", padding},
                                          {"dilation", dilation}, {"ceil_mode", ceil_mode}}));
}
Tensor avg_pool(const Tensor& self, const IntList& kernel_size, const IntList& stride, const IntList& padding, bool ceil_mode,
                bool count_include_pad) {
  return call1(Op::AvgPool, {self}, attrs({{"kernel_size", kernel_size}, {"stride", stride}, {"padding", padding},
                                          {"ceil_mode", ceil_mode}, {"count_include_pad", count_include_pad}}));
}

// ---- composites
Tensor tril(const Tensor& self, int64_t diagonal) { return call1(Op::Tril, {self}, attrs({{"diagonal", diagonal}})); }
Tensor triu(const Tensor& self, int64_t diagonal) { return call1(Op::Triu, {self}, attrs({{"diagonal", diagonal}})); }
Tensor tril(const IntList& size, int64_t diagonal, std::optional<DType> dtype) {
  return call1(Op::Tril, {}, attrs({{"diagonal", diagonal}, {"size", size}, {"dtype", opt(dtype)}}));
}
Tensor triu(const IntList& size, int64_t diagonal, std::optional<DType> dtype) {
  return call1(Op::Triu, {}, attrs({{"diagonal", diagonal}, {"size", size}, {"dtype", opt(dtype)}}));
}
Tensor softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  return call1(Op::Softmax, {self}, attrs({{"dim", dim}, {"dtype", opt(dtype)}}));
}
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype) {
  return call1(Op::LogSoftmax, {self}, attrs({{"dim", dim}, {"dtype", opt(dtype)}}));
}
Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  // The schema's optional tensors are trailing: a bias needs a weight before it.
  if (bias && !weight) fail("layer_norm: a bias without a weight is not supported");
  std::vector<Tensor> in{input};
  if (weight) in.push_back(*weight);
  if (bias) in.push_back(*bias);
  return call1(Op::LayerNorm, in, attrs({{"normalized_shape", normalized_shape}, {"eps", eps}}));
}
Tensor all_reduce(const Tensor& self, int64_t world_size, const std::string& op) {
  return call1(Op::AllReduce, {self}, attrs({{"world_size", world_size}, {"op", op}}));
}
Tensor all_gather(const Tensor& self, int64_t world_size, int64_t dim) {
  return call1(Op::AllGather, {self}, attrs({{"world_size", world_size}, {"dim", dim}}));
}
Tensor reduce_scatter(const Tensor& self, int64_t world_size, int64_t dim, const std::string& op) {
  return call1(Op::ReduceScatter, {self}, attrs({{"world_size", world_size}, {"dim", dim}, {"op", op}}));
}
Tensor broadcast(const Tensor& self, int64_t world_size, int64_t src) {
  return call1(Op::Broadcast, {self}, attrs({{"world_size", world_size}, {"src", src}}));
}
Tensor reduce(const Tensor& self, int64_t world_size, int64_t dst, const std::string& op) {
  return call1(Op::Reduce, {self}, attrs({{"world_size", world_size}, {"dst", dst}, {"op", op}}));
}
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  return call1(Op::Gather, {self, index}, attrs({{"dim", dim}}));
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(Op::Scatter, {self, index, src}, attrs({{"dim", dim}}));
}
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  return call1(Op::ScatterReduce, {self, index, src}, attrs({{"dim", dim}, {"reduce", reduce}, {"include_self", include_self}}));
}
Tensor scatter_fold(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  return call1(Op::ScatterFold, {self, index, src}, attrs({{"dim", dim}, {"reduce", reduce}}));
}
ValuesIndices sort(const Tensor& self, int64_t dim, bool descending, bool stable) {
  std::vector<Tensor> r = call(Op::Sort, {self}, attrs({{"dim", dim}, {"descending", descending}, {"stable", stable}}));
  return {r[0], r[1]};
}
ValuesIndices topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  std::vector<Tensor> r = call(Op::Topk, {self}, attrs({{"k", k}, {"dim", dim}, {"largest", largest}, {"sorted", sorted}}));
  return {r[0], r[1]};
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return call1(Op::ScatterAdd, {self, index, src}, attrs({{"dim", dim}}));
}
Tensor embedding(const Tensor& input, const Tensor& weight, int64_t padding_idx) {
  return call1(Op::Embedding, {weight, input}, attrs({{"padding_idx", padding_idx}}));
}
Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index, const std::string& reduction,
                     double label_smoothing) {
  return call1(Op::CrossEntropy, {input, target},
               attrs({{"ignore_index", ignore_index}, {"reduction", reduction}, {"label_smoothing", label_smoothing}}));
}
Tensor nll_loss(const Tensor& input, const Tensor& target, int64_t ignore_index, const std::string& reduction) {
  return call1(Op::NllLoss, {input, target}, attrs({{"ignore_index", ignore_index}, {"reduction", reduction}}));
}
Tensor dropout(const Tensor& input, double p, bool train, int64_t seed) {
  return call1(Op::Dropout, {input}, attrs({{"p", p}, {"train", train}, {"seed", seed}}));
}
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, int64_t seed) {
  std::vector<Tensor> in{query, key, value};
  if (attn_mask) in.push_back(*attn_mask);
  Attrs a = attrs({{"dropout_p", dropout_p}, {"is_causal", is_causal}, {"seed", seed}});
  if (scale) a.set("scale", *scale);
  return call1(Op::ScaledDotProductAttention, in, a);
}
std::vector<Tensor> flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal, double scale) {
  return call(Op::FlashAttention, {query, key, value}, attrs({{"is_causal", is_causal}, {"scale", scale}}));
}
std::vector<Tensor> flash_attention_backward(const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
                                             const Tensor& logsumexp, const Tensor& delta, bool is_causal, double scale) {
  return call(Op::FlashAttentionBackward, {grad_out, query, key, value, logsumexp, delta},
              attrs({{"is_causal", is_causal}, {"scale", scale}}));
}

// ---- operators
#define KILN_DEFINE_BINARY_OPERATOR(sym, fn)                                   \
  Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  Tensor operator sym(const Tensor& a, Scalar b) { return fn(a, b); }        \
  Tensor operator sym(Scalar a, const Tensor& b) { return fn(a, b); }
KILN_DEFINE_BINARY_OPERATOR(+, add)
KILN_DEFINE_BINARY_OPERATOR(-, sub)
KILN_DEFINE_BINARY_OPERATOR(*, mul)
KILN_DEFINE_BINARY_OPERATOR(/, div)
KILN_DEFINE_BINARY_OPERATOR(==, eq)
KILN_DEFINE_BINARY_OPERATOR(!=, ne)
KILN_DEFINE_BINARY_OPERATOR(<, lt)
KILN_DEFINE_BINARY_OPERATOR(<=, le)
KILN_DEFINE_BINARY_OPERATOR(>, gt)
KILN_DEFINE_BINARY_OPERATOR(>=, ge)
#undef KILN_DEFINE_BINARY_OPERATOR
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace kiln
