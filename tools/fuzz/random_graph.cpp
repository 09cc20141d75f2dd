#include "tools/fuzz/random_graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "ir/error.h"
#include "passes/dce.h"
#include "passes/merge_linears.h"

namespace kiln::fuzz {

namespace {

// An integer input's bound when it indexes nothing: small, so that products and powers of
// integers stay far from overflow.
constexpr int64_t kIndexBound = 10;

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& o, FuzzCase& c) : rng_(seed), o_(o), c_(c), g_(c.graph) {}

  void run() {
    const int inputs = static_cast<int>(uniform(1, 3));
    for (int i = 0; i < inputs; ++i) new_input(random_meta());
    const int target = static_cast<int>(uniform(1, o_.max_nodes));
    int added = 0;
    for (int attempt = 0; added < target && attempt < target * 20; ++attempt)
      if (step()) ++added;
    choose_outputs();
  }

 private:
  // ---- randomness
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& one_of(const std::vector<T>& v) { return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))]; }

  int64_t random_dim() {
    if (chance(o_.empty_dim_chance)) return 0;
    static const std::vector<int64_t> dims = {1, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 33};
    return one_of(dims);
  }
  Shape random_shape() {
    Shape s;
    const int64_t rank = one_of(std::vector<int64_t>{0, 1, 1, 2, 2, 2, 3, 3, 4});
    for (int64_t i = 0; i < rank; ++i) s.push_back(random_dim());
    while (numel(s) > o_.max_numel) {  // halve the largest dim (the last may already be 1)
      int64_t& big = *std::max_element(s.begin(), s.end());
      big = std::max<int64_t>(1, big / 2);
    }
    return s;
  }
  DType random_dtype() {
    static const std::vector<DType> dts = {DType::F32, DType::F32, DType::F32, DType::F32, DType::F32, DType::F32,
                                           DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};
    return one_of(dts);
  }
  DType random_float_dtype() {
    static const std::vector<DType> dts = {DType::F32, DType::F32, DType::F32, DType::F64, DType::F16, DType::BF16};
    return one_of(dts);
  }
  TensorMeta random_meta() { return TensorMeta(random_dtype(), random_shape()); }

  // ---- the graph
  Value new_input(const TensorMeta& m, int64_t bound = kIndexBound) {
    Value v = g_.add_input(g_.fresh_name("in"), TensorMeta(m.dtype, m.shape));
    c_.int_bounds.push_back(std::max<int64_t>(1, bound));
    c_.input_seeds.push_back(c_.seed * 7919 + c_.input_seeds.size());
    pool_.push_back(v);
    return v;
  }

  // Adds the call if the op's rule accepts it and its results stay small; the results join the pool.
  std::optional<Value> add(Op op, std::vector<Value> in, const Attrs& attrs = {}) {
    Node* n = nullptr;
    try {
      n = g_.add_node(op, std::move(in), attrs, g_.fresh_name(std::string(op_short_name(op))));
    } catch (const Error&) {
      return std::nullopt;
    }
    for (int i = 0; i < n->num_results(); ++i) {
      if (n->meta(i).numel() > o_.max_numel) {
        // Too big to run quickly: leave it dead (dce removes it) and draw again.
        return std::nullopt;
      }
    }
    for (int i = 0; i < n->num_results(); ++i) pool_.push_back(n->result(i));
    return n->result(0);
  }

  // A value from the pool, the newest more often (so graphs grow deep, not only wide).
  std::optional<Value> pick(const std::function<bool(const TensorMeta&)>& ok) {
    std::vector<Value> c;
    for (const Value& v : pool_)
      if (ok(v.meta())) c.push_back(v);
    if (c.empty()) return std::nullopt;
    if (chance(0.5)) return c.back();
    return one_of(c);
  }
  static bool any(const TensorMeta&) { return true; }
  static bool floating(const TensorMeta& m) { return is_floating(m.dtype); }
  static bool boolean(const TensorMeta& m) { return m.dtype == DType::Bool; }
  static bool numeric(const TensorMeta& m) { return m.dtype != DType::Bool; }

  // A shape that broadcasts with `s`: a suffix of it, some dims set to 1.
  Shape broadcast_partner(const Shape& s) {
    Shape out(s.begin() + static_cast<std::ptrdiff_t>(uniform(0, static_cast<int64_t>(s.size()))), s.end());
    for (int64_t& d : out)
      if (chance(0.3)) d = 1;
    if (chance(0.15)) out.insert(out.begin(), uniform(1, 3));  // and a new leading dim
    return out;
  }

  Value operand_like(const Value& a, DType dtype) {
    if (chance(0.4))
      if (auto b = pick([&](const TensorMeta& m) { return m.dtype == dtype; })) return *b;
    return new_input(TensorMeta(dtype, broadcast_partner(a.meta().shape)));
  }

  IntList random_dims(int64_t rank) {
    IntList dims;
    for (int64_t d = 0; d < rank; ++d)
      if (chance(0.5)) dims.push_back(chance(0.3) ? d - rank : d);
    return dims;
  }
  double random_scalar() {
    static const std::vector<double> s = {0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 1e-3,
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(), std::nan("")};
    return one_of(s);
  }

  // ---- one step: a recipe, drawn by weight
  bool step() {
    switch (uniform(0, 19)) {
      case 0: case 1: case 2: return unary();
      case 3: case 4: case 5: return binary();
      case 6: return compare_and_select();
      case 7: return masked_fill_or_clamp();
      case 8: return cast();
      case 9: case 10: return reduction();
      case 11: case 12: case 13: return view();
      case 14: return matmul();
      case 15: return normalization();
      case 16: return gather_or_scatter();
      case 17: return loss_or_embedding();
      case 18: return creation();
      default: return concat_or_split();
    }
  }

  bool unary() {
    static const std::vector<Op> ops = {Op::Neg, Op::Abs, Op::Exp, Op::Log, Op::Sqrt, Op::Rsqrt, Op::Reciprocal,
                                        Op::Sin, Op::Cos, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Gelu, Op::Silu,
                                        Op::Square, Op::Erf, Op::Sign, Op::Dropout, Op::Hardsigmoid,
                                        Op::Hardswish, Op::LeakyRelu, Op::Elu, Op::Selu, Op::Softplus, Op::Mish,
                                        Op::Isnan, Op::Isinf, Op::NanToNum, Op::Floor, Op::Ceil, Op::Round,
                                        Op::Trunc, Op::Log2, Op::Exp2, Op::Erfinv};
    auto a = pick(floating);
    if (!a) return false;
    Op op = one_of(ops);
    Attrs attrs;
    if (op == Op::Gelu && chance(0.5)) attrs.set("approximate", std::string("tanh"));
    if (op == Op::Dropout) attrs = {{"p", 0.25}, {"train", chance(0.7)}, {"seed", uniform(0, 99)}};
    if (op == Op::LeakyRelu && chance(0.5)) attrs.set("negative_slope", 0.2);
    if (op == Op::Elu && chance(0.5)) attrs = {{"alpha", 0.5}, {"scale", 1.5}, {"input_scale", 2.0}};
    if (op == Op::Softplus && chance(0.5)) attrs = {{"beta", 2.0}, {"threshold", 1.0}};
    return add(op, {*a}, attrs).has_value();
  }

  bool binary() {
    static const std::vector<Op> ops = {Op::Add,     Op::Sub,     Op::Mul,  Op::Div,       Op::Pow,
                                        Op::Maximum, Op::Minimum, Op::Fmod, Op::Remainder, Op::Atan2};
    static const std::vector<Op> bitwise = {Op::BitwiseAnd, Op::BitwiseOr, Op::BitwiseXor};
    auto a = pick(numeric);
    if (!a) return false;
    DType dt = chance(0.8) ? a->meta().dtype : random_dtype();
    if (!is_floating(a->meta().dtype) && chance(0.3)) {
      // Integers (and bools): and, or, xor with a partner of any integer type; sometimes not.
      if (chance(0.2)) return add(Op::BitwiseNot, {*a}).has_value();
      Value b = operand_like(*a, is_floating(dt) ? DType::I64 : dt);
      return add(one_of(bitwise), chance(0.5) ? std::vector<Value>{*a, b} : std::vector<Value>{b, *a}).has_value();
    }
    Value b = operand_like(*a, dt == DType::Bool ? DType::F32 : dt);
    return add(one_of(ops), chance(0.5) ? std::vector<Value>{*a, b} : std::vector<Value>{b, *a}).has_value();
  }

  bool compare_and_select() {
    static const std::vector<Op> cmp = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
    auto a = pick(numeric);
    if (!a) return false;
    auto c = add(one_of(cmp), {*a, operand_like(*a, a->meta().dtype)});
    if (!c) return false;
    if (chance(0.3)) {
      auto d = pick(boolean);
      static const std::vector<Op> logical = {Op::LogicalAnd, Op::LogicalOr, Op::BitwiseAnd, Op::BitwiseOr, Op::BitwiseXor};
      if (d) add(one_of(logical), {*c, *d});
      return true;
    }
    if (chance(0.2)) return add(chance(0.7) ? Op::LogicalNot : Op::BitwiseNot, {*c}).has_value();
    return add(Op::Where, {*c, *a, operand_like(*a, a->meta().dtype)}).has_value();
  }

  bool masked_fill_or_clamp() {
    auto a = pick(numeric);
    if (!a) return false;
    if (chance(0.5)) {
      auto m = pick(boolean);
      Value mask = m ? *m : new_input(TensorMeta(DType::Bool, broadcast_partner(a->meta().shape)));
      double v = is_floating(a->meta().dtype) ? random_scalar() : static_cast<double>(uniform(-3, 3));
      return add(Op::MaskedFill, {*a, mask}, {{"value", v}}).has_value();
    }
    Attrs attrs;
    double lo = static_cast<double>(uniform(-2, 0)) - 0.5;
    if (chance(0.7)) attrs.set("min", lo);
    if (chance(0.7)) attrs.set("max", lo + static_cast<double>(uniform(0, 3)));
    return add(Op::Clamp, {*a}, attrs).has_value();
  }

  bool cast() {
    auto a = pick(any);
    return a && add(Op::To, {*a}, {{"dtype", random_dtype()}}).has_value();
  }

  bool reduction() {
    static const std::vector<Op> ops = {Op::Sum, Op::Sum, Op::Mean, Op::Amax, Op::Amin, Op::Argmax, Op::Var, Op::Prod, Op::Logsumexp};
    auto a = pick(numeric);
    if (!a) return false;
    Op op = one_of(ops);
    const int64_t rank = a->meta().rank();
    Attrs attrs;
    if (op == Op::Argmax || op == Op::Prod) {
      if (rank > 0 && chance(0.8)) attrs.set("dim", uniform(-rank, rank - 1));
    } else if (chance(0.8)) {
      attrs.set("dim", random_dims(rank));
    }
    if (chance(0.4)) attrs.set("keepdim", true);
    if (op == Op::Var) attrs.set("correction", static_cast<double>(uniform(0, 1)));
    if ((op == Op::Sum || op == Op::Mean) && chance(0.15)) attrs.set("dtype", random_float_dtype());
    return add(op, {*a}, attrs).has_value();
  }

  bool view() {
    auto a = pick(any);
    if (!a) return false;
    const Shape& s = a->meta().shape;
    const int64_t rank = a->meta().rank();
    switch (uniform(0, 7)) {
      case 0: {  // reshape: the dims shuffled, or merged, one maybe -1
        Shape to = s;
        std::shuffle(to.begin(), to.end(), rng_);
        if (to.size() >= 2 && chance(0.5)) {
          to[to.size() - 2] *= to.back();
          to.pop_back();
        }
        if (!to.empty() && chance(0.3)) to[static_cast<size_t>(uniform(0, static_cast<int64_t>(to.size()) - 1))] = -1;
        return add(Op::Reshape, {*a}, {{"shape", to}}).has_value();
      }
      case 1: {
        IntList perm(static_cast<size_t>(rank));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng_);
        return add(Op::Permute, {*a}, {{"dims", perm}}).has_value();
      }
      case 2:
        if (rank < 1) return false;
        return add(Op::Transpose, {*a}, {{"dim0", uniform(-rank, rank - 1)}, {"dim1", uniform(-rank, rank - 1)}}).has_value();
      case 3: {  // expand: size-1 dims grow, maybe a new leading dim
        IntList size(s.begin(), s.end());
        for (int64_t& d : size)
          if (d == 1 && chance(0.6)) d = uniform(2, 5);
          else if (chance(0.2)) d = -1;
        if (chance(0.3)) size.insert(size.begin(), uniform(1, 4));
        return add(Op::Expand, {*a}, {{"size", size}}).has_value();
      }
      case 4: {
        Attrs attrs;
        if (chance(0.5) && rank > 0) attrs.set("dim", IntList{uniform(-rank, rank - 1)});
        return add(Op::Squeeze, {*a}, attrs).has_value();
      }
      case 5: return add(Op::Unsqueeze, {*a}, {{"dim", uniform(-rank - 1, rank)}}).has_value();
      case 6: {  // slice with a step, negative bounds, or past the end
        if (rank < 1) return false;
        const int64_t dim = uniform(-rank, rank - 1);
        const int64_t n = s[static_cast<size_t>(dim < 0 ? dim + rank : dim)];
        Attrs attrs{{"dim", dim}, {"step", uniform(1, 3)}};
        if (chance(0.7)) attrs.set("start", uniform(-n - 1, n));
        if (chance(0.7)) attrs.set("end", uniform(-n, n + 2));
        return add(Op::Slice, {*a}, attrs).has_value();
      }
      default: return add(Op::Contiguous, {*a}).has_value();
    }
  }

  bool concat_or_split() {
    auto a = pick(any);
    if (!a || a->meta().rank() < 1) return false;
    const int64_t rank = a->meta().rank();
    const int64_t dim = uniform(-rank, rank - 1);
    if (chance(0.5)) return add(Op::Split, {*a}, {{"split_size", uniform(1, 4)}, {"dim", dim}}).has_value();
    Shape other = a->meta().shape;
    other[static_cast<size_t>(dim < 0 ? dim + rank : dim)] = uniform(1, 4);
    Value b = chance(0.5) ? *a : new_input(TensorMeta(a->meta().dtype, other));
    return add(Op::Cat, {*a, b}, {{"dim", dim}}).has_value();
  }

  bool matmul() {
    if (chance(0.1)) return projections();
    auto a = pick([](const TensorMeta& m) { return is_floating(m.dtype) && m.rank() >= 1; });
    if (!a) return false;
    const Shape& s = a->meta().shape;
    const int64_t k = s.back(), n = uniform(1, 17);
    DType dt = a->meta().dtype;
    switch (uniform(0, 3)) {
      case 0: return add(Op::Matmul, {*a, new_input(TensorMeta(dt, {k, n}))}).has_value();
      case 1: return add(Op::Matmul, {new_input(TensorMeta(dt, {n, s.size() >= 2 ? s[s.size() - 2] : k})), *a}).has_value();
      case 2: {
        Value w = new_input(TensorMeta(dt, {n, k}));
        std::vector<Value> in{*a, w};
        if (chance(0.7)) in.push_back(new_input(TensorMeta(dt, {n})));
        return add(Op::Linear, in).has_value();
      }
      default:
        if (chance(0.3)) return einsum(*a);
        if (s.size() >= 3 && s.size() <= 5 && chance(0.4)) return conv_or_pool(*a);
        if (s.size() != 3) return false;
        return add(Op::Bmm, {*a, new_input(TensorMeta(dt, {s[0], k, n}))}).has_value();
    }
  }

  // Linears of one new input of at least kMergeLinearsMinRows rows (attention's q, k and v;
  // SwiGLU's gate and up), each maybe through a cast of its own as autocast writes them, with or
  // without biases: what passes/merge_linears.h makes one GEMM over concatenated weights.
  bool projections() {
    const DType dt = random_float_dtype(), at = chance(0.5) ? random_float_dtype() : dt;
    const int64_t rows = chance(0.5) ? kMergeLinearsMinRows : kMergeLinearsMinRows + 7, k = uniform(1, 3);
    Value x = new_input(TensorMeta(dt, {rows, k}));
    const bool bias = chance(0.6);
    const int64_t count = uniform(2, 3);
    bool any = false;
    for (int64_t i = 0; i < count; ++i) {
      Value xin = x;
      if (at != dt) {
        auto c = add(Op::To, {x}, {{"dtype", at}});
        if (!c) return any;
        xin = *c;
      }
      const int64_t n = uniform(1, 3);
      std::vector<Value> in{xin, new_input(TensorMeta(at, {n, k}))};
      if (bias) in.push_back(new_input(TensorMeta(at, {n})));
      any |= add(Op::Linear, in).has_value();
    }
    return any;
  }

  // einsum of `a` (a letter a dim, two equal dims maybe one letter: a diagonal) with a new
  // operand sharing some of its letters (some of them size 1: broadcast) and adding up to two,
  // the result a random arrangement of some letters, or left implicit.
  bool einsum(Value a) {
    const Shape& s = a.meta().shape;
    if (s.size() > 4) return false;
    std::string la, lb;
    for (size_t d = 0; d < s.size(); ++d) la += static_cast<char>('a' + d);
    if (s.size() >= 2 && s[0] == s[1] && chance(0.3)) la[1] = la[0];
    Shape sb;
    for (size_t d = 0; d < s.size(); ++d)
      if (chance(0.5) && lb.find(la[d]) == std::string::npos) {
        lb += la[d];
        sb.push_back(chance(0.15) ? 1 : s[d]);
      }
    for (int64_t extra = uniform(0, 2); extra-- > 0;) {
      lb += static_cast<char>('p' + extra);
      sb.push_back(uniform(1, 6));
    }
    std::string letters, out;
    for (char ch : la + lb)
      if (letters.find(ch) == std::string::npos) letters += ch;
    for (char ch : letters)
      if (chance(0.5)) out += ch;
    for (size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[static_cast<size_t>(uniform(0, static_cast<int64_t>(i) - 1))]);
    const std::string eq = la + "," + lb + (chance(0.2) ? "" : "->" + out);
    return add(Op::Einsum, {a, new_input(TensorMeta(a.meta().dtype, sb))}, {{"equation", eq}}).has_value();
  }

  // A value of rank 3 to 5 read as [N, C, L...]: a convolution (plain or transposed, with
  // strides, padding, dilation, groups, output_padding, a bias) or a max or avg pool (padding,
  // ceil_mode, count_include_pad, dilation). Geometries the shape rule refuses are dropped.
  bool conv_or_pool(Value x) {
    const Shape& s = x.meta().shape;
    const int64_t spatial = static_cast<int64_t>(s.size()) - 2, c = s[1];
    const DType dt = x.meta().dtype;
    auto per_dim = [&](int64_t lo, int64_t hi) {
      if (chance(0.5)) return IntList{uniform(lo, hi)};
      IntList v;
      for (int64_t d = 0; d < spatial; ++d) v.push_back(uniform(lo, hi));
      return v;
    };
    if (chance(0.35)) {
      const bool max = chance(0.5);
      IntList kernel;
      for (int64_t d = 0; d < spatial; ++d) kernel.push_back(uniform(1, spatial == 3 ? 2 : 3));
      Attrs a{{"kernel_size", kernel}, {"ceil_mode", chance(0.4)}};
      if (chance(0.6)) a.set("stride", per_dim(1, 3));
      if (chance(0.5)) a.set("padding", IntList{uniform(0, 1)});
      if (max && chance(0.3)) a.set("dilation", per_dim(1, 2));
      if (!max && chance(0.5)) a.set("count_include_pad", false);
      return add(max ? Op::MaxPool : Op::AvgPool, {x}, a).has_value();
    }
    const int64_t groups = c > 1 && chance(0.3) ? (chance(0.5) ? c : (c % 2 == 0 ? 2 : 1)) : 1;
    const bool transposed = chance(0.3);
    const int64_t out = groups * uniform(1, 3);
    Shape w{transposed ? c : out, transposed ? out / groups : c / groups};
    // (at most 9 kernel offsets: each is a slice of the decomposition, and joint graphs double them)
    for (int64_t d = 0; d < spatial; ++d) w.push_back(uniform(1, spatial == 3 ? 2 : 3));
    std::vector<Value> in{x, new_input(TensorMeta(dt, w))};
    if (chance(0.6)) in.push_back(new_input(TensorMeta(dt, {out})));
    IntList stride = per_dim(1, 2);
    Attrs a{{"stride", stride}, {"padding", per_dim(0, 1)}, {"dilation", per_dim(1, 2)}, {"groups", groups}, {"transposed", transposed}};
    if (transposed && stride.size() == 1 && stride[0] > 1 && chance(0.4)) a.set("output_padding", IntList{1});
    return add(Op::Convolution, in, a).has_value();
  }

  // scaled_dot_product_attention with a value as q: new k and v of its batch dims; causal or a
  // mask (bool or additive), a scale, dropout now and then.
  bool attention(Value q) {
    const Shape& s = q.meta().shape;
    const DType dt = q.meta().dtype;
    const int64_t L = s[s.size() - 2], S = uniform(0, 9), Ev = uniform(1, 9);
    Shape batch(s.begin(), s.end() - 2), ks = batch, vs = batch;
    ks.insert(ks.end(), {S, s.back()});
    vs.insert(vs.end(), {S, Ev});
    std::vector<Value> in{q, new_input(TensorMeta(dt, ks)), new_input(TensorMeta(dt, vs))};
    Attrs attrs;
    switch (uniform(0, 3)) {
      case 0: attrs.set("is_causal", true); break;
      case 1: in.push_back(new_input(TensorMeta(DType::Bool, {L, S}), 2)); break;
      case 2: in.push_back(new_input(TensorMeta(dt, {L, S}))); break;
      default: break;
    }
    if (chance(0.5)) attrs.set("scale", 0.25 * static_cast<double>(uniform(1, 8)));
    if (chance(0.15)) {
      attrs.set("dropout_p", 0.25);
      attrs.set("seed", uniform(0, 99));
    }
    return add(Op::ScaledDotProductAttention, in, attrs).has_value();
  }

  bool normalization() {
    auto a = pick([](const TensorMeta& m) { return is_floating(m.dtype) && m.rank() >= 1; });
    if (!a) return false;
    if (a->meta().rank() >= 2 && chance(0.5)) return attention(*a);
    const int64_t rank = a->meta().rank();
    if (chance(0.6))
      return add(chance(0.5) ? Op::Softmax : Op::LogSoftmax, {*a}, {{"dim", uniform(-rank, rank - 1)}}).has_value();
    const Shape& s = a->meta().shape;
    const int64_t last = chance(0.7) ? 1 : std::min<int64_t>(2, rank);
    Shape norm(s.end() - last, s.end());
    const DType dt = a->meta().dtype;
    if (chance(0.2)) {  // rms_norm, maybe weighted, eps given or the dtype's
      std::vector<Value> in{*a};
      if (chance(0.6)) in.push_back(new_input(TensorMeta(dt, norm)));
      Attrs at{{"normalized_shape", IntList(norm.begin(), norm.end())}};
      if (chance(0.5)) at.set("eps", 1e-3);
      return add(Op::RmsNorm, in, at).has_value();
    }
    if (rank >= 2 && chance(0.2)) {  // group_norm over [N, C, ...], groups dividing C
      const int64_t c = s[1], groups = chance(0.5) ? 1 : (c % 2 == 0 ? 2 : c);
      std::vector<Value> in{*a};
      if (chance(0.7)) {
        in.push_back(new_input(TensorMeta(dt, {c})));
        if (chance(0.7)) in.push_back(new_input(TensorMeta(dt, {c})));
      }
      return add(Op::GroupNorm, in, {{"num_groups", groups}}).has_value();
    }
    std::vector<Value> in{*a};
    if (chance(0.8)) {
      in.push_back(new_input(TensorMeta(a->meta().dtype, norm)));
      in.push_back(new_input(TensorMeta(a->meta().dtype, norm)));
    }
    return add(Op::LayerNorm, in, {{"normalized_shape", IntList(norm.begin(), norm.end())}}).has_value();
  }

  // gather, scatter_add, scatter, scatter_reduce, sort or topk.
  bool gather_or_scatter() {
    auto a = pick([](const TensorMeta& m) { return m.rank() >= 1 && m.numel() > 0; });
    if (!a) return false;
    const Shape& s = a->meta().shape;
    const int64_t rank = a->meta().rank();
    const int64_t dim = uniform(0, rank - 1);
    if (chance(0.25)) {  // sort or topk along dim (their indices join the pool too)
      const int64_t n = s[static_cast<size_t>(dim)];
      if (chance(0.5)) return add(Op::Sort, {*a}, {{"dim", dim}, {"descending", chance(0.5)}}).has_value();
      return add(Op::Topk, {*a}, {{"k", uniform(0, n)}, {"dim", dim}, {"largest", chance(0.5)}}).has_value();
    }
    if (chance(0.15) && is_floating(a->meta().dtype)) {
      // An embedding's gradient: scatter_add of rows by an index that is the same across the
      // other dims (a column expanded), up to 80 rows (a GPU sorts 32 or more: sorted_scatter.h).
      const int64_t n = uniform(1, 80);
      Value ids = new_input(TensorMeta(DType::I64, {n}), s[static_cast<size_t>(dim)]);
      Shape column(static_cast<size_t>(rank), 1), full = s;
      column[static_cast<size_t>(dim)] = full[static_cast<size_t>(dim)] = n;
      auto col = add(Op::Reshape, {ids}, {{"shape", IntList(column.begin(), column.end())}});
      auto index = col ? add(Op::Expand, {*col}, {{"size", IntList(full.begin(), full.end())}}) : std::nullopt;
      if (!index) return false;
      return add(Op::ScatterAdd, {*a, *index, new_input(TensorMeta(a->meta().dtype, full))}, {{"dim", dim}}).has_value();
    }
    Shape idx = s;
    for (int64_t& d : idx) d = uniform(1, std::max<int64_t>(1, d));
    idx[static_cast<size_t>(dim)] = uniform(1, 6);
    Value index = new_input(TensorMeta(DType::I64, idx), s[static_cast<size_t>(dim)]);
    if (chance(0.6)) return add(Op::Gather, {*a, index}, {{"dim", dim}}).has_value();
    Value src = new_input(TensorMeta(a->meta().dtype, idx));
    if (chance(0.4)) {  // scatter_reduce: any reduction its dtype takes, with or without self
      std::vector<std::string> reductions{"sum", "prod", "amax", "amin"};
      if (is_floating(a->meta().dtype)) reductions.push_back("mean");
      if (a->meta().dtype == DType::Bool) reductions = {"amax", "amin"};
      const std::string reduce = reductions[static_cast<size_t>(uniform(0, static_cast<int64_t>(reductions.size()) - 1))];
      return add(Op::ScatterReduce, {*a, index, src}, {{"dim", dim}, {"reduce", reduce}, {"include_self", chance(0.5)}}).has_value();
    }
    return add(chance(0.5) ? Op::ScatterAdd : Op::Scatter, {*a, index, src}, {{"dim", dim}}).has_value();
  }

  bool loss_or_embedding() {
    if (chance(0.5)) {
      const int64_t v = uniform(1, 40), d = uniform(1, 16);
      Value w = new_input(TensorMeta(random_float_dtype(), {v, d}));
      Shape ids = random_shape();
      if (ids.size() > 2) ids.resize(2);
      return add(Op::Embedding, {w, new_input(TensorMeta(DType::I64, ids), v)}).has_value();
    }
    auto a = pick([](const TensorMeta& m) { return is_floating(m.dtype) && m.rank() == 2 && m.shape[1] > 0; });
    if (!a) return false;
    const int64_t n = a->meta().shape[0], c = a->meta().shape[1];
    Value target = new_input(TensorMeta(DType::I64, {n}), c);
    return add(chance(0.8) ? Op::CrossEntropy : Op::NllLoss, {*a, target}).has_value();
  }

  bool creation() {
    switch (uniform(0, 3)) {
      case 0: {
        Shape s = random_shape();
        return add(Op::Full, {}, {{"size", IntList(s.begin(), s.end())}, {"fill_value", random_scalar()}}).has_value();
      }
      case 1: return add(Op::Arange, {}, {{"end", static_cast<double>(uniform(1, 20))}, {"start", 0.5}}).has_value();
      default: {
        auto a = pick([](const TensorMeta& m) { return m.rank() == 2; });
        if (!a) return false;
        return add(chance(0.5) ? Op::Tril : Op::Triu, {*a}, {{"diagonal", uniform(-2, 2)}}).has_value();
      }
    }
  }

  // The outputs: values nothing else reads (the ends of the graph), newest first, up to four.
  void choose_outputs() {
    std::vector<Value> leaves;
    for (auto it = pool_.rbegin(); it != pool_.rend() && leaves.size() < 4; ++it)
      if (!it->node->is_input() && it->node->result_info(it->index).uses.empty()) leaves.push_back(*it);
    if (leaves.empty()) leaves.push_back(pool_.back());
    g_.set_outputs(leaves);
    run_dce(g_);
  }

  std::mt19937_64 rng_;
  const GenOptions& o_;
  FuzzCase& c_;
  Graph& g_;
  std::vector<Value> pool_;
};

}  // namespace

std::vector<HostTensor> FuzzCase::inputs() const {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    in.push_back(random_tensor(graph.inputs()[i]->meta(), input_seeds.at(i), int_bounds.at(i)));
  return in;
}

FuzzCase FuzzCase::clone() const {
  FuzzCase c;
  c.graph = graph.clone();
  c.int_bounds = int_bounds;
  c.input_seeds = input_seeds;
  c.seed = seed;
  return c;
}

FuzzCase random_graph(uint64_t seed, const GenOptions& options) {
  FuzzCase c;
  c.seed = seed;
  c.graph = Graph(fmt::format("fuzz{}", seed));
  Generator(seed, options, c).run();
  return c;
}

}  // namespace kiln::fuzz
