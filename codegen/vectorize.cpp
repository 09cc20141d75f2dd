// The vectorization analysis of the CUDA schedule (see vectorize.h).
#include "codegen/vectorize.h"

#include <functional>
#include <set>

namespace kiln::codegen {

namespace {
bool is_var(const ExprPtr& e, const std::string& v) { return e->kind == ExprKind::Var && e->name == v; }
}  // namespace

// ---- 16-byte vectors in a grid-stride loop
//
// The simplest and most common pointwise kernel: one grid-stride loop whose every buffer load
// and store is at exactly the loop variable, over buffers of 4-byte (f32, i32) or 2-byte
// (f16, bf16) elements. Each thread then handles W consecutive elements per iteration, W = 16
// bytes of the narrowest buffer: 4 when all are 4-byte, else 8, so that a 16-bit buffer is
// always read as eight values in one 16-byte access, also beside f32 buffers (the casts of
// mixed precision), whose 32 bytes per thread are then two 16-byte accesses. One vector
// load per input and one vector store per output, and a scalar loop finishes the last
// extent % W elements. A load at `v % C` with C a multiple of W (a bias broadcast over rows)
// is a vector load too: the W elements of a vector never straddle a period. Anything else
// (gathers, loads under a select, a buffer both loaded and stored, nested loops,
// accumulators) stays scalar.

int element_bytes(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 0;
  }
}

int64_t held_shared_bytes(DType t, int64_t vectors, int64_t threads, int width) {
  return (vectors * threads * width * element_bytes(t) + 15) / 16 * 16;
}

// The kernel's body as one loop (Blocks of one statement around it), or null.
StmtPtr sole_loop(const StmtPtr& s) {
  if (s->kind == StmtKind::For) return s;
  if (s->kind == StmtKind::Block && s->body.size() == 1) return sole_loop(s->body[0]);
  return nullptr;
}

// The period of a load index that is `v` (0) or `v % C` (C: a row vector broadcast over the
// rows, as a bias), or -1 for any other index.
int64_t period_of(const ExprPtr& index, const std::string& v) {
  if (is_var(index, v)) return 0;
  if (index->kind == ExprKind::Mod && is_var(index->args[0], v) && index->args[1]->kind == ExprKind::IntImm) return index->args[1]->i;
  return -1;
}

// Each loaded buffer's index period in a vectorizable loop (period_of).
std::map<std::string, int64_t> load_periods(const Kernel& k, const StmtPtr& loop) {
  std::map<std::string, int64_t> out;
  visit(loop, [&](const Stmt& st) {
    for (auto& e : st.exprs)
      visit(e, [&](const Expr& x) {
        const Buffer* b = x.kind == ExprKind::Load ? k.find_buffer(x.name) : nullptr;
        if (b && b->role != BufferRole::Constant) out[x.name] = period_of(x.args[0], loop->name);
      });
  });
  return out;
}

int grid_stride_vector_width(const Kernel& k, const StmtPtr& loop) {
  if (loop->map != LoopMap::GpuGridStride) return 0;
  const std::string& v = loop->name;
  bool ok = true;
  int narrowest = 0;
  std::set<std::string> loaded, stored;
  std::map<std::string, int64_t> period;  // per loaded buffer: one index form for all its loads
  auto buffer_ok = [&](const std::string& name) {
    const Buffer* b = k.find_buffer(name);
    int bytes = b ? element_bytes(b->dtype) : 0;
    if (bytes != 0) narrowest = narrowest == 0 ? bytes : std::min(narrowest, bytes);
    return bytes != 0;
  };
  std::function<void(const ExprPtr&, bool)> expr = [&](const ExprPtr& e, bool guarded) {
    if (e->kind == ExprKind::Load) {
      const Buffer* b = k.find_buffer(e->name);
      if (b && b->role == BufferRole::Constant) return expr(e->args[0], guarded);  // a table in the kernel
      int64_t p = period_of(e->args[0], v);
      ok = ok && !guarded && p >= 0 && buffer_ok(e->name) && (!period.count(e->name) || period[e->name] == p);
      period[e->name] = p;
      loaded.insert(e->name);
      return;
    }
    for (size_t i = 0; i < e->args.size(); ++i) expr(e->args[i], guarded || (e->kind == ExprKind::Select && i > 0));
  };
  std::function<void(const StmtPtr&)> stmt = [&](const StmtPtr& s) {
    switch (s->kind) {
      case StmtKind::Block:
        for (auto& b : s->body) stmt(b);
        return;
      case StmtKind::Let: expr(s->exprs[0], false); return;
      case StmtKind::Store:
        ok = ok && is_var(s->exprs[0], v) && buffer_ok(s->name);
        stored.insert(s->name);
        expr(s->exprs[1], false);
        return;
      default: ok = false; return;
    }
  };
  for (auto& b : loop->body) stmt(b);
  for (auto& b : loaded) ok = ok && !stored.count(b);
  if (!ok || narrowest == 0) return 0;
  int width = 16 / narrowest;
  for (auto& [b, p] : period)
    if (p > 0 && p % width != 0) return 0;
  return width;
}


// ---- 16-byte vectors in a thread's or lane's share of a row
//
// A loop `for (r = tid; r < E; r += T)` over a row whose every load and store is at
// `base + r`, with base a multiple of W (row * 1024, 0): each thread takes W consecutive
// elements per iteration instead (one 16-byte access per buffer), the body runs once per
// element. Accumulations keep their order within each thread, so results stay deterministic
// for a launch configuration. Loads under a select, gathers and loops inside stay scalar, and
// so does a loop touching memory that another loop of the kernel also touches (temp buffers,
// outputs read back): vectorizing one loop but not the other would hand an element to a
// different thread between them, a race with no barrier.

// `index` as base + v with base a sum of multiples of `w`; the base, or null.
ExprPtr aligned_base(const ExprPtr& index, const std::string& v, int w) {
  if (is_var(index, v)) return imm(0);
  if (index->kind != ExprKind::Add) return nullptr;
  const ExprPtr *var_side = nullptr, *rest = nullptr;
  if (is_var(index->args[1], v)) var_side = &index->args[1], rest = &index->args[0];
  else if (is_var(index->args[0], v)) var_side = &index->args[0], rest = &index->args[1];
  if (!var_side) return nullptr;
  bool ok = true, uses_v = false;
  std::function<void(const ExprPtr&)> terms = [&](const ExprPtr& e) {
    if (e->kind == ExprKind::Add) {
      terms(e->args[0]);
      terms(e->args[1]);
    } else if (e->kind == ExprKind::IntImm) {
      ok = ok && e->i % w == 0;
    } else if (e->kind == ExprKind::Mul && e->args[1]->kind == ExprKind::IntImm) {
      ok = ok && e->args[1]->i % w == 0;
    } else if (e->kind == ExprKind::Mul && e->args[0]->kind == ExprKind::IntImm) {
      ok = ok && e->args[0]->i % w == 0;
    } else {
      ok = false;
    }
    visit(e, [&](const Expr& x) { uses_v = uses_v || (x.kind == ExprKind::Var && x.name == v); });
  };
  terms(*rest);
  return ok && !uses_v ? *rest : nullptr;
}

int row_vector_width(const Kernel& k, const StmtPtr& loop, std::map<std::string, ExprPtr>& bases, bool scalar_ok,
                     const std::set<std::string>& carried) {
  if (loop->map != LoopMap::GpuThreads && loop->map != LoopMap::GpuLanes) return 0;
  const std::string& v = loop->name;
  int widest = 0;
  bool ok = true;
  std::vector<std::pair<std::string, ExprPtr>> accesses;  // buffer, index
  std::set<std::string> loaded, stored;
  std::function<void(const ExprPtr&, bool)> expr = [&](const ExprPtr& e, bool guarded) {
    if (e->kind == ExprKind::Load) {
      const Buffer* b = k.find_buffer(e->name);
      if (b && b->role == BufferRole::Constant) return;
      bool uses_v = false;
      visit(e->args[0], [&](const Expr& x) { uses_v = uses_v || (x.kind == ExprKind::Var && x.name == v); });
      if (!uses_v) return expr(e->args[0], guarded);  // the same element every iteration
      ok = ok && !guarded && b;
      if (b) widest = std::max(widest, element_bytes(b->dtype)), ok = ok && element_bytes(b->dtype) != 0;
      accesses.emplace_back(e->name, e->args[0]);
      loaded.insert(e->name);
      return;
    }
    for (size_t i = 0; i < e->args.size(); ++i) expr(e->args[i], guarded || (e->kind == ExprKind::Select && i > 0));
  };
  for (auto& s : loop->body) {
    switch (s->kind) {
      case StmtKind::Let: expr(s->exprs[0], false); break;
      case StmtKind::Accumulate:
        for (auto& e : s->exprs) expr(e, false);
        if (s->combine == CombineOp::Argmax) ok = false;  // the position is the scalar index
        break;
      case StmtKind::Store: {
        const Buffer* b = k.find_buffer(s->name);
        ok = ok && b && element_bytes(b->dtype) != 0;
        if (b) widest = std::max(widest, element_bytes(b->dtype));
        accesses.emplace_back(s->name, s->exprs[0]);
        stored.insert(s->name);
        expr(s->exprs[1], false);
        break;
      }
      default: ok = false;
    }
  }
  for (auto& b : loaded) ok = ok && (!stored.count(b) || carried.count(b));
  // Only read-only inputs and outputs the kernel never reads back keep one owner per element.
  std::set<std::string> loaded_anywhere;
  visit(k.body, [&](const Stmt& st) {
    for (auto& e : st.exprs)
      visit(e, [&](const Expr& x) {
        if (x.kind == ExprKind::Load) loaded_anywhere.insert(x.name);
      });
  });
  for (auto& [b, index] : accesses) {
    const Buffer* buf = k.find_buffer(b);
    ok = ok && buf && buf->role != BufferRole::Temp &&
         !(buf->role == BufferRole::Output && loaded_anywhere.count(b) && !carried.count(b));
  }
  if (!ok || widest == 0 || accesses.empty()) return 0;
  int w = 16 / widest;
  if (loop->extent % w != 0) {
    if (!scalar_ok) return 0;
    w = 1;
  }
  for (auto& [b, index] : accesses) {
    ExprPtr base = aligned_base(index, v, w);
    if (!base) return 0;
    auto it = bases.find(b);
    if (it != bases.end() && print_expr(it->second) != print_expr(base)) return 0;  // one form per buffer
    bases[b] = base;
  }
  return w;
}


}  // namespace kiln::codegen
