#pragma once
// The builder API: one free function per op of ir/ops.def (except `input`), with PyTorch's
// names, argument names and defaults, plus operator overloads. Each is a one-line wrapper
// over call(): it packs its tensors and attributes and goes through the dispatcher.
//
// Numbers mix with tensors as in PyTorch (add(t, 2.0), 1.0 - t, t < 0): a number becomes a
// 0-d `full` node whose dtype makes PyTorch's result type come out: a float number takes a
// floating tensor's dtype (else f32); an int number takes the tensor's dtype (bool -> i64);
// a bool number is bool. The shape rules' zero-dim promotion then does the rest, so an f16
// tensor + 2.0 stays f16 and an i64 tensor + 2.5 is f32.
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/arg_types.h"
#include "frontend/tensor.h"

namespace kiln {

// ---- the generic call every wrapper uses
std::vector<Tensor> call(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});
Tensor call1(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});  // one result

// A tensor or a number: the operand type of binary ops.
class Operand {
 public:
  Operand(const Tensor& t) : tensor_(t) {}  // NOLINT: implicit on purpose
  Operand(Scalar s) : scalar_(s) {}         // NOLINT
  template <typename T>
    requires std::is_arithmetic_v<T>
  Operand(T v) : scalar_(Scalar(v)) {}  // NOLINT
  bool is_tensor() const { return !scalar_.has_value(); }
  const Tensor& tensor() const { return tensor_; }
  const Scalar& scalar() const { return *scalar_; }

 private:
  Tensor tensor_;
  std::optional<Scalar> scalar_;
};

// The 0-d `full` a number becomes next to `other` (see the rules above).
Tensor wrap_scalar(const Scalar& s, const Tensor& other);

// ---- pointwise unary
Tensor neg(const Tensor& self);
Tensor abs(const Tensor& self);
Tensor exp(const Tensor& self);
Tensor log(const Tensor& self);
Tensor log1p(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor rsqrt(const Tensor& self);
Tensor reciprocal(const Tensor& self);
Tensor sin(const Tensor& self);
Tensor cos(const Tensor& self);
Tensor tanh(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor relu(const Tensor& self);
Tensor gelu(const Tensor& self, const std::string& approximate = "none");
Tensor silu(const Tensor& self);
// torch.nn.functional's activations (composites: they decompose into pointwise ops and fuse).
Tensor hardsigmoid(const Tensor& self);
Tensor hardswish(const Tensor& self);
Tensor leaky_relu(const Tensor& self, double negative_slope = 0.01);
Tensor elu(const Tensor& self, double alpha = 1.0);
Tensor selu(const Tensor& self);
Tensor softplus(const Tensor& self, double beta = 1.0, double threshold = 20.0);
Tensor mish(const Tensor& self);
Tensor isnan(const Tensor& self);
Tensor isinf(const Tensor& self);
Tensor nan_to_num(const Tensor& self, std::optional<double> nan = std::nullopt, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
Tensor square(const Tensor& self);
Tensor erf(const Tensor& self);
Tensor erfinv(const Tensor& self);  // torch.erfinv: +-inf at +-1, NaN past them
Tensor sign(const Tensor& self);
Tensor floor(const Tensor& self);
Tensor ceil(const Tensor& self);
Tensor round(const Tensor& self);  // half to even
Tensor trunc(const Tensor& self);
Tensor log2(const Tensor& self);
Tensor exp2(const Tensor& self);
Tensor logical_not(const Tensor& self);
// torch.bitwise_*: integer and bool tensors (on bools, the logical ops).
Tensor bitwise_not(const Tensor& self);
Tensor to(const Tensor& self, DType dtype);

// ---- pointwise binary / ternary (broadcasting, PyTorch type promotion)
Tensor add(const Operand& self, const Operand& other);
Tensor sub(const Operand& self, const Operand& other);
Tensor mul(const Operand& self, const Operand& other);
Tensor div(const Operand& self, const Operand& other);
Tensor pow(const Operand& self, const Operand& exponent);
Tensor maximum(const Operand& self, const Operand& other);
Tensor minimum(const Operand& self, const Operand& other);
Tensor fmod(const Operand& self, const Operand& other);
Tensor remainder(const Operand& self, const Operand& other);
Tensor atan2(const Operand& self, const Operand& other);
Tensor eq(const Operand& self, const Operand& other);
Tensor ne(const Operand& self, const Operand& other);
Tensor lt(const Operand& self, const Operand& other);
Tensor le(const Operand& self, const Operand& other);
Tensor gt(const Operand& self, const Operand& other);
Tensor ge(const Operand& self, const Operand& other);
Tensor logical_and(const Operand& self, const Operand& other);
Tensor logical_or(const Operand& self, const Operand& other);
Tensor bitwise_and(const Operand& self, const Operand& other);
Tensor bitwise_or(const Operand& self, const Operand& other);
Tensor bitwise_xor(const Operand& self, const Operand& other);
Tensor where(const Tensor& condition, const Operand& self, const Operand& other);
Tensor clamp(const Tensor& self, std::optional<Scalar> min = std::nullopt, std::optional<Scalar> max = std::nullopt);
Tensor masked_fill(const Tensor& self, const Tensor& mask, Scalar value);

// ---- reductions (dim left out: every dim)
Tensor sum(const Tensor& self, const Dims& dim = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& self, const Dims& dim = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor amax(const Tensor& self, const Dims& dim = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& self, const Dims& dim = {}, bool keepdim = false);
Tensor amin(const Tensor& self, const Dims& dim = {}, bool keepdim = false);
Tensor argmax(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& self, const Dims& dim = {}, Scalar correction = 1, bool keepdim = false);
Tensor prod(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

// ---- views and shape ops
Tensor reshape(const Tensor& self, const IntList& shape);
Tensor permute(const Tensor& self, const IntList& dims);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& self, const IntList& size);
Tensor squeeze(const Tensor& self, const Dims& dim = {});
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor slice(const Tensor& self, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& self, const IntList& split_sizes, int64_t dim = 0);
Tensor contiguous(const Tensor& self);

// ---- creation (recorded into the graph under a trace; eager otherwise)
Tensor full(const IntList& size, Scalar fill_value, std::optional<DType> dtype = std::nullopt);
Tensor zeros(const IntList& size, DType dtype = DType::F32);
Tensor ones(const IntList& size, DType dtype = DType::F32);
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
Tensor constant(const IntList& size, DType dtype, const FloatList& values);
// Uniform [0, 1) from the counter-based stream of ir/random.h (the same seed, the same values).
Tensor rand(const IntList& size, int64_t seed = 0, DType dtype = DType::F32);

// ---- linear algebra
Tensor matmul(const Tensor& self, const Tensor& other);
// torch.einsum("bij,bjk->bik", {a, b}): subscripts per operand, "..." for broadcast dims, an
// optional "->" and the result's (ir/einsum.h); the operands share one dtype.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
Tensor bmm(const Tensor& self, const Tensor& mat2);
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1);

// ---- normalizations beside layer_norm (torch.nn.functional.rms_norm / group_norm; rms_norm's eps
// left out: the dtype's machine epsilon)
Tensor rms_norm(const Tensor& input, const IntList& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);

// torch.nn.functional.batch_norm: input [N, C, ...] normalized per channel. Training: by the
// batch's statistics over N and the spatial dims (the variance biased), and the running
// statistics given are written in place (Tensor::copy_): running = (1 - momentum) running +
// momentum statistic, the variance unbiased (n / (n - 1)), as PyTorch's. Not training: by the
// running statistics (both needed).
Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight = std::nullopt, const std::optional<Tensor>& bias = std::nullopt,
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

// ---- convolution and pooling (1 to 3 spatial dims: the weight's rank - 2, kernel_size's length)
// torch.nn.functional.conv{1,2,3}d: input [N, C, L...], weight [OC, C/groups, K...]; stride,
// padding and dilation of one value or one per spatial dim.
Tensor conv(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt, const IntList& stride = {1},
            const IntList& padding = {0}, const IntList& dilation = {1}, int64_t groups = 1);
// torch.nn.functional.conv_transpose{1,2,3}d: weight [C, OC/groups, K...].
Tensor conv_transpose(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                      const IntList& stride = {1}, const IntList& padding = {0}, const IntList& output_padding = {0},
                      int64_t groups = 1, const IntList& dilation = {1});
// torch.nn.functional.max_pool{1,2,3}d / avg_pool{1,2,3}d (stride left empty: the kernel size).
Tensor max_pool(const Tensor& self, const IntList& kernel_size, const IntList& stride = {}, const IntList& padding = {0},
                const IntList& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool(const Tensor& self, const IntList& kernel_size, const IntList& stride = {}, const IntList& padding = {0},
                bool ceil_mode = false, bool count_include_pad = true);

// torch.nn.functional.adaptive_avg_pool{1,2,3}d / adaptive_max_pool (values only): output
// size per spatial dim (the trailing output_size.size() dims); output element i of a dim of
// input size n and output size o pools [floor(i n / o), ceil((i + 1) n / o)). One pool when o
// divides n; otherwise one reduction per output index of the dims that do not divide.
Tensor adaptive_avg_pool(const Tensor& self, const IntList& output_size);
Tensor adaptive_max_pool(const Tensor& self, const IntList& output_size);

// torch.nn.functional.interpolate over the trailing dims after [N, C]: to `size`, or by
// `scale_factor` (output floor(in * scale), coordinates by the factor itself, as PyTorch's
// default recompute_scale_factor). mode: "nearest", "nearest-exact", "linear", "bilinear",
// "trilinear", "bicubic"; align_corners for the (bi|tri)linear and bicubic modes only.
// Written as gathers of taps computed from the sizes (ir/meta/interpolation.h), weighted and
// summed; differentiable through them.
Tensor interpolate(const Tensor& input, const IntList& size, const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt);
Tensor interpolate(const Tensor& input, const std::vector<double>& scale_factor, const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt);

// ---- composites
// torch.repeat_interleave with a number: each slice along `dim` repeated `repeats` times in a
// row ([a, b] -> [a, a, b, b]): a view expanded and reshaped (grouped-query attention's heads).
Tensor repeat_interleave(const Tensor& self, int64_t repeats, int64_t dim);
// torch.nn.functional.pad: `pad` holds (before, after) pairs from the last dim backwards;
// mode "constant" (with `value`), "reflect" (each pad below the size), "replicate" or
// "circular" (each pad at most the size); negative pads crop.
Tensor pad(const Tensor& self, const IntList& pad, const std::string& mode = "constant", double value = 0);
// torch.flip: the order along each of `dims` reversed (a gather of a constant index).
Tensor flip(const Tensor& self, const IntList& dims);
// torch.roll: elements shifted along each dim by its shift (negative: toward the start), those
// past the end coming back at the start; with no dims, over the flattened tensor.
Tensor roll(const Tensor& self, const IntList& shifts, const IntList& dims = {});
// Tensor.repeat (at least one repeat per dim; more add leading dims) and torch.tile (fewer
// reps are padded with leading 1s): the tensor laid out repeats[d] times along each dim.
Tensor repeat(const Tensor& self, const IntList& repeats);
Tensor tile(const Tensor& self, const IntList& reps);
// torch.index_select: the slices along `dim` at a vector of integer indices (negatives count
// from the end, as kiln's gather does; past the size is an error when run).
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// Advanced indexing by integer tensors over the leading dims, as PyTorch's x[i0, i1, ...]
// (index) and x[i0, i1, ...] = values (index_put, out of place; accumulate: +=, duplicates
// summed): the indices broadcast together to S, the result is [*S, *self.shape[k:]], values
// broadcast to it. Negatives count from the end; past a dim's size is an error when run. Of
// two writes to one place without accumulate, the later one (in index order) stays. Bool mask
// indices are refused (their result's shape depends on the values): use where().
Tensor index(const Tensor& self, const std::vector<Tensor>& indices);
Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
// torch.nn.functional.one_hot (int64 result, a new last dim of num_classes); num_classes must
// be given (an index outside [0, num_classes) gives a row of zeros, where PyTorch raises).
Tensor one_hot(const Tensor& self, int64_t num_classes);
// torch.cumsum / torch.cumprod along `dim` (integers and bool in int64 unless a dtype is given),
// as ceil(log2 n) rounds of shifted adds or multiplies (Hillis and Steele): exact for integers,
// within O(log n) ulps of a running sum for floats; differentiable through them.
Tensor cumsum(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);
// The size form: a lower/upper triangle of ones (e.g. a causal mask: tril({T, T}, 0, DType::Bool)).
Tensor tril(const IntList& size, int64_t diagonal = 0, std::optional<DType> dtype = std::nullopt);
Tensor triu(const IntList& size, int64_t diagonal = 0, std::optional<DType> dtype = std::nullopt);
Tensor softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);
// torch.nn.functional.layer_norm's argument order.
Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// Collectives over a process group of `world_size` ranks running the same program (SPMD), as
// torch.distributed's functional collectives; `op` "sum" or "mean". Traced, they are graph ops
// (ir/ops.def) that the reference interpreter runs for a simulated group (interpret_group).
Tensor all_reduce(const Tensor& self, int64_t world_size, const std::string& op = "sum");
Tensor all_gather(const Tensor& self, int64_t world_size, int64_t dim = 0);
Tensor reduce_scatter(const Tensor& self, int64_t world_size, int64_t dim = 0, const std::string& op = "sum");
Tensor broadcast(const Tensor& self, int64_t world_size, int64_t src = 0);
Tensor reduce(const Tensor& self, int64_t world_size, int64_t dst = 0, const std::string& op = "sum");

// torch.gather and Tensor.scatter_add (out of place).
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter: src written where index says along dim (of two writes to one place the later
// one in index order stays).
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter_reduce (out of place): src's elements reduced into self's along dim where index
// says, by "sum", "prod", "mean" (floats), "amax" or "amin" (NaN propagating), self's own element
// among them (include_self) or not (an element nothing reaches keeps self's).
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self = true);
// Its primitive (ir/ops.def): "prod", "amax" or "amin" folded into self's elements.
Tensor scatter_fold(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce);
// torch.sort and torch.topk: the values and their int64 indices along dim. Equal values keep
// their order (stable, descending too; topk keeps the first of equal values), NaN is above every
// number; topk's values come out sorted.
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices sort(const Tensor& self, int64_t dim = -1, bool descending = false, bool stable = false);
ValuesIndices topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// torch.nn.functional.embedding's argument order: indices first (the op's schema has weight first).
Tensor embedding(const Tensor& input, const Tensor& weight, int64_t padding_idx = -1);
Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                     const std::string& reduction = "mean", double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                const std::string& reduction = "mean");
// The mask is counter-based random (ir/random.h): the same seed drops the same elements.
Tensor dropout(const Tensor& input, double p = 0.5, bool train = true, int64_t seed = 0);
// torch.nn.functional.scaled_dot_product_attention: softmax(q kᵀ·scale + mask) v over the last
// two dims (attn_mask: bool, true = attend, or added; scale: 1/sqrt(E) when absent). Without a
// mask or dropout it runs as the flash kernels, and its gradient never stores the [L, S] weights.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt, int64_t seed = 0);
// The primitives it runs as (ir/ops.def): {out, logsumexp}, and {dq, dk, dv} from dout, the
// forward's inputs, its logsumexp and delta = sum(dout * out, -1).
std::vector<Tensor> flash_attention(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal, double scale);
std::vector<Tensor> flash_attention_backward(const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
                                             const Tensor& logsumexp, const Tensor& delta, bool is_causal, double scale);

// ---- operators (Tensor with Tensor, Tensor with number, number with Tensor)
#define KILN_DECLARE_BINARY_OPERATOR(sym)                 \
  Tensor operator sym(const Tensor& a, const Tensor& b);  \
  Tensor operator sym(const Tensor& a, Scalar b);         \
  Tensor operator sym(Scalar a, const Tensor& b);
KILN_DECLARE_BINARY_OPERATOR(+)
KILN_DECLARE_BINARY_OPERATOR(-)
KILN_DECLARE_BINARY_OPERATOR(*)
KILN_DECLARE_BINARY_OPERATOR(/)
KILN_DECLARE_BINARY_OPERATOR(==)
KILN_DECLARE_BINARY_OPERATOR(!=)
KILN_DECLARE_BINARY_OPERATOR(<)
KILN_DECLARE_BINARY_OPERATOR(<=)
KILN_DECLARE_BINARY_OPERATOR(>)
KILN_DECLARE_BINARY_OPERATOR(>=)
#undef KILN_DECLARE_BINARY_OPERATOR
Tensor operator-(const Tensor& a);

}  // namespace kiln
