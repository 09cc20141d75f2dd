#pragma once
// Internals of the lowering (lower.h), shared by its files: lower.cpp (the driver, pointwise,
// scatter, copy and matmul groups), lower_values.cpp (KernelBuilder: the value of any graph
// value at a multi-index — pointwise ops, views as index transforms, creation, gather) and
// lower_reduction.cpp (row and column reductions).
#include "codegen/lower.h"
#include <functional>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "codegen/pointwise_exprs.h"
#include "codegen/scalar_expr.h"
#include "codegen/simplify.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/meta/meta.h"

namespace kiln::codegen::detail {

using fusion::FusionGroup;
using fusion::KernelKind;
using Index = std::vector<ExprPtr>;

// The type values of `t` are computed in: f16/bf16 in f32, i32 and bool in i64.
inline DType compute_dtype(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16: return DType::F32;
    case DType::I32:
    case DType::Bool: return DType::I64;
    default: return t;
  }
}
// The type reductions accumulate in: f32 for f16/bf16/f32, f64 for f64, i64 for integers.
inline DType acc_dtype(DType t) {
  if (t == DType::F64) return DType::F64;
  return is_floating(t) ? DType::F32 : DType::I64;
}
// A reduction's accumulator: sums as acc_dtype; a float product in f64, because an f32
// running product overflows to inf (or underflows to 0) where the result is representable,
// and inf * 0 then makes a product that holds a zero NaN (found by kiln fuzz: a bf16 prod of
// 429 values); max/min/argmax and the online forms in the input's compute type.
inline DType reduction_acc_dtype(const Node* n) {
  if (n->op() == Op::Prod) return is_floating(n->meta().dtype) ? DType::F64 : DType::I64;
  if (n->op() == Op::Sum) return acc_dtype(n->meta().dtype);
  return compute_dtype(n->input(0).meta().dtype);
}

inline bool is_predicate(Op op) {
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::LogicalAnd: case Op::LogicalOr: case Op::LogicalNot: return true;
    default: return false;
  }
}

// A Scalar attribute converted to dtype `dt` exactly as the reference stores it (a float on
// an int tensor truncates; NaN and out-of-range give the type's minimum).
inline ExprPtr scalar_constant(const AttrValue& v, DType dt) {
  HostTensor t = HostTensor::empty(dt, {});
  if (auto* iv = std::get_if<int64_t>(&v)) t.set_int(0, *iv);
  else if (auto* bv = std::get_if<bool>(&v)) t.set_int(0, *bv);
  else t.set(0, std::get<double>(v));
  if (is_floating(dt)) return imm(dt, t.get(0));
  auto e = std::make_shared<Expr>(*imm(t.get_int(0)));
  e->dtype = dt;
  return e;
}

inline int64_t product(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t d = from; d < std::min(to, s.size()); ++d) p *= s[d];
  return p;
}

// Row-major multi-index of `flat` over `dims` (simplified later).
inline Index unravel(const ExprPtr& flat, const Shape& dims) {
  Index idx(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    ExprPtr q = stride == 1 ? flat : floordiv(flat, imm(stride));
    idx[d] = d == 0 ? q : mod(q, imm(std::max<int64_t>(dims[d], 1)));
    stride *= std::max<int64_t>(dims[d], 1);
  }
  return idx;
}

// The largest divisor of n that is at most `most` (1 if none larger).
inline int64_t divisor_at_most(int64_t n, int64_t most) {
  for (int64_t d = std::min(n, most); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

inline ExprPtr offset_of(const Index& idx, const Strides& strides) {
  ExprPtr off = imm(0);
  for (size_t d = 0; d < idx.size(); ++d)
    if (strides[d] != 0) off = add(off, mul(idx[d], imm(strides[d])));
  return off;
}
inline ExprPtr ravel(const Index& idx, const Shape& shape) { return offset_of(idx, contiguous_strides(shape)); }

// The index into an operand of shape `in` broadcast to an index over a (longer) shape.
inline Index broadcast_index(const Index& idx, const Shape& in) {
  Index out(in.size());
  size_t lead = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] == 1 ? imm(0) : idx[d + lead];
  return out;
}

inline std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

// Words a generated C++ or CUDA kernel cannot use as a variable's name: keywords and the
// alternative tokens (a value an ONNX model named `not` or `and` would otherwise become
// `const bool not = ...`).
inline bool is_reserved_word(const std::string& s) {
  static const std::set<std::string> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "co_await", "co_return", "co_yield", "compl", "concept", "const",
      "consteval", "constexpr", "constinit", "const_cast", "continue", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
      "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
      "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return", "short",
      "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq"};
  return words.count(s) != 0;
}

inline std::string value_key(Value v) { return fmt::format("{}#{}", static_cast<const void*>(v.node), v.index); }

// The index into the full space of a reduction from the kept dims' index and the reduced
// dims' index (`reduced[d]` says which one dim d takes its coordinate from).
inline Index merge_index(const std::vector<bool>& reduced, const Index& kept_idx, const Index& red_idx) {
  Index full;
  size_t a = 0, b = 0;
  for (bool r : reduced) full.push_back(simplify(r ? red_idx[b++] : kept_idx[a++]));
  return full;
}

inline std::vector<bool> reduced_dims_of(const Node* n) {
  std::optional<IntList> dims;
  if (const AttrValue* v = n->attrs().find("dim"))
    dims = std::holds_alternative<int64_t>(*v) ? IntList{std::get<int64_t>(*v)} : std::get<IntList>(*v);
  return meta::reduced_dims(n->input(0).meta(), dims);
}

inline CombineOp combine_of(const Node* n) {
  switch (n->op()) {
    case Op::Sum: return CombineOp::Sum;
    case Op::Prod: return CombineOp::Prod;
    case Op::Amax: return CombineOp::Max;
    case Op::Amin: return CombineOp::Min;
    case Op::Argmax: return CombineOp::Argmax;
    default: fail("node %{}: reduction '{}' has no kernel lowering (decompose it first)", n->name(), op_name(n->op()));
  }
}

inline std::string node_list(const std::vector<Node*>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size() && i < 12; ++i) s += (i ? ", " : "") + std::string(op_name(nodes[i]->op()));
  if (nodes.size() > 12) s += ", ...";
  return s;
}

class GraphLowering;

// The reduction nodes of a Reduction group, in group order (at least one).
std::vector<const Node*> reductions_of(const FusionGroup& grp);

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
    if (is_reserved_word(base)) base += "_";
    std::string n = base;
    for (int i = 1; !names_.insert(n).second; ++i) n = fmt::format("{}_{}", base, i);
    return n;
  }
  // Binds `e` to a let (readable code, no repeated subexpressions) unless it is trivial or
  // evaluation is conditional (a select branch must not evaluate what it does not select).
  ExprPtr bind(ExprPtr e, const std::string& hint, const std::string& memo_key = "");
  void define(const std::string& name) { scopes_.back().defines.insert(name); }

  // Iterates `shape` with parallel loops, calling body(idx) inside: on the CPU an outer loop
  // and an inner contiguous one, on a GPU one flat loop (Target::always_flat).
  void loop_over(const Shape& shape, const std::function<void(const Index&)>& body, const std::string& comment);

  void set_reduced(const Node* n, ExprPtr v) { reduced_[n] = std::move(v); }
  // The values of group `g` too are computed in this kernel, not loaded (a row group whose
  // statistics a column group computes in its chunks).
  void also_compute(const FusionGroup* g) { also_ = g; }
  Kernel finish(StmtPtr body);
  const std::vector<int>& args() const { return args_; }

 private:
  ExprPtr compute(Value v, const Index& idx);
  ExprPtr pointwise(const Node* n, const Index& idx);
  ExprPtr custom_pointwise(const Node* n, const ScalarExpr& e, const Index& idx);
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
  const FusionGroup* also_ = nullptr;
  Kernel kernel_;
  std::vector<int> args_;
  std::map<int, std::string> kbuf_;
  std::map<const Node*, std::string> constants_;
  std::map<const Node*, ExprPtr> reduced_;
  std::vector<Scope> scopes_;
  std::set<std::string> names_{"p", "i", "q", "r", "row", "j", "tile", "col", "buffers", "scalars", "lane", "warp"};
};

class GraphLowering {
 public:
  GraphLowering(const Graph& g, const fusion::FusionPlan& plan, const Target& target) : g_(g), plan_(plan), target_(target) {}

  LoweredGraph run();

  const fusion::FusionPlan& plan() const { return plan_; }
  const Target& target() const { return target_; }
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
  // One numbering everywhere: a group's kernel is named after the group (k3, as fused.kir and
  // KILN_LOGS=fusion call it), a second kernel of the same group k3_1, a copy the lowering adds
  // copy0, copy1, ...
  std::string kernel_name(const FusionGroup* group) {
    std::string base = group ? fmt::format("k{}", group->id) : "copy";
    int n = kernel_names_[base]++;
    if (!group) return fmt::format("copy{}", n);
    return n == 0 ? base : fmt::format("{}_{}", base, n);
  }
  std::map<std::string, int> kernel_names_;
  // A site id for an index check of node n (LoweredGraph::index_checks).
  int index_check_site(const Node* n) {
    const std::string self = fmt::format("%{} = {}", n->name(), op_name(n->op()));
    out_.index_checks.push_back(n->origin().empty() ? self : fmt::format("{} (its {})", n->origin(), self));
    return static_cast<int>(out_.index_checks.size()) - 1;
  }
  void add_kernel_step(KernelBuilder& kb, Kernel k, int group) { add_kernel_step(std::move(k), kb.args(), group); }
  // `args`: the graph buffer bound to each kernel buffer, in order.
  void add_kernel_step(Kernel k, std::vector<int> args, int group) {
    verify(k);
    Step s;
    s.kind = Step::Kind::Kernel;
    s.kernel = static_cast<int>(out_.kernels.size());
    // The checks made since the last kernel are this kernel's (kernels are built one at a time).
    out_.index_check_kernel.resize(out_.index_checks.size(), s.kernel);
    s.args = std::move(args);
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
  void lower_reduction_rows(const FusionGroup& grp, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level,
                            int levels, LoopKind order);
  bool lower_column_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions,
                              std::map<const Node*, int>& level, int levels);
  bool lower_split_reduction(const FusionGroup& grp, const std::vector<const Node*>& reductions, int levels);
  // A column group computing a row group in chunks of rows (codegen/lower_column_partials.cpp);
  // false where no chunking pays (nothing emitted).
  bool lower_rows_with_column_partials(const FusionGroup& rows, const FusionGroup& cols);
  void lower_partials_combine(const FusionGroup& grp, const std::vector<const Node*>& reductions, const std::map<const Node*, int>& partial,
                              int64_t P, int64_t nrow, const std::vector<Value>& row_outs,
                              const std::map<const Node*, int>& combined = {});
  // Level of each reduction of a group: 1 + the deepest reduction of the group its input
  // depends on; returns the deepest level.
  int reduction_levels(const FusionGroup& grp, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level);
  // `order`: Reduction (the schedule may spread the loop over threads) or Ordered (one thread,
  // in order: a column's sums).
  void emit_row_reductions(KernelBuilder& kb, const std::vector<const Node*>& reductions, std::map<const Node*, int>& level, int levels,
                           const ExprPtr& row, LoopKind order = LoopKind::Reduction);
  void lower_scatter(const FusionGroup& grp);
  void lower_matmul(const FusionGroup& grp);
  void lower_call(const FusionGroup& grp, Step::Kind kind);  // opaque ops and collectives
  void lower_attention(const FusionGroup& grp);               // codegen/lower_attention.cpp
  void lower_sort(const FusionGroup& grp);                    // codegen/lower_sort.cpp
  // scatter_add node n of grp by sorted index into the sums buffer acc_gb (already a copy of
  // self), when the target and the index allow it (codegen/sorted_scatter.h); false otherwise.
  bool lower_sorted_scatter(const FusionGroup& grp, const Node* n, int acc_gb);  // codegen/lower_sort.cpp
  // A kernel whose body is a routine of the preludes (sort, sorted scatter) over graph buffers
  // `args`, each with its role; the caller sets the routine's record.
  Kernel routine_kernel(const FusionGroup& grp, const std::vector<int>& args, const std::vector<BufferRole>& roles, std::string comment);
  // The buffer of `v` laid out contiguously: its own, its base's where it is a view that
  // starts at its base and is contiguous there, or a copy (`why` names it in kernels.txt).
  int contiguous_buffer(Value v, const std::string& why);
  // Where a value lies in memory: the buffer it starts at and its strides there. A kernel's
  // result or a graph input is its own buffer; a view (an Alias group) is followed down to
  // one when every view on the way keeps the start (reshape, transpose, permute, squeeze,
  // unsqueeze, expand, a slice from the start); nullopt otherwise.
  struct Placement {
    int buffer;
    Strides strides;
  };
  std::optional<Placement> placement(Value v) const;
  // The epilogue a GEMM can apply for `next` (the group after a matmul group), or None.
  void lower_int_matmul(const FusionGroup& grp, const Node* n, const Shape& batch, const MatmulCall& mm);
  // A reduction group's outputs as kernel buffers: those over the full space S (written in
  // the innermost loops) and those per row (reductions and values in the reduced space).
  using NamedOutputs = std::vector<std::pair<Value, std::string>>;
  // A reduction group's outputs at kept point `row` (after emit_row_reductions): those of the
  // reduced shape stored at `row`, those of the input's shape S (reduced dims `red`) in a loop
  // of kind `full_kind` over the reduced dims.
  void emit_reduction_outputs(KernelBuilder& kb, const NamedOutputs& full_outs, const NamedOutputs& row_outs, const Shape& S,
                              const std::vector<bool>& red, const ExprPtr& row, LoopKind full_kind);
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
  const Target& target_;
  LoweredGraph out_;
  std::map<std::string, int> buffer_of_;
};

// Comments naming what a kernel computes.
std::string group_comment(const FusionGroup& grp);
std::string outputs_comment(const std::vector<Value>& outs);

}  // namespace kiln::codegen::detail
