// Lowering of fusion groups to kernels (see lower.h). KernelBuilder holds one kernel under
// construction: its buffers, the scopes of the loops being built (where let statements go)
// and value_at, which gives the value of any graph value at a multi-index as an expression.
#include "codegen/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "codegen/pointwise_exprs.h"
#include "codegen/simplify.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/meta/meta.h"

namespace kiln::codegen {

namespace {

using fusion::FusionGroup;
using fusion::KernelKind;
using Index = std::vector<ExprPtr>;

// The type values of `t` are computed in: f16/bf16 in f32, i32 and bool in i64.
DType compute_dtype(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return DType::F32;
    case DType::I32:
    case DType::Bool: return DType::I64;
    default: return t;
  }
}
// The type reductions accumulate in: f32 for f16/bf16/f32, f64 for f64, i64 for integers.
DType acc_dtype(DType t) {
  if (t == DType::F64) return DType::F64;
  return is_floating(t) ? DType::F32 : DType::I64;
}

bool is_predicate(Op op) {
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::LogicalAnd: case Op::LogicalOr: case Op::LogicalNot: return true;
    default: return false;
  }
}

// A Scalar attribute converted to dtype `dt` exactly as the reference stores it (a float on
// an int tensor truncates; NaN and out-of-range give the type's minimum).
ExprPtr scalar_constant(const AttrValue& v, DType dt) {
  HostTensor t = HostTensor::empty(dt, {});
  if (auto* iv = std::get_if<int64_t>(&v)) t.set_int(0, *iv);
  else if (auto* bv = std::get_if<bool>(&v)) t.set_int(0, *bv);
  else t.set(0, std::get<double>(v));
  if (is_floating(dt)) return imm(dt, t.get(0));
  auto e = std::make_shared<Expr>(*imm(t.get_int(0)));
  e->dtype = dt;
  return e;
}

int64_t product(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t d = from; d < std::min(to, s.size()); ++d) p *= s[d];
  return p;
}

// Row-major multi-index of `flat` over `dims` (simplified later).
Index unravel(const ExprPtr& flat, const Shape& dims) {
  Index idx(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    ExprPtr q = stride == 1 ? flat : floordiv(flat, imm(stride));
    idx[d] = d == 0 ? q : mod(q, imm(std::max<int64_t>(dims[d], 1)));
    stride *= std::max<int64_t>(dims[d], 1);
  }
  return idx;
}

ExprPtr offset_of(const Index& idx, const Strides& strides) {
  ExprPtr off = imm(0);
  for (size_t d = 0; d < idx.size(); ++d)
    if (strides[d] != 0) off = add(off, mul(idx[d], imm(strides[d])));
  return off;
}
ExprPtr ravel(const Index& idx, const Shape& shape) { return offset_of(idx, contiguous_strides(shape)); }

// The index into an operand of shape `in` broadcast to an index over a (longer) shape.
Index broadcast_index(const Index& idx, const Shape& in) {
  Index out(in.size());
  size_t lead = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] == 1 ? imm(0) : idx[d + lead];
  return out;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

std::string value_key(Value v) { return fmt::format("{}#{}", static_cast<const void*>(v.node), v.index); }

std::vector<bool> reduced_dims_of(const Node* n) {
  std::optional<IntList> dims;
  if (const AttrValue* v = n->attrs().find("dim"))
    dims = std::holds_alternative<int64_t>(*v) ? IntList{std::get<int64_t>(*v)} : std::get<IntList>(*v);
  return meta::reduced_dims(n->input(0).meta(), dims);
}

CombineOp combine_of(const Node* n) {
  switch (n->op()) {
    case Op::Sum: return CombineOp::Sum;
    case Op::Prod: return CombineOp::Prod;
    case Op::Amax: return CombineOp::Max;
    case Op::Amin: return CombineOp::Min;
    case Op::Argmax: return CombineOp::Argmax;
    default: fail("node %{}: reduction '{}' has no kernel lowering (decompose it first)", n->name(), op_name(n->op()));
  }
}

std::string node_list(const std::vector<Node*>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < 12; ++i) s += (i ? ", " : "") + std::string(op_name(nodes[i]->op()));
  if (nodes.size() > 12) s += ", ...";
  return s;
}

class GraphLowering;

class KernelBuilder {
 public:
  KernelBuilder(GraphLowering& gl, const FusionGroup* group, std::string comment);

  // The kernel buffer for graph buffer `gb` (registered on first use).
  std::string buffer(int gb, BufferRole role);
  ExprPtr value_at(Value v, const Index& idx);

  // Scopes: each loop body being built. Lets go to the outermost scope whose vars they use.
  void push_scope(std::vector<StmtPtr>* stmts, std::set<std::string> defines, bool conditional = false) {
    scopes_.push_back({stmts, std::move(defines), {}, conditional});
  }
  void pop_scope() { scopes_.pop_back(); }
  std::vector<StmtPtr>& stmts() { return *scopes_.back().stmts; }
  void emit(StmtPtr s) { scopes_.back().stmts->push_back(std::move(s)); }
  std::string fresh(const std::string& hint) {
    std::string base = sanitize(hint);
    if (base.empty() || !std::isalpha(static_cast<unsigned char>(base[0]))) base = "v" + base;
    std::string n = base;
    for (int i = 1; !names_.insert(n).second; ++i) n = fmt::format("{}_{}", base, i);
    return n;
  }
  // Binds `e` to a let (readable code, no repeated subexpressions) unless it is trivial or
  // evaluation is conditional (a select branch must not evaluate what it does not select).
  ExprPtr bind(ExprPtr e, const std::string& hint, const std::string& memo_key = "");
  void define(const std::string& name) { scopes_.back().defines.insert(name); }

  // Iterates `shape` with an outer parallel loop and an inner contiguous loop, calling
  // body(idx) inside.
  void loop_over(const Shape& shape, const std::function<void(const Index&)>& body, const std::string& comment);

  void set_reduced(const Node* n, ExprPtr v) { reduced_[n] = std::move(v); }
  Kernel finish(StmtPtr body);
  const std::vector<int>& args() const { return args_; }

 private:
  ExprPtr compute(Value v, const Index& idx);
  ExprPtr pointwise(const Node* n, const Index& idx);
  ExprPtr view(const Node* n, int result, const Index& idx);
  ExprPtr creation(const Node* n, const Index& idx);
  ExprPtr gather(const Node* n, const Index& idx);
  bool materialized(Value v) const;

  struct Scope {
    std::vector<StmtPtr>* stmts;
    std::set<std::string> defines;
    std::map<std::string, ExprPtr> memo;
    bool conditional;
  };
  GraphLowering& gl_;
  const FusionGroup* group_;
  Kernel kernel_;
  std::vector<int> args_;
  std::map<int, std::string> kbuf_;
  std::map<const Node*, std::string> constants_;
  std::map<const Node*, ExprPtr> reduced_;
  std::vector<Scope> scopes_;
  std::set<std::string> names_{"p", "i", "r", "row", "j", "tile", "col", "buffers", "scalars"};
};

class GraphLowering {
 public:
  GraphLowering(const Graph& g, const fusion::FusionPlan& plan) : g_(g), plan_(plan) {}

  LoweredGraph run();

  const fusion::FusionPlan& plan() const { return plan_; }
  LoweredGraph& out() { return out_; }
  int buffer_of(Value v) const {
    auto it = buffer_of_.find(value_key(v));
    KILN_INTERNAL_ASSERT(it != buffer_of_.end(), "a value read by a kernel is materialized by an earlier group");
    return it->second;
  }
  int new_buffer(Value v) {
    GraphBuffer b;
    b.kind = GraphBuffer::Kind::Arena;
    b.meta = v.meta().contiguous();
    b.numel = v.meta().numel();
    b.what = "%" + v.name();
    b.first_step = b.last_step = static_cast<int>(out_.steps.size());
    out_.buffers.push_back(b);
    int id = static_cast<int>(out_.buffers.size()) - 1;
    buffer_of_[value_key(v)] = id;
    return id;
  }
  int temp_buffer(DType dt, const Shape& shape, const std::string& what) {
    GraphBuffer b;
    b.meta = TensorMeta(dt, shape);
    b.numel = numel(shape);
    b.what = what;
    b.first_step = b.last_step = static_cast<int>(out_.steps.size());
    out_.buffers.push_back(b);
    return static_cast<int>(out_.buffers.size()) - 1;
  }
  std::string kernel_name() { return fmt::format("k{}", out_.kernels.size()); }
  void add_kernel_step(KernelBuilder& kb, Kernel k, int group) {
    Step s;
    s.kind = Step::Kind::Kernel;
    s.kernel = static_cast<int>(out_.kernels.size());
    s.args = kb.args();
    s.group = group;
    out_.kernels.push_back(std::move(k));
    touch(s.args);
    out_.steps.push_back(std::move(s));
  }
  void touch(const std::vector<int>& bufs) {
    int step = static_cast<int>(out_.steps.size());
    for (int b : bufs) out_.buffers[b].last_step = std::max(out_.buffers[b].last_step, step);
  }

 private:
  void lower_pointwise(const FusionGroup& grp);
  void lower_reduction(const FusionGroup& grp);
  bool lower_column_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions,
                              std::map<const Node*, int>& level, int levels);
  void lower_scatter(const FusionGroup& grp);
  void lower_matmul(const FusionGroup& grp);
  // A reduction group's outputs as kernel buffers: those over the full space S (written in
  // the innermost loops) and those per row (reductions and values in the reduced space).
  using NamedOutputs = std::vector<std::pair<Value, std::string>>;
  std::pair<NamedOutputs, NamedOutputs> split_reduction_outputs(KernelBuilder& kb, const FusionGroup& grp, const Shape& S) {
    NamedOutputs full_outs, row_outs;
    for (Value v : grp.outputs) {
      std::string name = kb.buffer(new_buffer(v), BufferRole::Output);
      if (v.meta().shape == S && v.node->category() != OpCategory::Reduction) full_outs.emplace_back(v, name);
      else row_outs.emplace_back(v, name);
    }
    return {full_outs, row_outs};
  }
  // A kernel writing `src` (read through index map `map` from an index over `shape`) into a
  // new contiguous buffer; returns the buffer.
  int lower_copy(Value src, const Shape& shape, const std::function<Index(const Index&)>& map, const std::string& why);

  const Graph& g_;
  const fusion::FusionPlan& plan_;
  LoweredGraph out_;
  std::map<std::string, int> buffer_of_;
};

// ---------------------------------------------------------------- KernelBuilder

KernelBuilder::KernelBuilder(GraphLowering& gl, const FusionGroup* group, std::string comment)
    : gl_(gl), group_(group) {
  kernel_.name = gl.kernel_name();
  kernel_.comment = std::move(comment);
}

std::string KernelBuilder::buffer(int gb, BufferRole role) {
  auto it = kbuf_.find(gb);
  if (it != kbuf_.end()) return it->second;
  const GraphBuffer& g = gl_.out().buffers[gb];
  Buffer b;
  b.name = fmt::format("b{}", kernel_.buffers.size());
  b.dtype = g.meta.dtype;
  b.role = role;
  b.numel = g.numel;
  b.what = g.what;
  kernel_.buffers.push_back(b);
  args_.push_back(gb);
  names_.insert(b.name);
  return kbuf_[gb] = b.name;
}

bool KernelBuilder::materialized(Value v) const {
  if (v.node->is_input()) return true;
  int gid = gl_.plan().group_of.at(v.node);
  if (group_ && gid == group_->id) return false;
  return gl_.plan().groups[gid].kind != KernelKind::Alias;
}

ExprPtr KernelBuilder::bind(ExprPtr e, const std::string& hint, const std::string& memo_key) {
  e = simplify(e);
  if (e->kind == ExprKind::Var || e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm ||
      e->kind == ExprKind::Load)
    return e;
  for (auto& s : scopes_)
    if (s.conditional) return e;
  std::set<std::string> used;
  visit(e, [&](const Expr& x) {
    if (x.kind == ExprKind::Var) used.insert(x.name);
  });
  size_t target = 0;
  for (size_t i = scopes_.size(); i-- > 0;) {
    bool uses = std::any_of(used.begin(), used.end(), [&](const std::string& u) { return scopes_[i].defines.count(u); });
    if (uses) {
      target = i;
      break;
    }
  }
  std::string name = fresh(hint);
  scopes_[target].stmts->push_back(let(name, e));
  scopes_[target].defines.insert(name);
  ExprPtr v = value_var(name, e->dtype);
  if (!memo_key.empty()) scopes_[target].memo[memo_key] = v;
  return v;
}

ExprPtr KernelBuilder::value_at(Value v, const Index& idx) {
  KILN_INTERNAL_ASSERT(idx.size() == v.meta().shape.size(), "an index has one entry per dim of the value");
  if (materialized(v)) {
    int gb = gl_.buffer_of(v);
    const GraphBuffer& g = gl_.out().buffers[gb];
    return load(buffer(gb, BufferRole::Input), g.meta.dtype, simplify(offset_of(idx, g.meta.strides)));
  }
  if (auto it = reduced_.find(v.node); it != reduced_.end()) return it->second;
  std::string key = value_key(v);
  for (auto& i : idx) key += "," + print_expr(simplify(i));
  for (size_t i = scopes_.size(); i-- > 0;)
    if (auto it = scopes_[i].memo.find(key); it != scopes_[i].memo.end()) return it->second;
  ExprPtr e = compute(v, idx);
  if (v.node->category() == OpCategory::Pointwise) e = bind(e, v.name(), key);
  return e;
}

ExprPtr KernelBuilder::compute(Value v, const Index& idx) {
  const Node* n = v.node;
  switch (n->category()) {
    case OpCategory::Pointwise: return pointwise(n, idx);
    case OpCategory::View: return view(n, v.index, idx);
    case OpCategory::Creation: return creation(n, idx);
    case OpCategory::Gather: return gather(n, idx);
    case OpCategory::Reduction:
      fail("node %{}: {} is read outside the reduction group that computes it", n->name(), op_name(n->op()));
    default:
      fail("node %{}: '{}' ({}) cannot be computed inside a loop kernel", n->name(), op_name(n->op()),
           category_name(n->category()));
  }
}

ExprPtr KernelBuilder::pointwise(const Node* n, const Index& idx) {
  DType out = n->meta().dtype;
  auto in = [&](int j) { return value_at(n->input(j), broadcast_index(idx, n->input(j).meta().shape)); };
  auto as = [](DType ct, ExprPtr x) { return cast(compute_dtype(ct), cast(ct, std::move(x))); };
  switch (n->op()) {
    case Op::To: return cast(out, in(0));
    case Op::Where: return select(cast(DType::Bool, in(0)), cast(out, in(1)), cast(out, in(2)));
    case Op::MaskedFill:
      return select(cast(DType::Bool, in(1)), scalar_constant(*n->attrs().find("value"), out), cast(out, in(0)));
    case Op::Clamp: {
      DType ct = compute_dtype(out);
      ExprPtr x = as(out, in(0));
      if (const AttrValue* lo = n->attrs().find("min")) x = call("clamp_min", ct, {x, cast(ct, scalar_constant(*lo, out))});
      if (const AttrValue* hi = n->attrs().find("max")) x = call("clamp_max", ct, {x, cast(ct, scalar_constant(*hi, out))});
      return cast(out, x);
    }
    default: break;
  }
  DType ct = out;
  if (n->inputs().size() >= 2) {
    std::vector<TensorMeta> metas;
    for (auto& x : n->inputs()) metas.push_back(x.meta());
    ct = meta::result_type(metas);
    if (n->op() == Op::Div && !is_floating(ct)) ct = kDefaultFloat;
  } else if (n->op() == Op::LogicalNot) {
    ct = DType::Bool;
  }
  std::string fn(op_name(n->op()));
  if (n->op() == Op::Gelu && n->attrs().get_string("approximate") == "tanh") fn = "gelu_tanh";
  if (!find_pointwise_expr(fn)) pointwise_expr(n->op());  // throws, naming the op
  std::vector<ExprPtr> args;
  for (int j = 0; j < static_cast<int>(n->inputs().size()); ++j) args.push_back(as(ct, in(j)));
  DType result = is_predicate(n->op()) ? DType::Bool : compute_dtype(out);
  return cast(out, call(fn, result, std::move(args)));
}

ExprPtr KernelBuilder::view(const Node* n, int result, const Index& idx) {
  Value x = n->inputs().empty() ? Value{} : n->input(0);
  const Shape& si = x ? x.meta().shape : Shape{};
  const Shape& so = n->meta(result).shape;
  switch (n->op()) {
    case Op::Contiguous: return value_at(x, idx);
    case Op::Reshape: return value_at(x, unravel(ravel(idx, so), si));
    case Op::Expand: return value_at(x, broadcast_index(idx, si));
    case Op::Permute: {
      IntList dims = n->attrs().get_ints("dims");
      Index in(si.size());
      for (size_t d = 0; d < dims.size(); ++d) in[normalize_dim(dims[d], static_cast<int64_t>(si.size()))] = idx[d];
      return value_at(x, in);
    }
    case Op::Transpose: {
      Index in = idx;
      int64_t r = static_cast<int64_t>(si.size());
      if (r > 0) std::swap(in[normalize_dim(n->attrs().get_int("dim0"), r)], in[normalize_dim(n->attrs().get_int("dim1"), r)]);
      return value_at(x, in);
    }
    case Op::Squeeze: {
      std::vector<bool> drop(si.size(), false);
      if (auto dims = n->attrs().opt_ints("dim")) {
        for (int64_t d : *dims) {
          int64_t k = normalize_dim(d, static_cast<int64_t>(si.size()));
          if (!si.empty() && si[k] == 1) drop[k] = true;
        }
      } else {
        for (size_t d = 0; d < si.size(); ++d) drop[d] = si[d] == 1;
      }
      Index in;
      size_t j = 0;
      for (size_t d = 0; d < si.size(); ++d) in.push_back(drop[d] ? imm(0) : idx[j++]);
      return value_at(x, in);
    }
    case Op::Unsqueeze: {
      int64_t d = normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(si.size()) + 1);
      Index in = idx;
      in.erase(in.begin() + d);
      return value_at(x, in);
    }
    case Op::Slice: {
      int64_t d = normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(si.size()));
      int64_t len = si[d];
      int64_t start = n->attrs().opt_int("start").value_or(0);
      if (start < 0) start += len;
      start = std::clamp<int64_t>(start, 0, len);
      Index in = idx;
      in[d] = add(mul(idx[d], imm(n->attrs().get_int("step"))), imm(start));
      return value_at(x, in);
    }
    case Op::Split: {
      int64_t d = normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(si.size()));
      int64_t at = 0;
      for (int j = 0; j < result; ++j) at += n->meta(j).shape[d];
      Index in = idx;
      in[d] = add(idx[d], imm(at));
      return value_at(x, in);
    }
    case Op::Cat: {
      DType out = n->meta().dtype;
      int64_t d = normalize_dim(n->attrs().get_int("dim"), static_cast<int64_t>(so.size()));
      struct Part {
        Value v;
        int64_t start, end;
      };
      std::vector<Part> parts;
      int64_t at = 0;
      for (auto& v : n->inputs()) {
        const Shape& s = v.meta().shape;
        if (s.size() == 1 && s[0] == 0) continue;  // skipped, as PyTorch does
        if (s[d] > 0) parts.push_back({v, at, at + s[d]});
        at += s[d];
      }
      if (parts.empty()) return imm(out, 0);
      // Each branch reads only where it is selected: evaluated in a conditional scope.
      std::vector<StmtPtr> none;
      auto branch = [&](const Part& p) {
        push_scope(scopes_.back().stmts, {}, /*conditional=*/true);
        Index in = idx;
        in[d] = sub(idx[d], imm(p.start));
        ExprPtr e = cast(out, value_at(p.v, in));
        pop_scope();
        return e;
      };
      std::vector<ExprPtr> branches;  // in input order, so buffers are numbered in input order
      for (const Part& p : parts) branches.push_back(branch(p));
      ExprPtr e = branches.back();
      for (size_t j = parts.size() - 1; j-- > 0;) e = select(call("lt", DType::Bool, {idx[d], imm(parts[j].end)}), branches[j], e);
      return e;
    }
    default: fail("node %{}: view '{}' has no index lowering", n->name(), op_name(n->op()));
  }
}

ExprPtr KernelBuilder::creation(const Node* n, const Index& idx) {
  const TensorMeta& m = n->meta();
  switch (n->op()) {
    case Op::Full: return scalar_constant(*n->attrs().find("fill_value"), m.dtype);
    case Op::Zeros: return scalar_constant(int64_t(0), m.dtype);
    case Op::Ones: return scalar_constant(int64_t(1), m.dtype);
    case Op::Arange: {
      ExprPtr i = idx.empty() ? imm(0) : idx[0];
      const Attrs& a = n->attrs();
      if (is_floating(m.dtype)) {
        ExprPtr v = call("add", DType::F64, {imm(DType::F64, a.get_float("start")),
                                             call("mul", DType::F64, {cast(DType::F64, i), imm(DType::F64, a.get_float("step"))})});
        return bind(cast(m.dtype, v), n->name());
      }
      auto as_int = [&](const char* k) {
        const AttrValue& v = *a.find(k);
        if (auto* iv = std::get_if<int64_t>(&v)) return *iv;
        return static_cast<int64_t>(std::get<double>(v));
      };
      return cast(m.dtype, add(mul(i, imm(as_int("step"))), imm(as_int("start"))));
    }
    case Op::Constant: {
      auto it = constants_.find(n);
      if (it == constants_.end()) {
        Buffer b;
        b.name = fmt::format("c{}", kernel_.constants.size());
        b.dtype = m.dtype;
        b.role = BufferRole::Constant;
        b.numel = m.numel();
        b.data = n->attrs().get_floats("values");
        b.what = "%" + n->name();
        // Stored as the reference stores them (rounded to the dtype).
        HostTensor t = HostTensor::from_doubles(m.dtype, {static_cast<int64_t>(b.data.size())}, b.data);
        b.data = t.to_doubles();
        kernel_.constants.push_back(b);
        names_.insert(b.name);
        it = constants_.emplace(n, b.name).first;
      }
      return load(it->second, m.dtype, simplify(ravel(idx, m.shape)));
    }
    default: break;
  }
  if (op_name(n->op()) == "rand") {
    auto seed = std::make_shared<Expr>(*imm(n->attrs().get_int("seed")));
    return bind(cast(m.dtype, call("rand_uniform", DType::F32, {seed, simplify(ravel(idx, m.shape))})), n->name());
  }
  fail("node %{}: creation op '{}' has no kernel lowering", n->name(), op_name(n->op()));
}

ExprPtr KernelBuilder::gather(const Node* n, const Index& idx) {
  Value self = n->input(0), index = n->input(1);
  const Shape& ss = self.meta().shape;
  int64_t rank = std::max<int64_t>(static_cast<int64_t>(ss.size()), 1);
  int64_t dim = normalize_dim(n->attrs().get_int("dim"), rank);
  int64_t size = ss.empty() ? 1 : ss[dim];
  ExprPtr iv = cast(DType::I64, value_at(index, idx));
  ExprPtr checked = bind(call("check_index", DType::I64, {iv, imm(size)}), n->name() + "_index");
  if (ss.empty()) return value_at(self, {});
  Index in = idx;
  if (in.empty()) in.push_back(imm(0));
  in[dim] = checked;
  return value_at(self, in);
}

void KernelBuilder::loop_over(const Shape& shape, const std::function<void(const Index&)>& body, const std::string& comment) {
  size_t n = shape.size();
  if (n == 0) {
    body({});
    return;
  }
  // Inner loop: the trailing dims, merged until there are enough iterations to vectorize
  // (but a large tensor keeps an outer loop to spread over threads).
  size_t k = n - 1;
  while (k > 0 && product(shape, k) < 64 && (k > 1 || product(shape) <= 65536)) --k;
  Shape outer_dims(shape.begin(), shape.begin() + static_cast<long>(k)), inner_dims(shape.begin() + static_cast<long>(k), shape.end());
  int64_t outer = product(outer_dims), inner = product(inner_dims);
  std::vector<StmtPtr> pbody, ibody;
  ExprPtr p = var("p", 0, std::max<int64_t>(outer - 1, 0)), i = var("i", 0, std::max<int64_t>(inner - 1, 0));
  bool has_outer = outer != 1;
  if (has_outer) push_scope(&pbody, {"p"});
  push_scope(&ibody, {"i"});
  Index idx = has_outer ? unravel(p, outer_dims) : Index(outer_dims.size(), imm(0));
  for (auto& e : unravel(i, inner_dims)) idx.push_back(e);
  for (auto& e : idx) e = simplify(e);
  body(idx);
  pop_scope();
  StmtPtr inner_loop = for_loop("i", inner, LoopKind::Vectorized, std::move(ibody), has_outer ? "" : comment);
  if (!has_outer) {
    emit(inner_loop);
    return;
  }
  pbody.push_back(inner_loop);
  pop_scope();
  emit(for_loop("p", outer, LoopKind::Parallel, std::move(pbody), comment));
}

Kernel KernelBuilder::finish(StmtPtr body) {
  kernel_.body = simplify(body);
  return std::move(kernel_);
}

// ---------------------------------------------------------------- GraphLowering

std::string group_comment(const FusionGroup& grp) {
  std::string names;
  for (size_t i = 0; i < grp.nodes.size() && i < 8; ++i) names += (i ? " " : "") + ("%" + grp.nodes[i]->name());
  if (grp.nodes.size() > 8) names += " ...";
  return fmt::format("group {} {} [{}]: {}", grp.id, kernel_kind_name(grp.kind), node_list(grp.nodes), names);
}

std::string outputs_comment(const std::vector<Value>& outs) {
  std::string s = "computes";
  for (auto& v : outs) s += " %" + v.name();
  return s;
}

void GraphLowering::lower_pointwise(const FusionGroup& grp) {
  KernelBuilder kb(*this, &grp, group_comment(grp));
  const Shape& shape = grp.outputs.at(0).meta().shape;
  std::vector<std::pair<Value, std::string>> outs;
  for (Value v : grp.outputs) {
    KILN_INTERNAL_ASSERT(v.meta().shape == shape, "the outputs of a pointwise group share one iteration space");
    outs.emplace_back(v, kb.buffer(new_buffer(v), BufferRole::Output));
  }
  std::vector<StmtPtr> top;
  kb.push_scope(&top, {});
  kb.loop_over(
      shape,
      [&](const Index& idx) {
        for (auto& [v, name] : outs)
          kb.emit(store(name, simplify(ravel(idx, shape)), cast(v.meta().dtype, kb.value_at(v, idx))));
      },
      outputs_comment(grp.outputs));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

void GraphLowering::lower_reduction(const FusionGroup& grp) {
  std::vector<const Node*> reductions;
  for (const Node* n : grp.nodes)
    if (n->category() == OpCategory::Reduction) reductions.push_back(n);
  KILN_INTERNAL_ASSERT(!reductions.empty(), "a reduction group holds a reduction");
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t nrow = product(kept), nred = product(rdims);

  // Level of each reduction: 1 + the deepest reduction its input depends on in this group.
  std::map<const Node*, int> level;
  std::function<int(const Node*)> depth = [&](const Node* n) -> int {
    int d = 0;
    for (Value in : n->inputs()) {
      const Node* m = in.node;
      if (m->is_input()) continue;
      int gid = plan_.group_of.at(m);
      if (gid != grp.id && plan_.groups[gid].kind != KernelKind::Alias) continue;
      if (m->category() == OpCategory::Reduction && gid == grp.id) {
        if (!level.count(m)) level[m] = 1 + depth(m);
        d = std::max(d, level[m]);
      } else {
        d = std::max(d, depth(m));
      }
    }
    return d;
  };
  int levels = 0;
  for (const Node* r : reductions) {
    if (!level.count(r)) level[r] = 1 + depth(r);
    levels = std::max(levels, level[r]);
    KILN_INTERNAL_ASSERT(r->input(0).meta().shape == S && reduced_dims_of(r) == red,
                         "the reductions of a group share one input shape and reduced dims");
  }

  if (lower_column_reduction(grp, reductions, level, levels)) return;

  KernelBuilder kb(*this, &grp, group_comment(grp));
  auto [full_outs, row_outs] = split_reduction_outputs(kb, grp, S);

  std::vector<StmtPtr> top, rowbody;
  kb.push_scope(&top, {});
  ExprPtr row = var("row", 0, std::max<int64_t>(nrow - 1, 0));
  ExprPtr r = var("r", 0, std::max<int64_t>(nred - 1, 0));
  kb.push_scope(&rowbody, {"row"});
  Index kept_idx = unravel(row, kept), red_idx = unravel(r, rdims);
  auto full_index = [&]() {
    Index full;
    size_t a = 0, b = 0;
    for (size_t d = 0; d < S.size(); ++d) full.push_back(simplify(red[d] ? red_idx[b++] : kept_idx[a++]));
    return full;
  };
  for (int lvl = 1; lvl <= levels; ++lvl) {
    std::vector<const Node*> here;
    for (const Node* n : reductions)
      if (level[n] == lvl) here.push_back(n);
    std::vector<StmtPtr> body;
    std::map<const Node*, std::string> acc;
    std::map<const Node*, DType> acc_type;
    for (const Node* n : here) {
      std::string a = kb.fresh(n->name() + "_acc");
      acc[n] = a;
      bool arith = n->op() == Op::Sum || n->op() == Op::Prod;
      acc_type[n] = arith ? acc_dtype(n->meta().dtype) : compute_dtype(n->input(0).meta().dtype);
      kb.emit(decl_acc(a, acc_type[n], combine_of(n)));
      kb.define(a);
      kb.define(a + "_idx");
    }
    kb.push_scope(&body, {"r"});
    std::string names;
    for (const Node* n : here) {
      ExprPtr x = kb.value_at(n->input(0), full_index());
      if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
      x = cast(acc_type[n], x);
      kb.emit(accumulate(acc[n], combine_of(n), x, n->op() == Op::Argmax ? r : nullptr));
      names += " %" + n->name();
    }
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Serial, std::move(body), "reduces" + names));
    for (const Node* n : here) {
      std::string fin = kb.fresh(n->name());
      ExprPtr v = n->op() == Op::Argmax ? value_var(acc[n] + "_idx", DType::I64) : value_var(acc[n], acc_type[n]);
      kb.emit(let(fin, cast(n->meta().dtype, v)));
      kb.define(fin);
      kb.set_reduced(n, value_var(fin, n->meta().dtype));
    }
  }
  for (auto& [v, name] : row_outs) {
    Index idx = unravel(row, v.meta().shape);
    for (auto& e : idx) e = simplify(e);
    kb.emit(store(name, row, cast(v.meta().dtype, kb.value_at(v, idx))));
  }
  if (!full_outs.empty()) {
    std::vector<StmtPtr> body;
    kb.push_scope(&body, {"r"});
    std::vector<Value> vs;
    for (auto& [v, name] : full_outs) {
      Index full = full_index();
      kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
      vs.push_back(v);
    }
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Vectorized, std::move(body), outputs_comment(vs)));
  }
  kb.pop_scope();
  kb.emit(for_loop("row", nrow, LoopKind::Parallel, std::move(rowbody), "rows of " + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

// Reductions over leading dims that keep the innermost one (a bias gradient: sum over the
// rows of [N, C]) as S = [outer, reduced, inner]. Iterating one kept point at a time would
// read the input with a stride of C; instead each parallel iteration takes a tile of T
// consecutive kept points, keeps their accumulators in a temp buffer (one per reduction) and
// sweeps the reduced dims outside a contiguous, vectorizable loop over the tile:
//   parallel for t { for c: acc[t*T + c] = identity
//                    for r { for c: acc[t*T + c] = combine(acc[t*T + c], x[o, r, c]) } ... }
// Each accumulator sees the values in the reference's order, so nothing reassociates.
// Returns false (the row lowering applies) for other shapes and for argmax.
bool GraphLowering::lower_column_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions,
                                           std::map<const Node*, int>& level, int levels) {
  const Shape& S = reductions[0]->input(0).meta().shape;
  std::vector<bool> red = reduced_dims_of(reductions[0]);
  if (S.empty() || red.back()) return false;
  for (const Node* n : reductions)
    if (n->op() == Op::Argmax) return false;
  size_t d0 = 0;
  while (d0 < S.size() && !red[d0]) ++d0;
  size_t d1 = d0;
  while (d1 < S.size() && red[d1]) ++d1;  // reduced dims: [d0, d1)
  for (size_t d = d1; d < S.size(); ++d)
    if (red[d]) return false;
  Shape kept, rdims;
  for (size_t d = 0; d < S.size(); ++d) (red[d] ? rdims : kept).push_back(S[d]);
  int64_t C = product(S, d1), nred = product(rdims), nrow = product(kept);
  if (C < 8 || nred < 2 || nrow == 0) return false;
  // The tile: a divisor of C (so tiles never straddle an outer index) up to 256 columns,
  // small enough for 16 tiles to share among threads when C allows (but not under 32).
  int64_t T = 1;
  for (int64_t d = std::min<int64_t>(C, 256); d >= 1; --d)
    if (C % d == 0 && (T == 1 || (T > 32 && nrow / T < 16 && d >= 32))) T = d;
  if (T < 8) return false;

  KernelBuilder kb(*this, &grp, group_comment(grp));
  auto [full_outs, row_outs] = split_reduction_outputs(kb, grp, S);
  std::vector<StmtPtr> top, tbody;
  kb.push_scope(&top, {});
  ExprPtr t = var("tile", 0, nrow / T - 1), c = var("col", 0, T - 1);
  ExprPtr r = var("r", 0, nred - 1);
  ExprPtr row = add(mul(t, imm(T)), c);  // the flat kept index
  kb.push_scope(&tbody, {"tile"});
  Index kept_idx = unravel(row, kept), red_idx = unravel(r, rdims);
  auto full_index = [&]() {
    Index full;
    size_t a = 0, b = 0;
    for (size_t d = 0; d < S.size(); ++d) full.push_back(simplify(red[d] ? red_idx[b++] : kept_idx[a++]));
    return full;
  };
  auto tile_loop = [&](const std::function<void()>& body, const std::string& comment) {
    std::vector<StmtPtr> cbody;
    kb.push_scope(&cbody, {"col"});
    body();
    kb.pop_scope();
    return for_loop("col", T, LoopKind::Vectorized, std::move(cbody), comment);
  };
  for (int lvl = 1; lvl <= levels; ++lvl) {
    std::vector<const Node*> here;
    for (const Node* n : reductions)
      if (level[n] == lvl) here.push_back(n);
    std::map<const Node*, std::string> acc;
    std::map<const Node*, DType> acc_type;
    std::string names;
    for (const Node* n : here) {
      bool arith = n->op() == Op::Sum || n->op() == Op::Prod;
      acc_type[n] = arith ? acc_dtype(n->meta().dtype) : compute_dtype(n->input(0).meta().dtype);
      acc[n] = kb.buffer(temp_buffer(acc_type[n], {nrow}, "%" + n->name() + " accumulators"), BufferRole::Temp);
      names += " %" + n->name();
    }
    kb.emit(tile_loop(
        [&] {
          for (const Node* n : here) {
            DType at = acc_type[n];
            bool fl = is_floating(at);
            double id = 0;
            switch (combine_of(n)) {
              case CombineOp::Sum: id = 0; break;
              case CombineOp::Prod: id = 1; break;
              case CombineOp::Max: id = fl ? -INFINITY : static_cast<double>(INT64_MIN); break;
              case CombineOp::Min: id = fl ? INFINITY : static_cast<double>(INT64_MAX); break;
              case CombineOp::Argmax: break;
            }
            ExprPtr init = imm(at, id);
            if (!fl) {  // exactly INT64_MIN / INT64_MAX (a double cannot hold INT64_MAX)
              auto e = std::make_shared<Expr>(*imm(combine_of(n) == CombineOp::Max ? INT64_MIN
                                                   : combine_of(n) == CombineOp::Min ? INT64_MAX
                                                                                     : static_cast<int64_t>(id)));
              e->dtype = at;
              init = e;
            }
            kb.emit(store(acc[n], simplify(row), init));
          }
        },
        "starts" + names));
    std::vector<StmtPtr> rbody;
    kb.push_scope(&rbody, {"r"});
    kb.emit(tile_loop(
        [&] {
          for (const Node* n : here) {
            DType at = acc_type[n];
            ExprPtr x = kb.value_at(n->input(0), full_index());
            if (n->op() == Op::Sum || n->op() == Op::Prod) x = cast(n->meta().dtype, x);
            x = cast(at, x);
            const char* fn = n->op() == Op::Sum ? "add" : n->op() == Op::Prod ? "mul" : n->op() == Op::Amax ? "max_step" : "min_step";
            ExprPtr cur = load(acc[n], at, simplify(row));
            kb.emit(store(acc[n], simplify(row), call(fn, at, {cur, x})));
          }
        },
        ""));
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Serial, std::move(rbody), "reduces" + names));
    for (const Node* n : here) kb.set_reduced(n, cast(n->meta().dtype, load(acc[n], acc_type[n], simplify(row))));
  }
  if (!row_outs.empty())
    kb.emit(tile_loop(
        [&] {
          for (auto& [v, name] : row_outs) {
            Index idx = unravel(row, v.meta().shape);
            for (auto& e : idx) e = simplify(e);
            kb.emit(store(name, simplify(row), cast(v.meta().dtype, kb.value_at(v, idx))));
          }
        },
        "computes reduced outputs"));
  if (!full_outs.empty()) {
    std::vector<StmtPtr> rbody;
    kb.push_scope(&rbody, {"r"});
    std::vector<Value> vs;
    for (auto& [v, name] : full_outs) vs.push_back(v);
    kb.emit(tile_loop(
        [&] {
          for (auto& [v, name] : full_outs) {
            Index full = full_index();
            kb.emit(store(name, simplify(ravel(full, S)), cast(v.meta().dtype, kb.value_at(v, full))));
          }
        },
        ""));
    kb.pop_scope();
    kb.emit(for_loop("r", nred, LoopKind::Serial, std::move(rbody), outputs_comment(vs)));
  }
  kb.pop_scope();
  kb.emit(for_loop("tile", nrow / T, LoopKind::Parallel, std::move(tbody), fmt::format("tiles of {} columns of ", T) + outputs_comment(grp.outputs)));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
  return true;
}

void GraphLowering::lower_scatter(const FusionGroup& grp) {
  const Node* n = nullptr;
  for (const Node* m : grp.nodes)
    if (m->op() == Op::ScatterAdd) n = m;
  KILN_INTERNAL_ASSERT(n, "a scatter group holds a scatter_add");
  Value self = n->input(0), index = n->input(1), src = n->input(2);
  const Shape& ss = self.meta().shape;
  DType dt = n->meta().dtype;
  int64_t rank = std::max<int64_t>(static_cast<int64_t>(ss.size()), 1);
  int64_t dim = normalize_dim(n->attrs().get_int("dim"), rank);
  KernelBuilder kb(*this, &grp, group_comment(grp));
  Value out{const_cast<Node*>(n), 0};
  std::string ob = kb.buffer(new_buffer(out), BufferRole::Output);
  std::vector<StmtPtr> top;
  kb.push_scope(&top, {});
  kb.loop_over(
      ss, [&](const Index& idx) { kb.emit(store(ob, simplify(ravel(idx, ss)), cast(dt, kb.value_at(self, idx)))); },
      "copies %" + self.name() + " into %" + n->name());
  // Serial in index order, as the reference accumulates: no two iterations race.
  const Shape& is = index.meta().shape;
  std::vector<StmtPtr> body;
  ExprPtr j = var("j", 0, std::max<int64_t>(numel(is) - 1, 0));
  kb.push_scope(&body, {"j"});
  Index jidx = unravel(j, is);
  for (auto& e : jidx) e = simplify(e);
  ExprPtr to = kb.bind(call("check_index", DType::I64, {cast(DType::I64, kb.value_at(index, jidx)), imm(ss.empty() ? 1 : ss[dim])}),
                       "to");
  Index tidx = jidx;
  if (tidx.empty()) tidx.push_back(imm(0));
  tidx[dim] = to;
  ExprPtr at = ss.empty() ? imm(0) : simplify(ravel(tidx, ss));
  DType ct = compute_dtype(dt);
  ExprPtr sum = call("add", ct, {cast(ct, load(ob, dt, at)), cast(ct, cast(dt, kb.value_at(src, jidx)))});
  kb.emit(store(ob, at, cast(dt, sum)));
  kb.pop_scope();
  kb.emit(for_loop("j", numel(is), LoopKind::Serial, std::move(body), "scatter_add %" + n->name()));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

int GraphLowering::lower_copy(Value src, const Shape& shape, const std::function<Index(const Index&)>& map, const std::string& why) {
  int gb = temp_buffer(src.meta().dtype, shape, why);
  KernelBuilder kb(*this, nullptr, why);
  std::string ob = kb.buffer(gb, BufferRole::Output);
  std::vector<StmtPtr> top;
  kb.push_scope(&top, {});
  kb.loop_over(
      shape, [&](const Index& idx) { kb.emit(store(ob, simplify(ravel(idx, shape)), kb.value_at(src, map(idx)))); },
      "copies %" + src.name());
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), -1);
  return gb;
}

void GraphLowering::lower_matmul(const FusionGroup& grp) {
  const Node* n = nullptr;
  for (const Node* m : grp.nodes)
    if (m->op() == Op::Matmul || m->op() == Op::Bmm) n = m;
  KILN_INTERNAL_ASSERT(n, "a matmul group holds a matmul or bmm");
  Value a = n->input(0), b = n->input(1);
  Shape sa = a.meta().shape, sb = b.meta().shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  MatmulCall mm;
  mm.dtype = n->meta().dtype;
  mm.m = sa[sa.size() - 2];
  mm.k = sa.back();
  mm.n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bbat(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(ba, bbat);
  mm.batch = numel(batch);
  mm.label = fmt::format("%{} = {}(%{}, %{})", n->name(), op_name(n->op()), a.name(), b.name());

  // An operand goes to BLAS as it is when it is a contiguous buffer (or the transpose of
  // one, as a flag) whose batch is the whole batch or a single matrix; otherwise a copy
  // kernel lays it out as [batch, rows, cols].
  auto operand = [&](Value v, const Shape& s2, const Shape& vb, int64_t rows, int64_t cols, bool& trans, int64_t& bstride) {
    auto contiguous_buffer = [&](Value x) -> int {
      if (x.node->is_input()) {
        if (!x.meta().is_contiguous()) return -1;
      } else if (plan_.groups[plan_.group_of.at(x.node)].kind == KernelKind::Alias) {
        return -1;
      }
      return buffer_of(x);
    };
    int64_t vbatch = numel(vb);
    bool batch_ok = vbatch == mm.batch ? (Shape(batch.end() - static_cast<long>(vb.size()), batch.end()) == vb &&
                                          numel(Shape(batch.begin(), batch.end() - static_cast<long>(vb.size()))) == 1)
                                       : vbatch == 1;
    if (batch_ok) {
      int gb = contiguous_buffer(v);
      if (gb >= 0) {
        trans = false;
        bstride = vbatch == 1 ? 0 : rows * cols;
        return gb;
      }
      // transpose of the last two dims of a contiguous buffer: a BLAS transpose flag.
      const Node* t = v.node;
      bool swaps_last = false;
      if (!t->is_input() && plan_.groups[plan_.group_of.at(t)].kind == KernelKind::Alias && v.meta().rank() >= 2) {
        int64_t r = v.meta().rank();
        if (t->op() == Op::Transpose) {
          int64_t d0 = normalize_dim(t->attrs().get_int("dim0"), r), d1 = normalize_dim(t->attrs().get_int("dim1"), r);
          swaps_last = std::min(d0, d1) == r - 2 && std::max(d0, d1) == r - 1;
        } else if (t->op() == Op::Permute) {
          IntList dims = t->attrs().get_ints("dims");
          swaps_last = true;
          for (int64_t d = 0; d < r; ++d) {
            int64_t want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
            swaps_last = swaps_last && normalize_dim(dims[d], r) == want;
          }
        }
      }
      if (swaps_last) {
        int gb2 = contiguous_buffer(t->input(0));
        if (gb2 >= 0) {
          trans = true;
          bstride = vbatch == 1 ? 0 : rows * cols;
          return gb2;
        }
      }
    }
    // Copy into [batch..., rows, cols], broadcasting the batch dims.
    Shape target = batch;
    target.push_back(rows);
    target.push_back(cols);
    const Shape& vs = v.meta().shape;
    bool vector_left = vs.size() == 1 && &s2 == &sa, vector_right = vs.size() == 1 && &s2 == &sb;
    int gb = lower_copy(
        v, target,
        [&](const Index& idx) {
          if (vector_left) return Index{idx.back()};
          if (vector_right) return Index{idx[idx.size() - 2]};
          Index full = broadcast_index(Index(idx.begin(), idx.end() - 2), vb);
          full.push_back(idx[idx.size() - 2]);
          full.push_back(idx.back());
          return full;
        },
        "matmul operand %" + v.name());
    trans = false;
    bstride = mm.batch == 1 ? 0 : rows * cols;
    return gb;
  };
  mm.a = operand(a, sa, ba, mm.m, mm.k, mm.trans_a, mm.a_batch_stride);
  mm.b = operand(b, sb, bbat, mm.k, mm.n, mm.trans_b, mm.b_batch_stride);
  mm.out = new_buffer(Value{const_cast<Node*>(n), 0});
  Step s;
  s.kind = Step::Kind::Matmul;
  s.matmul = mm;
  s.group = grp.id;
  touch({mm.a, mm.b, mm.out});
  out_.steps.push_back(s);
}

LoweredGraph GraphLowering::run() {
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    Value v = g_.inputs()[i]->result(0);
    GraphBuffer b;
    b.kind = GraphBuffer::Kind::Input;
    b.input_index = static_cast<int>(i);
    b.meta = v.meta();
    int64_t extent = v.meta().numel() == 0 ? 0 : 1;
    if (extent)
      for (size_t d = 0; d < b.meta.shape.size(); ++d) extent += (b.meta.shape[d] - 1) * b.meta.strides[d];
    b.numel = extent;
    b.what = "%" + v.name();
    out_.buffers.push_back(b);
    buffer_of_[value_key(v)] = static_cast<int>(out_.buffers.size()) - 1;
  }
  for (const FusionGroup& grp : plan_.groups) {
    switch (grp.kind) {
      case KernelKind::Pointwise:
      case KernelKind::Constant: lower_pointwise(grp); break;
      case KernelKind::Reduction: lower_reduction(grp); break;
      case KernelKind::Scatter: lower_scatter(grp); break;
      case KernelKind::Matmul: lower_matmul(grp); break;
      case KernelKind::Alias: break;
    }
  }
  // Every output gets a contiguous buffer of its own: inputs and views are copied.
  for (Value v : g_.outputs()) {
    bool own = !v.node->is_input() && plan_.groups[plan_.group_of.at(v.node)].kind != KernelKind::Alias;
    int gb = own ? buffer_of(v) : lower_copy(v, v.meta().shape, [](const Index& i) { return i; }, "%" + v.name() + " (output copy)");
    out_.outputs.push_back(gb);
    out_.buffers[gb].last_step = static_cast<int>(out_.steps.size());
  }
  return std::move(out_);
}

}  // namespace

LoweredGraph lower(const Graph& g, const fusion::FusionPlan& plan) { return GraphLowering(g, plan).run(); }

std::string print_schedule(const LoweredGraph& lg) {
  std::string out = "buffers:\n";
  for (size_t i = 0; i < lg.buffers.size(); ++i) {
    const GraphBuffer& b = lg.buffers[i];
    out += fmt::format("  B{}: {} {} {}", i, b.meta.str(), b.what,
                       b.kind == GraphBuffer::Kind::Input ? fmt::format("input {}", b.input_index)
                                                          : fmt::format("arena steps {}..{}", b.first_step, b.last_step));
    if (b.offset >= 0) out += fmt::format(" @{}", b.offset);
    out += "\n";
  }
  out += "schedule:\n";
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& s = lg.steps[i];
    if (s.kind == Step::Kind::Kernel) {
      std::string args;
      for (size_t j = 0; j < s.args.size(); ++j) args += fmt::format("{}B{}", j ? ", " : "", s.args[j]);
      out += fmt::format("  {}: {}({})\n", i, lg.kernels[s.kernel].name, args);
    } else {
      const MatmulCall& m = s.matmul;
      out += fmt::format("  {}: blas {} B{} = B{}{} @ B{}{}  batch={} m={} n={} k={}  # {}\n", i, dtype_name(m.dtype), m.out, m.a,
                         m.trans_a ? "^T" : "", m.b, m.trans_b ? "^T" : "", m.batch, m.m, m.n, m.k, m.label);
    }
  }
  out += "outputs:";
  for (int o : lg.outputs) out += fmt::format(" B{}", o);
  out += "\n\n";
  for (const Kernel& k : lg.kernels) out += print_kernel(k) + "\n";
  return out;
}

}  // namespace kiln::codegen
