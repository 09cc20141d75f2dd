// Lowering of fusion groups to kernels (see lower.h): the driver, and pointwise, scatter,
// copy and matmul groups. The internals shared with lower_values.cpp and lower_reduction.cpp
// are in lower_internal.h.
#include "codegen/lower_internal.h"
#include "passes/collectives_dim0.h"

namespace kiln::codegen {

namespace detail {

// ---------------------------------------------------------------- GraphLowering

// Whether strides `have` lay out `shape` as `want` does: equal where a dim has more than one
// element (a dim of one has any stride).
bool same_layout(const Shape& shape, const Strides& have, const Strides& want) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && have[d] != want[d]) return false;
  return true;
}

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

void GraphLowering::lower_scatter(const FusionGroup& grp) {
  const Node* n = nullptr;
  for (const Node* m : grp.nodes)
    if (m->op() == Op::ScatterAdd || m->op() == Op::Scatter || m->op() == Op::ScatterFold) n = m;
  KILN_INTERNAL_ASSERT(n, "a scatter group holds a scatter_add, a scatter or a scatter_fold");
  const bool adds = n->op() == Op::ScatterAdd;  // scatter writes: the last write in index order stays
  // scatter_fold: each arriving element multiplied in (prod), or the larger (amax) or smaller
  // (amin) kept, by the pointwise ops of those names (NaN propagating).
  const std::string fold = n->op() == Op::ScatterFold ? n->attrs().get_string("reduce") : std::string();
  const char* fold_op = fold == "prod" ? "mul" : fold == "amax" ? "maximum" : fold == "amin" ? "minimum" : nullptr;
  Value self = n->input(0), index = n->input(1), src = n->input(2);
  const Shape& ss = self.meta().shape;
  DType dt = n->meta().dtype;
  int64_t rank = std::max<int64_t>(static_cast<int64_t>(ss.size()), 1);
  int64_t dim = normalize_dim(n->attrs().get_int("dim"), rank);
  Value out{const_cast<Node*>(n), 0};
  int out_gb = new_buffer(out);
  // f16/bf16 sums (and products) accumulate in f32, as the reference's do (in double, rounded
  // once) and PyTorch's embedding backward's: rounding every partial sum to 16 bits lost 2 ulps
  // over 24 additions (found by kiln fuzz). The sums then go to the result in one rounding pass.
  // A max or min is one of its arguments: exact in the result's dtype.
  const DType acc = adds || fold == "prod" ? compute_dtype(dt) : dt;
  const bool widened = acc != dt;
  const int acc_gb = widened ? temp_buffer(acc, ss, "f32 sums of %" + n->name()) : out_gb;

  // Kernel 1: the sums start as a copy of self.
  {
    KernelBuilder kb(*this, &grp, group_comment(grp) + " (copy of self)");
    std::string ob = kb.buffer(acc_gb, BufferRole::Output);
    std::vector<StmtPtr> top;
    kb.push_scope(&top, {});
    kb.loop_over(
        ss, [&](const Index& idx) { kb.emit(store(ob, simplify(ravel(idx, ss)), cast(acc, cast(dt, kb.value_at(self, idx))))); },
        "copies %" + self.name() + " into %" + n->name());
    kb.pop_scope();
    Kernel k = kb.finish(block(std::move(top)));
    add_kernel_step(kb, std::move(k), grp.id);
  }

  // Kernel 2: index element j adds src[j] at its position with dim d replaced by index[j].
  // Two elements can only meet when they differ in dim d alone, so the loop is parallel over
  // the other dims and ordered along d: each destination sees its additions in the
  // reference's order, with no atomics and no race. On a GPU, an index that is the same
  // across the other dims (an embedding's gradient) is sorted instead, and each run of equal
  // indices added by its own thread per column (codegen/sorted_scatter.h): the same sums.
  if (!(adds && lower_sorted_scatter(grp, n, acc_gb))) {
  const Shape& is = index.meta().shape;
  Shape ishape = is.empty() ? Shape{1} : is;
  Shape across;  // the index's dims but dim
  for (size_t d = 0; d < ishape.size(); ++d)
    if (static_cast<int64_t>(d) != dim) across.push_back(ishape[d]);
  int64_t nq = product(across), nd = ishape[dim];
  {
  KernelBuilder kb(*this, &grp, group_comment(grp));
  std::string ob = kb.buffer(acc_gb, BufferRole::Output);
  std::vector<StmtPtr> top, qbody, jbody;
  kb.push_scope(&top, {});
  ExprPtr q = var("q", 0, std::max<int64_t>(nq - 1, 0)), j = var("j", 0, std::max<int64_t>(nd - 1, 0));
  kb.push_scope(&qbody, {"q"});
  kb.push_scope(&jbody, {"j"});
  Index qidx = nq == 1 ? Index(across.size(), imm(0)) : unravel(q, across), jidx;
  for (size_t d = 0, a = 0; d < ishape.size(); ++d) jidx.push_back(simplify(static_cast<int64_t>(d) == dim ? j : qidx[a++]));
  if (is.empty()) jidx.clear();
  ExprPtr to = kb.bind(call("check_index", DType::I64,
                            {cast(DType::I64, kb.value_at(index, jidx)), imm(ss.empty() ? 1 : ss[dim]), imm(index_check_site(n))}),
                       "to");
  Index tidx = jidx;
  if (tidx.empty()) tidx.push_back(imm(0));
  tidx[dim] = to;
  ExprPtr at = ss.empty() ? imm(0) : simplify(ravel(tidx, ss));
  ExprPtr value = cast(acc, cast(dt, kb.value_at(src, jidx)));
  if (adds) value = call("add", acc, {load(ob, acc, at), value});
  else if (fold_op) value = call(fold_op, acc, {load(ob, acc, at), value});
  kb.emit(store(ob, at, widened ? value : cast(dt, value)));
  kb.pop_scope();
  StmtPtr ordered = for_loop("j", nd, LoopKind::Ordered, std::move(jbody), fmt::format("{} %{} in index order along its dim", op_name(n->op()), n->name()));
  if (nq == 1) {
    kb.pop_scope();
    for (auto& st : qbody) kb.emit(st);
    kb.emit(ordered);
  } else {
    kb.emit(ordered);
    kb.pop_scope();
    kb.emit(for_loop("q", nq, LoopKind::Parallel, std::move(qbody), "over the dims an index element cannot change"));
  }
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
  }
  }

  // Kernel 3 (f16/bf16): the f32 sums rounded once into the result.
  if (widened) {
    KernelBuilder kb(*this, &grp, group_comment(grp) + " (rounding the sums)");
    std::string sb = kb.buffer(acc_gb, BufferRole::Input);
    std::string ob = kb.buffer(out_gb, BufferRole::Output);
    std::vector<StmtPtr> top;
    kb.push_scope(&top, {});
    kb.loop_over(
        ss,
        [&](const Index& idx) {
          ExprPtr at = simplify(ravel(idx, ss));
          kb.emit(store(ob, at, cast(dt, load(sb, acc, at))));
        },
        "rounds the sums of %" + n->name());
    kb.pop_scope();
    Kernel k = kb.finish(block(std::move(top)));
    add_kernel_step(kb, std::move(k), grp.id);
  }
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
  if (!is_floating(mm.dtype)) return lower_int_matmul(grp, n, batch, mm);

  // An operand goes to BLAS where it lies when its matrices are contiguous (or transposed
  // contiguous, as a flag) over its whole batch or a single matrix, however many views lead
  // there (a weight gradient's reshape and transpose of a [batch, seq, features] activation);
  // otherwise a copy kernel lays it out as [batch, rows, cols].
  auto operand = [&](Value v, const Shape& s2, const Shape& vb, int64_t rows, int64_t cols, bool& trans, int64_t& bstride) {
    int64_t vbatch = numel(vb);
    bool batch_ok = vbatch == mm.batch ? (Shape(batch.end() - static_cast<long>(vb.size()), batch.end()) == vb &&
                                          numel(Shape(batch.begin(), batch.end() - static_cast<long>(vb.size()))) == 1)
                                       : vbatch == 1;
    std::optional<Placement> at = batch_ok ? placement(v) : std::nullopt;
    if (at) {
      const Shape& vs = v.meta().shape;
      auto same = [&](const Strides& want) { return same_layout(vs, at->strides, want); };
      Strides swapped_strides;
      if (vs.size() >= 2) {  // contiguous with the last two dims swapped, read back unswapped
        Shape swapped = vs;
        std::swap(swapped[vs.size() - 1], swapped[vs.size() - 2]);
        swapped_strides = contiguous_strides(swapped);
        std::swap(swapped_strides[vs.size() - 1], swapped_strides[vs.size() - 2]);
      }
      bstride = vbatch == 1 ? 0 : rows * cols;
      if (same(contiguous_strides(vs))) {
        trans = false;
        return at->buffer;
      }
      if (vs.size() >= 2 && same(swapped_strides)) {
        trans = true;
        return at->buffer;
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
  // Every batch times the same right-hand matrix, over a left-hand batch laid out as
  // [batch, m, k] (a Linear over [batch, seq, features]): one product of batch * m rows, as
  // PyTorch's linear flattens it. cuBLASLt tiles one [8192, 768] x [768, 3072] better than 8
  // of [1024, 768] (bench/NOTES.md, stop 37), and the CPU's GEMM gets one call.
  if (mm.batch > 1 && mm.b_batch_stride == 0 && !mm.trans_a && mm.a_batch_stride == mm.m * mm.k) {
    mm.m *= mm.batch;
    mm.batch = 1;
    mm.a_batch_stride = 0;
  }
  // Fusion chose the epilogue (passes/fusion/matmul_epilogue.h); the target must have it.
  mm.epilogue = grp.epilogue;
  if (mm.epilogue != MatmulEpilogue::None) {
    KILN_INTERNAL_ASSERT(target_.matmul_epilogues, "fusion folds an epilogue into a GEMM only on a target whose GEMM applies it");
    // The GEMM writes the epilogue group's result; that group gets no kernel.
    mm.bias = buffer_of(grp.epilogue_bias);
    mm.out = new_buffer(grp.epilogue_result);
    mm.label += fmt::format(" + epilogue {} of %{}", matmul_epilogue_name(mm.epilogue), grp.epilogue_bias.name());
  } else {
    mm.out = new_buffer(Value{const_cast<Node*>(n), 0});
  }
  Step s;
  s.kind = Step::Kind::Matmul;
  s.matmul = mm;
  s.group = grp.id;
  touch({mm.a, mm.b, mm.out});
  if (mm.bias >= 0) touch({mm.bias});
  out_.steps.push_back(s);
}

int GraphLowering::contiguous_buffer(Value v, const std::string& why) {
  std::optional<Placement> at = placement(v);
  if (at) {
    const Shape& vs = v.meta().shape;
    if (same_layout(vs, at->strides, contiguous_strides(vs))) return at->buffer;
  }
  return lower_copy(v, v.meta().shape, [](const Index& i) { return i; }, why);
}

std::optional<GraphLowering::Placement> GraphLowering::placement(Value v) const {
  if (v.node->is_input() || plan_.groups[plan_.group_of.at(v.node)].kind != KernelKind::Alias) {
    int gb = buffer_of(v);
    return Placement{gb, out_.buffers[gb].meta.strides};
  }
  const Node& n = *v.node;
  if (n.inputs().empty() || n.num_results() != 1) return std::nullopt;
  std::optional<Placement> base = placement(n.input(0));
  if (!base) return std::nullopt;
  const TensorMeta in(n.input(0).meta().dtype, n.input(0).meta().shape, base->strides);
  const meta::In ins(&in, 1);
  switch (n.op()) {
    case Op::Reshape: {
      std::optional<Strides> st = meta::view_strides(in.shape, in.strides, v.meta().shape);
      if (!st) return std::nullopt;
      return Placement{base->buffer, *st};
    }
    case Op::Transpose: return Placement{base->buffer, meta::meta_transpose(ins, n.attrs())[0].strides};
    case Op::Permute: return Placement{base->buffer, meta::meta_permute(ins, n.attrs())[0].strides};
    case Op::Squeeze: return Placement{base->buffer, meta::meta_squeeze(ins, n.attrs())[0].strides};
    case Op::Unsqueeze: return Placement{base->buffer, meta::meta_unsqueeze(ins, n.attrs())[0].strides};
    case Op::Expand: return Placement{base->buffer, meta::meta_expand(ins, n.attrs())[0].strides};
    case Op::Slice: {
      const int64_t d = normalize_dim(n.attrs().get_int("dim"), in.rank()), size = in.shape[static_cast<size_t>(d)];
      int64_t start = n.attrs().opt_int("start").value_or(0);
      if (start < 0) start += size;
      if (start > 0 && size > 0) return std::nullopt;  // starts further in: the base's start is not the view's
      return Placement{base->buffer, meta::meta_slice(ins, n.attrs())[0].strides};
    }
    default: return std::nullopt;
  }
}

// A custom op's own kernel, or a collective (a call of the process group's engine): a call on
// contiguous buffers, its inputs copied where they are views.
void GraphLowering::lower_call(const FusionGroup& grp, Step::Kind kind) {
  KILN_INTERNAL_ASSERT(grp.nodes.size() == 1, "an opaque or collective group holds one node");
  const Node* n = grp.nodes[0];
  // The engines join and split along the first dim of contiguous memory: passes/
  // collectives_dim0 (always in the compile pipeline) moved every other dim there.
  KILN_INTERNAL_ASSERT(kind != Step::Kind::Collective || !collective_needs_dim0_rewrite(*n),
                       "passes/collectives_dim0 ran before lowering: collectives join and split along dim 0");
  OpaqueCall c;
  c.op = n->op();
  c.attrs = n->attrs();
  std::string args;
  for (Value v : n->inputs()) {
    c.inputs.push_back(contiguous_buffer(v, fmt::format("input of %{} ({})", n->name(), op_name(n->op()))));
    c.input_metas.push_back(TensorMeta(v.meta().dtype, v.meta().shape, v.meta().device));
    args += fmt::format("{}%{}", args.empty() ? "" : ", ", v.name());
  }
  for (int r = 0; r < n->num_results(); ++r) {
    Value v{const_cast<Node*>(n), r};
    if (!v.meta().is_contiguous())
      fail("node %{}: {} result {} has strides {}; an op with kernels of its own writes contiguous results", n->name(),
           op_name(n->op()), r, shape_str(v.meta().strides));
    c.outputs.push_back(new_buffer(v));
    c.output_metas.push_back(TensorMeta(v.meta().dtype, v.meta().shape, v.meta().device));
  }
  c.label = fmt::format("%{} = {}({})", n->name(), op_name(n->op()), args);
  if (kind == Step::Kind::Collective) {
    const Attrs& a = n->attrs();
    c.label = fmt::format("%{} = {}(%{}, world_size={}{}) : {}", n->name(), op_name(n->op()), n->input(0).name(),
                          a.get_int("world_size"), a.has("op") ? ", op=" + a.get_string("op") : std::string(), n->meta().str());
  }
  Step s;
  s.kind = kind;
  s.group = grp.id;
  touch(c.inputs);
  touch(c.outputs);
  s.opaque = std::move(c);
  out_.steps.push_back(std::move(s));
}

// Integer matmul has no BLAS (nor cuBLASLt) routine: a kernel, one output element per
// parallel iteration, a reduction over k in int64 with wrap-around, as the reference.
void GraphLowering::lower_int_matmul(const FusionGroup& grp, const Node* n, const Shape& batch, const MatmulCall& mm) {
  if (mm.dtype == DType::Bool) fail("node %{}: matmul of bool tensors has no kernel ({})", n->name(), mm.label);
  Value a = n->input(0), b = n->input(1);
  const Shape &va = a.meta().shape, &vb = b.meta().shape;
  Shape ba(va.begin(), va.end() - std::min<long>(2, static_cast<long>(va.size()))),
      bb(vb.begin(), vb.end() - std::min<long>(2, static_cast<long>(vb.size())));
  Shape space = batch;  // [batch..., m, n]: the output's elements in order
  space.push_back(mm.m);
  space.push_back(mm.n);
  KernelBuilder kb(*this, &grp, group_comment(grp) + " (integer matmul: no BLAS)");
  Value out{const_cast<Node*>(n), 0};
  std::string ob = kb.buffer(new_buffer(out), BufferRole::Output);
  std::vector<StmtPtr> top, rowbody, kbody;
  kb.push_scope(&top, {});
  ExprPtr row = var("row", 0, std::max<int64_t>(numel(space) - 1, 0)), p = var("r", 0, std::max<int64_t>(mm.k - 1, 0));
  kb.push_scope(&rowbody, {"row"});
  Index idx = unravel(row, space);
  for (auto& e : idx) e = simplify(e);
  Index bidx(idx.begin(), idx.end() - 2);
  ExprPtr i = idx[idx.size() - 2], j = idx.back();
  std::string acc = kb.fresh(n->name() + "_acc");
  kb.emit(decl_acc(acc, DType::I64, CombineOp::Sum));
  kb.define(acc);
  kb.push_scope(&kbody, {"r"});
  Index ai = va.size() == 1 ? Index{p} : broadcast_index(bidx, ba), bi = vb.size() == 1 ? Index{p} : broadcast_index(bidx, bb);
  if (va.size() > 1) {
    ai.push_back(i);
    ai.push_back(p);
  }
  if (vb.size() > 1) {
    bi.push_back(p);
    bi.push_back(j);
  }
  ExprPtr prod = call("mul", DType::I64, {cast(DType::I64, kb.value_at(a, ai)), cast(DType::I64, kb.value_at(b, bi))});
  kb.emit(accumulate(acc, CombineOp::Sum, prod));
  kb.pop_scope();
  kb.emit(for_loop("r", mm.k, LoopKind::Reduction, std::move(kbody), "reduces over k"));
  kb.emit(store(ob, row, cast(mm.dtype, value_var(acc, DType::I64))));
  kb.pop_scope();
  kb.emit(for_loop("row", numel(space), LoopKind::Parallel, std::move(rowbody), "elements of " + mm.label));
  kb.pop_scope();
  Kernel k = kb.finish(block(std::move(top)));
  add_kernel_step(kb, std::move(k), grp.id);
}

LoweredGraph GraphLowering::run() {
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    Value v = g_.inputs()[i]->result(0);
    GraphBuffer b;
    b.kind = GraphBuffer::Kind::Input;
    b.input_index = static_cast<int>(i);
    b.meta = v.meta();
    b.numel = storage_extent(b.meta);
    b.what = "%" + v.name();
    out_.buffers.push_back(b);
    buffer_of_[value_key(v)] = static_cast<int>(out_.buffers.size()) - 1;
  }
  for (size_t gi = 0; gi < plan_.groups.size(); ++gi) {
    const FusionGroup& grp = plan_.groups[gi];
    if (grp.folded_into >= 0) continue;  // a matmul's epilogue: its GEMM computes it
    // A pure group that no one reads (dead code an unoptimized compile keeps, e.g. what feeds
    // a decomposition that ignores its input) is no kernel: there is nothing to write.
    // Collectives and custom ops still run: every rank must, and a custom op may have effects.
    if (grp.outputs.empty() && grp.kind != KernelKind::Opaque && grp.kind != KernelKind::Collective) continue;
    switch (grp.kind) {
      case KernelKind::Pointwise:
      case KernelKind::Constant: lower_pointwise(grp); break;
      case KernelKind::Reduction: lower_reduction(grp); break;
      case KernelKind::Scatter: lower_scatter(grp); break;
      case KernelKind::Matmul: lower_matmul(grp); break;
      case KernelKind::Opaque: lower_call(grp, Step::Kind::Opaque); break;
      case KernelKind::Collective: lower_call(grp, Step::Kind::Collective); break;
      case KernelKind::Attention: lower_attention(grp); break;
      case KernelKind::Sort: lower_sort(grp); break;
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

}  // namespace detail

using detail::GraphLowering;


LoweredGraph lower(const Graph& g, const fusion::FusionPlan& plan, const Target& target) { return GraphLowering(g, plan, target).run(); }

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
    } else if (s.kind == Step::Kind::Opaque || s.kind == Step::Kind::Collective) {
      const OpaqueCall& c = s.opaque;
      std::string ins, outs;
      for (size_t j = 0; j < c.inputs.size(); ++j) ins += fmt::format("{}B{}", j ? ", " : "", c.inputs[j]);
      for (size_t j = 0; j < c.outputs.size(); ++j) outs += fmt::format("{}B{}", j ? ", " : "", c.outputs[j]);
      out += fmt::format("  {}: {} {} = {}({})  # {}\n", i, s.kind == Step::Kind::Opaque ? "opaque" : "collective", outs,
                         op_name(c.op), ins, c.label);
    } else {
      const MatmulCall& m = s.matmul;
      out += fmt::format("  {}: blas {} B{} = B{}{} @ B{}{}{}  batch={} m={} n={} k={}  # {}\n", i, dtype_name(m.dtype), m.out, m.a,
                         m.trans_a ? "^T" : "", m.b, m.trans_b ? "^T" : "",
                         m.epilogue == MatmulEpilogue::None ? "" : fmt::format(" then {}(B{})", matmul_epilogue_name(m.epilogue), m.bias),
                         m.batch, m.m, m.n, m.k, m.label);
    }
  }
  out += "outputs:";
  for (int o : lg.outputs) out += fmt::format(" B{}", o);
  out += "\n\n";
  for (const Kernel& k : lg.kernels) out += print_kernel(k) + "\n";
  return out;
}

}  // namespace kiln::codegen
