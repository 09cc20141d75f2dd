// KernelBuilder: buffers, loop scopes, and the value of a graph value at a multi-index.
#include "codegen/lower_internal.h"
#include "codegen/scalar_expr.h"

namespace kiln::codegen::detail {

// ---------------------------------------------------------------- KernelBuilder

KernelBuilder::KernelBuilder(GraphLowering& gl, const FusionGroup* group, std::string comment)
    : gl_(gl), group_(group) {
  kernel_.name = gl.kernel_name(group);
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
  if ((group_ && gid == group_->id) || (also_ && gid == also_->id)) return false;
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
  // In an empty iteration space (a dim of size 0) no loop body runs: an index check or a load
  // hoisted above a loop would run anyway, reading an empty buffer (found by kiln fuzz:
  // embedding with 0 indices checked a garbage index). There, such lets stay where they are.
  bool reads = false;
  visit(e, [&](const Expr& x) { reads |= x.kind == ExprKind::Load || x.kind == ExprKind::Call; });
  if (reads && group_ && numel(group_->space) == 0) target = scopes_.size() - 1;
  for (size_t i = scopes_.size(); i-- > target;) {
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
  if (const ScalarExpr* se = find_scalar_expr(n->op())) return cast(out, custom_pointwise(n, *se, idx));
  DType ct = out;
  if (n->inputs().size() >= 2) {
    std::vector<TensorMeta> metas;
    for (auto& x : n->inputs()) metas.push_back(x.meta());
    ct = meta::result_type(metas);
    // A floating result of integer operands (div, atan2) computes in that floating type.
    if (!is_floating(ct) && is_floating(out)) ct = out;
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

// A custom op's scalar expression (codegen/scalar_expr.h), in the result's computation type:
// its inputs and numbers converted to it, booleans (comparisons) as 0/1 where a number is needed.
ExprPtr KernelBuilder::custom_pointwise(const Node* n, const ScalarExpr& e, const Index& idx) {
  const DType out = n->meta().dtype;
  const DType ct = compute_dtype(is_floating(out) ? out : kDefaultFloat);
  auto num = [&](ExprPtr x) { return cast(ct, std::move(x)); };
  switch (e.kind) {
    case ScalarExpr::Kind::Number: return imm(ct, e.number);
    case ScalarExpr::Kind::Input: {
      Value x = n->input(e.input);
      return cast(ct, cast(compute_dtype(x.meta().dtype), value_at(x, broadcast_index(idx, x.meta().shape))));
    }
    case ScalarExpr::Kind::Attr: {
      const AttrValue* v = n->attrs().find(e.name);
      if (!v) fail("node %{}: {} has no value for attribute '{}', which its scalar expression reads", n->name(),
                   op_name(n->op()), e.name);
      return scalar_constant(*v, ct);
    }
    case ScalarExpr::Kind::Where:
      return select(cast(DType::Bool, custom_pointwise(n, *e.args[0], idx)), num(custom_pointwise(n, *e.args[1], idx)),
                    num(custom_pointwise(n, *e.args[2], idx)));
    case ScalarExpr::Kind::Call: {
      std::vector<ExprPtr> args;
      for (const ScalarExprPtr& a : e.args) args.push_back(num(custom_pointwise(n, *a, idx)));
      return call(e.name, e.predicate ? DType::Bool : ct, std::move(args));
    }
  }
  fail("node %{}: a scalar expression of an unknown kind", n->name());
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
      // A balanced tree of selects, log2(parts) deep: a chain as deep as a cat of 396 parts
      // (a joint graph's gradient of a split) broke clang's nesting limit (found by kiln fuzz).
      std::function<ExprPtr(size_t, size_t)> pick = [&](size_t lo, size_t hi) -> ExprPtr {
        if (lo == hi) return branches[lo];
        const size_t mid = lo + (hi - lo) / 2;
        return select(call("lt", DType::Bool, {idx[d], imm(parts[mid].end)}), pick(lo, mid), pick(mid + 1, hi));
      };
      return pick(0, parts.size() - 1);
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
  ExprPtr checked = bind(call("check_index", DType::I64, {iv, imm(size), imm(gl_.index_check_site(n))}), n->name() + "_index");
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
  const Target& t = gl_.target();
  size_t k = n - 1;
  if (t.always_flat) k = 0;
  while (k > 0 && product(shape, k) < t.inner_min && (k > 1 || product(shape) <= t.flat_elements)) --k;
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
  StmtPtr inner_loop = for_loop("i", inner, LoopKind::Parallel, std::move(ibody), has_outer ? "" : comment);
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

}  // namespace kiln::codegen::detail
