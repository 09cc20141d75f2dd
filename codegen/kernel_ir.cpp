#include "codegen/kernel_ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/attr.h"
#include "ir/error.h"

namespace kiln::codegen {

std::string_view expr_kind_name(ExprKind k) {
  switch (k) {
#define X(E, s) \
  case ExprKind::E: return s;
    KILN_KIR_EXPRS(X)
#undef X
  }
  return "?";
}

std::string_view stmt_kind_name(StmtKind k) {
  switch (k) {
#define X(E, s) \
  case StmtKind::E: return s;
    KILN_KIR_STMTS(X)
#undef X
  }
  return "?";
}

std::string_view loop_kind_name(LoopKind k) {
  switch (k) {
    case LoopKind::Parallel: return "parallel";
    case LoopKind::Reduction: return "reduction";
    case LoopKind::Ordered: return "ordered";
  }
  return "?";
}

std::string_view loop_map_name(LoopMap m) {
  switch (m) {
    case LoopMap::Unmapped: return "unmapped";
    case LoopMap::Serial: return "serial";
    case LoopMap::CpuThreads: return "cpu_threads";
    case LoopMap::CpuVector: return "cpu_vector";
    case LoopMap::GpuGridStride: return "gpu_grid_stride";
    case LoopMap::GpuBlocks: return "gpu_blocks";
    case LoopMap::GpuWarps: return "gpu_warps";
    case LoopMap::GpuThreads: return "gpu_threads";
    case LoopMap::GpuLanes: return "gpu_lanes";
    case LoopMap::GpuTiles: return "gpu_tiles";
  }
  return "?";
}

bool is_gpu_map(LoopMap m) {
  switch (m) {
    case LoopMap::GpuGridStride:
    case LoopMap::GpuBlocks:
    case LoopMap::GpuWarps:
    case LoopMap::GpuThreads:
    case LoopMap::GpuLanes:
    case LoopMap::GpuTiles: return true;
    default: return false;
  }
}

std::string_view combine_op_name(CombineOp c) {
  switch (c) {
    case CombineOp::Sum: return "sum";
    case CombineOp::Prod: return "prod";
    case CombineOp::Max: return "max";
    case CombineOp::Min: return "min";
    case CombineOp::Argmax: return "argmax";
    case CombineOp::SumExp: return "sumexp";
    case CombineOp::Welford: return "welford";
  }
  return "?";
}

std::string_view buffer_role_name(BufferRole r) {
  switch (r) {
    case BufferRole::Input: return "input";
    case BufferRole::Output: return "output";
    case BufferRole::Temp: return "temp";
    case BufferRole::Constant: return "constant";
  }
  return "?";
}

namespace {

ExprPtr make(ExprKind k, DType dt, std::vector<ExprPtr> args) {
  auto e = std::make_shared<Expr>();
  e->kind = k;
  e->dtype = dt;
  e->args = std::move(args);
  return e;
}

ExprPtr arith(ExprKind k, ExprPtr a, ExprPtr b) {
  KILN_INTERNAL_ASSERT(a && b, "arithmetic on a null expression");
  DType dt = a->dtype;
  return make(k, dt, {std::move(a), std::move(b)});
}

}  // namespace

ExprPtr var(const std::string& name, int64_t lo, int64_t hi) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Var;
  e->dtype = DType::I64;
  e->name = name;
  e->lo = lo;
  e->hi = hi;
  return e;
}

ExprPtr value_var(const std::string& name, DType dt) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Var;
  e->dtype = dt;
  e->name = name;
  return e;
}

ExprPtr imm(int64_t v) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::IntImm;
  e->dtype = DType::I64;
  e->i = v;
  return e;
}

ExprPtr imm(DType dt, double v) {
  auto e = std::make_shared<Expr>();
  e->dtype = dt;
  if (is_floating(dt)) {
    e->kind = ExprKind::FloatImm;
    e->f = v;
  } else {
    e->kind = ExprKind::IntImm;
    e->i = dt == DType::Bool ? (v != 0) : static_cast<int64_t>(v);
  }
  return e;
}

ExprPtr add(ExprPtr a, ExprPtr b) { return arith(ExprKind::Add, std::move(a), std::move(b)); }
ExprPtr sub(ExprPtr a, ExprPtr b) { return arith(ExprKind::Sub, std::move(a), std::move(b)); }
ExprPtr mul(ExprPtr a, ExprPtr b) { return arith(ExprKind::Mul, std::move(a), std::move(b)); }
ExprPtr floordiv(ExprPtr a, ExprPtr b) { return arith(ExprKind::FloorDiv, std::move(a), std::move(b)); }
ExprPtr mod(ExprPtr a, ExprPtr b) { return arith(ExprKind::Mod, std::move(a), std::move(b)); }
ExprPtr min(ExprPtr a, ExprPtr b) { return arith(ExprKind::Min, std::move(a), std::move(b)); }
ExprPtr max(ExprPtr a, ExprPtr b) { return arith(ExprKind::Max, std::move(a), std::move(b)); }

ExprPtr load(const std::string& buffer, DType dt, ExprPtr index) {
  auto e = std::const_pointer_cast<Expr>(make(ExprKind::Load, dt, {std::move(index)}));
  e->name = buffer;
  return e;
}

ExprPtr cast(DType dt, ExprPtr x) {
  if (x->dtype == dt) return x;
  return make(ExprKind::Cast, dt, {std::move(x)});
}

ExprPtr call(const std::string& fn, DType dt, std::vector<ExprPtr> args) {
  auto e = std::const_pointer_cast<Expr>(make(ExprKind::Call, dt, std::move(args)));
  e->name = fn;
  return e;
}

ExprPtr select(ExprPtr cond, ExprPtr a, ExprPtr b) {
  DType dt = a->dtype;
  return make(ExprKind::Select, dt, {std::move(cond), std::move(a), std::move(b)});
}

ExprPtr with_args(const Expr& e, std::vector<ExprPtr> args) {
  auto c = std::make_shared<Expr>(e);
  c->args = std::move(args);
  return c;
}

// ---- statements

namespace {
std::shared_ptr<Stmt> make_stmt(StmtKind k) {
  auto s = std::make_shared<Stmt>();
  s->kind = k;
  return s;
}
}  // namespace

StmtPtr block(std::vector<StmtPtr> body) {
  auto s = make_stmt(StmtKind::Block);
  s->body = std::move(body);
  return s;
}

StmtPtr for_loop(const std::string& v, int64_t extent, LoopKind kind, std::vector<StmtPtr> body, std::string comment) {
  auto s = make_stmt(StmtKind::For);
  s->name = v;
  s->extent = extent;
  s->loop = kind;
  s->body = std::move(body);
  s->comment = std::move(comment);
  return s;
}

StmtPtr let(const std::string& name, ExprPtr value) {
  auto s = make_stmt(StmtKind::Let);
  s->name = name;
  s->dtype = value->dtype;
  s->exprs = {std::move(value)};
  return s;
}

StmtPtr store(const std::string& buffer, ExprPtr index, ExprPtr value) {
  auto s = make_stmt(StmtKind::Store);
  s->name = buffer;
  s->dtype = value->dtype;
  s->exprs = {std::move(index), std::move(value)};
  return s;
}

StmtPtr decl_acc(const std::string& name, DType dt, CombineOp op) {
  auto s = make_stmt(StmtKind::DeclAcc);
  s->name = name;
  s->dtype = dt;
  s->combine = op;
  return s;
}

StmtPtr accumulate(const std::string& name, CombineOp op, ExprPtr value, ExprPtr position) {
  auto s = make_stmt(StmtKind::Accumulate);
  s->name = name;
  s->combine = op;
  s->dtype = value->dtype;
  s->exprs = {std::move(value)};
  if (position) s->exprs.push_back(std::move(position));
  return s;
}

StmtPtr combine_across(const std::string& acc, DType dt, CombineOp op, LoopMap across) {
  auto s = make_stmt(StmtKind::CombineAcross);
  s->name = acc;
  s->dtype = dt;
  s->combine = op;
  s->map = across;
  return s;
}

StmtPtr barrier() { return make_stmt(StmtKind::Barrier); }

StmtPtr atomic_add(const std::string& buffer, ExprPtr index, ExprPtr value) {
  auto s = make_stmt(StmtKind::AtomicAdd);
  s->name = buffer;
  s->dtype = value->dtype;
  s->exprs = {std::move(index), std::move(value)};
  return s;
}

StmtPtr with_map(const StmtPtr& s, LoopMap map, int64_t grain) {
  KILN_INTERNAL_ASSERT(s->kind == StmtKind::For, "only loops are mapped");
  auto c = std::make_shared<Stmt>(*s);
  c->map = map;
  c->grain = grain;
  return c;
}

// ---- walkers

void visit(const ExprPtr& e, const std::function<void(const Expr&)>& fn) {
  fn(*e);
  for (auto& a : e->args) visit(a, fn);
}

ExprPtr rewrite(const ExprPtr& e, const std::function<ExprPtr(const ExprPtr&)>& fn) {
  std::vector<ExprPtr> args;
  args.reserve(e->args.size());
  bool changed = false;
  for (auto& a : e->args) {
    args.push_back(rewrite(a, fn));
    changed = changed || args.back() != a;
  }
  return fn(changed ? with_args(*e, std::move(args)) : e);
}

void visit(const StmtPtr& s, const std::function<void(const Stmt&)>& fn) {
  fn(*s);
  for (auto& b : s->body) visit(b, fn);
}

StmtPtr rewrite_exprs(const StmtPtr& s, const std::function<ExprPtr(const ExprPtr&)>& fn) {
  auto c = std::make_shared<Stmt>(*s);
  for (auto& e : c->exprs) e = rewrite(e, fn);
  for (auto& b : c->body) b = rewrite_exprs(b, fn);
  return c;
}

const Buffer* Kernel::find_buffer(const std::string& n) const {
  for (auto& b : buffers)
    if (b.name == n) return &b;
  for (auto& b : constants)
    if (b.name == n) return &b;
  return nullptr;
}

// ---- printing

namespace {

int precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Add:
    case ExprKind::Sub: return 1;
    case ExprKind::Mul: return 2;
    default: return 3;
  }
}

std::string wrap(const ExprPtr& e, int min_prec) {
  std::string s = print_expr(e);
  return precedence(*e) < min_prec ? "(" + s + ")" : s;
}

std::string join_args(const Expr& e) {
  std::string s;
  for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + print_expr(e.args[i]);
  return s;
}

}  // namespace

std::string print_expr(const ExprPtr& e) {
  switch (e->kind) {
    case ExprKind::Var: return e->name;
    case ExprKind::IntImm: return e->dtype == DType::Bool ? (e->i ? "true" : "false") : std::to_string(e->i);
    case ExprKind::FloatImm: return format_double(e->f);
    case ExprKind::Add: return wrap(e->args[0], 1) + " + " + wrap(e->args[1], 2);
    case ExprKind::Sub: return wrap(e->args[0], 1) + " - " + wrap(e->args[1], 2);
    case ExprKind::Mul: {
      // i % 7*16 is legal but reads badly: floordiv and mod operands of * get parentheses.
      auto operand = [](const ExprPtr& a, int prec) {
        bool divmod = a->kind == ExprKind::FloorDiv || a->kind == ExprKind::Mod;
        return divmod ? "(" + print_expr(a) + ")" : wrap(a, prec);
      };
      return operand(e->args[0], 2) + "*" + operand(e->args[1], 3);
    }
    case ExprKind::FloorDiv: return wrap(e->args[0], 3) + " / " + wrap(e->args[1], 3);
    case ExprKind::Mod: return wrap(e->args[0], 3) + " % " + wrap(e->args[1], 3);
    case ExprKind::Min: return "min(" + join_args(*e) + ")";
    case ExprKind::Max: return "max(" + join_args(*e) + ")";
    case ExprKind::Load: return e->name + "[" + print_expr(e->args[0]) + "]";
    case ExprKind::Cast: return std::string(dtype_name(e->dtype)) + "(" + print_expr(e->args[0]) + ")";
    case ExprKind::Call: return e->name + "(" + join_args(*e) + ")";
    case ExprKind::Select: return "select(" + join_args(*e) + ")";
  }
  return "?";
}

std::string print_stmt(const StmtPtr& s, int indent) {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  std::string out;
  switch (s->kind) {
    case StmtKind::Block:
      for (auto& b : s->body) out += print_stmt(b, indent);
      return out;
    case StmtKind::For: {
      std::string map;
      if (s->map != LoopMap::Unmapped)
        map = s->map == LoopMap::CpuThreads ? fmt::format(" @cpu_threads(grain {})", s->grain) : fmt::format(" @{}", loop_map_name(s->map));
      if (s->vector > 0) map += fmt::format(" x{}", s->vector);
      if (s->unroll > 1) map += fmt::format(" unroll {}", s->unroll);
      if (!s->held.empty())
        map += fmt::format(" hold({}: {} vectors per thread{}{})", fmt::join(s->held, ", "), s->held_vectors, s->held_shared ? " in shared memory" : "",
                           s->prefetch ? ", the next iteration's loaded ahead" : "");
      if (!s->held_written.empty())
        map += fmt::format(" carry({}: {} vectors per thread, stored back at the end)", fmt::join(s->held_written, ", "), s->held_vectors);
      if (s->cluster > 1) map += fmt::format(" cluster({} blocks per row)", s->cluster);
      if (s->map == LoopMap::GpuTiles) {
        std::vector<std::string> loads;
        for (auto& l : s->tiles.loads) loads.push_back(print_expr(l));
        map += fmt::format(" as [{}, {}] in {}x{} tiles, through shared memory: {}", s->tiles.rows, s->tiles.cols, s->tiles.tile,
                           s->tiles.tile, fmt::join(loads, ", "));
      }
      out = fmt::format("{}{} for {} in 0..{}{} {{{}\n", pad, loop_kind_name(s->loop), s->name, s->extent, map,
                        s->comment.empty() ? "" : "  # " + s->comment);
      for (auto& b : s->body) out += print_stmt(b, indent + 1);
      return out + pad + "}\n";
    }
    case StmtKind::Let:
      return fmt::format("{}{}: {} = {}\n", pad, s->name, dtype_name(s->dtype), print_expr(s->exprs[0]));
    case StmtKind::Store:
      return fmt::format("{}{}[{}] = {}\n", pad, s->name, print_expr(s->exprs[0]), print_expr(s->exprs[1]));
    case StmtKind::DeclAcc:
      return fmt::format("{}acc {}: {} = {}.identity\n", pad, s->name, dtype_name(s->dtype), combine_op_name(s->combine));
    case StmtKind::Accumulate:
      return fmt::format("{}{} <{}>= {}{}\n", pad, s->name, combine_op_name(s->combine), print_expr(s->exprs[0]),
                         s->exprs.size() > 1 ? " at " + print_expr(s->exprs[1]) : "");
    case StmtKind::CombineAcross:
      return fmt::format("{}combine {} <{}> across {}\n", pad, s->name, combine_op_name(s->combine),
                         s->map == LoopMap::GpuLanes ? "warp" : "block");
    case StmtKind::Barrier: return pad + "barrier\n";
    case StmtKind::AtomicAdd:
      return fmt::format("{}atomic {}[{}] += {}\n", pad, s->name, print_expr(s->exprs[0]), print_expr(s->exprs[1]));
  }
  return out;
}

std::string print_schedule(const ScheduleRecord& r, const LaunchConfig& launch) {
  std::string out = r.mapping;
  if (r.rows_per_block > 0) out += fmt::format(", {} per block", r.rows_per_block);
  if (r.threads_per_row > 1) out += fmt::format(", {} threads per row", r.threads_per_row);
  if (r.cluster > 1) out += fmt::format(" in a cluster of {} blocks (combined through distributed shared memory)", r.cluster);
  if (launch.block > 1 || launch.grid > 1) out += fmt::format(", block {}", launch.block);
  if (r.vector > 0) out += fmt::format(", {}-element vectors", r.vector);
  else if (launch.block > 1 && r.tiles.empty()) out += ", scalar accesses";  // (the CPU's vectors are clang's)
  if (r.unroll > 1) out += fmt::format(", {} iterations at once (their loads first)", r.unroll);
  if (launch.min_blocks_per_sm > 0) out += fmt::format(", registers capped for {} blocks an SM", launch.min_blocks_per_sm);
  if (!r.held.empty())
    out += fmt::format(", row of {} held in {} ({} elements per thread)", fmt::join(r.held, ", "), r.held_shared ? "shared memory" : "registers",
                       r.held_elements);
  if (!r.carried.empty())
    out += fmt::format(", {} carried in registers from row to row ({} elements per thread)", fmt::join(r.carried, ", "), r.held_elements);
  if (!r.tiles.empty()) out += ", " + r.tiles;
  if (r.approx_f32_math) out += ", approximate f32 exp and division (every result 16-bit)";
  if (!r.why.empty()) out += " (" + r.why + ")";
  if (!r.tuned.empty()) out += "; tuned: " + r.tuned;
  return out;
}

std::string_view attention_pass_name(AttentionKernel::Pass p) {
  switch (p) {
    case AttentionKernel::Pass::Forward: return "forward";
    case AttentionKernel::Pass::BackwardKV: return "backward dK dV";
    case AttentionKernel::Pass::BackwardQ: return "backward dQ";
  }
  return "?";
}

std::string print_kernel(const Kernel& k) {
  std::string out = "kernel " + k.name + "(";
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    out += fmt::format("{}{}: {}[{}] {}{}", i ? ", " : "", b.name, dtype_name(b.dtype), b.numel, buffer_role_name(b.role),
                       b.what.empty() ? "" : " " + b.what);
  }
  out += ")";
  for (const Buffer& c : k.constants) out += fmt::format(" {}: {}[{}] constant", c.name, dtype_name(c.dtype), c.numel);
  if (!k.comment.empty()) out += "  # " + k.comment;
  if (k.launch.block > 1 || k.launch.grid > 1)
    out += fmt::format("\n  # launch grid {} x block {}, {} B shared, i{} indices{}", k.launch.grid, k.launch.block,
                       k.launch.shared_bytes + k.launch.dynamic_shared_bytes, k.index_bits,
                       k.launch.persistent ? "; the grid at most what the SMs hold at once (the compiled code's occupancy, at load)" : "");
  if (!k.schedule.mapping.empty()) out += "\n  # schedule: " + print_schedule(k.schedule, k.launch);
  if (k.attention) {
    const AttentionKernel& a = *k.attention;
    return out + fmt::format(" {{\n  attention {} {}: batch {}, {} queries x {} keys, head {} -> {}{}, scale {}\n}}\n",
                             attention_pass_name(a.pass), dtype_name(a.dtype), a.batch, a.L, a.S, a.E, a.Ev,
                             a.causal ? ", causal" : "", a.scale);
  }
  if (k.sorted_scatter) {
    const SortedScatterKernel& s = *k.sorted_scatter;
    return out + fmt::format(" {{\n  scatter_add by sorted index: {} rows of [{}, {}, {}] {} into [{}, {}, {}] {} sums\n}}\n", s.n, s.outer,
                             s.n, s.inner, dtype_name(s.src), s.outer, s.rows, s.inner, dtype_name(s.acc));
  }
  if (k.sort) {
    const SortKernel& s = *k.sort;
    return out + fmt::format(" {{\n  sort {}: {} rows of {} (stride {}), {} {} kept{}\n}}\n", dtype_name(s.dtype), s.rows(), s.n,
                             s.inner, s.k, s.descending ? "largest" : "smallest", s.scratch ? ", sorted in scratch" : "");
  }
  out += " {\n" + print_stmt(k.body, 1) + "}\n";
  return out;
}

}  // namespace kiln::codegen
