// The vectorization analysis of the CUDA schedule (see vectorize.h).
#include "codegen/vectorize.h"

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <set>

namespace kiln::codegen {

// ---- 16-byte vectors in a grid-stride loop
//
// The simplest and most common pointwise kernel: one grid-stride loop whose every store is at
// exactly the loop variable v and whose every load reads, for W consecutive v, W consecutive
// elements from a multiple of W (lane_contiguous), over buffers of 4-byte (f32, i32) or 2-byte
// (f16, bf16) elements. Each thread then handles W consecutive elements per iteration, W = 16
// bytes of the narrowest buffer: 4 when all are 4-byte, else 8, so that a 16-bit buffer is
// always read as eight values in one 16-byte access, also beside f32 buffers (the casts of
// mixed precision), whose 32 bytes per thread are then two 16-byte accesses. One vector load
// per distinct load and one vector store per output, and a scalar loop finishes the last
// extent % W elements. Loads at `v % C` (a bias broadcast over rows) and permuted copies
// (`b[(v / 64 % 32) * 131072 + (v / 2048 % 2048) * 64 + v % 64]`: a head's rows moved, whose
// runs of 64 are a multiple of W) qualify. A load under a select that is lane_contiguous too
// stays a scalar load, one element at a time (it may not be read where its select does not
// take it: a rotation's other half). Anything else (gathers, a buffer both loaded and stored,
// nested loops, accumulators) keeps the loop scalar.

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

namespace {

// How an index expression depends on v over a group of W consecutive values of v starting at
// a multiple of W: the same value for all (Invariant; `aligned` when it is known to be a
// multiple of W), that value plus the position in the group, from a multiple of W (Lane), or
// anything else (Other). Exact over the IR's floor division and modulus, also for negative
// operands.
struct LaneForm {
  enum Kind { Invariant, Lane, Other } kind = Other;
  bool aligned = false;
};

// `varying`: the values the loop body computes (its lets): different for every element.
LaneForm lane_form(const ExprPtr& e, const std::string& v, int64_t w, const std::set<std::string>& varying) {
  const LaneForm other{LaneForm::Other, false};
  auto inv = [](bool aligned) { return LaneForm{LaneForm::Invariant, aligned}; };
  const LaneForm lane{LaneForm::Lane, true};
  auto is_inv = [](const LaneForm& f) { return f.kind == LaneForm::Invariant; };
  auto imm_of = [](const ExprPtr& x) -> std::optional<int64_t> {
    if (x->kind == ExprKind::IntImm) return x->i;
    return std::nullopt;
  };
  switch (e->kind) {
    case ExprKind::IntImm: return inv(e->i % w == 0);
    case ExprKind::FloatImm: return inv(false);
    case ExprKind::Var: return e->name == v ? lane : varying.count(e->name) ? other : inv(false);
    case ExprKind::Add:
    case ExprKind::Sub: {
      LaneForm a = lane_form(e->args[0], v, w, varying), b = lane_form(e->args[1], v, w, varying);
      if (is_inv(a) && is_inv(b)) return inv(a.aligned && b.aligned);
      if (a.kind == LaneForm::Lane && is_inv(b) && b.aligned) return lane;  // (base + l) ± aligned
      if (e->kind == ExprKind::Add && is_inv(a) && a.aligned && b.kind == LaneForm::Lane) return lane;
      return other;
    }
    case ExprKind::Mul: {
      LaneForm a = lane_form(e->args[0], v, w, varying), b = lane_form(e->args[1], v, w, varying);
      if (is_inv(a) && is_inv(b)) return inv(a.aligned || b.aligned);
      if ((a.kind == LaneForm::Lane && imm_of(e->args[1]) == 1) || (b.kind == LaneForm::Lane && imm_of(e->args[0]) == 1)) return lane;
      return other;
    }
    case ExprKind::FloorDiv:
    case ExprKind::Mod: {
      LaneForm a = lane_form(e->args[0], v, w, varying), b = lane_form(e->args[1], v, w, varying);
      std::optional<int64_t> c = imm_of(e->args[1]);
      if (is_inv(a) && is_inv(b)) return inv(e->kind == ExprKind::Mod && a.aligned && c && *c % w == 0);
      // (base + l) / C = base / C and (base + l) % C = base % C + l, base a multiple of W, C too.
      if (a.kind == LaneForm::Lane && c && *c > 0 && *c % w == 0) return e->kind == ExprKind::FloorDiv ? inv(false) : lane;
      return other;
    }
    case ExprKind::Call:
      // (base + l) < K is base < K when K is a multiple of W too (and so is >=): a cat's or a
      // rotation's choice of half, the same over a vector.
      if ((e->name == "lt" || e->name == "ge") && e->args.size() == 2) {
        LaneForm a = lane_form(e->args[0], v, w, varying), b = lane_form(e->args[1], v, w, varying);
        if (a.kind == LaneForm::Lane && is_inv(b) && b.aligned) return inv(false);
      }
      [[fallthrough]];
    default: {  // loads (a gather at an invariant position), casts, calls, selects, min, max
      for (const ExprPtr& x : e->args)
        if (!is_inv(lane_form(x, v, w, varying))) return other;
      return inv(false);
    }
  }
}

bool is_var(const ExprPtr& e, const std::string& v) { return e->kind == ExprKind::Var && e->name == v; }

}  // namespace

void each_guarded_load(const StmtPtr& loop, const std::function<void(const Expr&, const std::vector<LoadGuard>&)>& fn) {
  std::vector<LoadGuard> guards;
  std::function<void(const ExprPtr&)> expr = [&](const ExprPtr& e) {
    if (e->kind == ExprKind::Load) fn(*e, guards);
    for (size_t i = 0; i < e->args.size(); ++i) {
      const bool branch = e->kind == ExprKind::Select && i > 0;
      if (branch) guards.push_back({e->args[0], i == 1});
      expr(e->args[i]);
      if (branch) guards.pop_back();
    }
  };
  visit(block(loop->body), [&](const Stmt& st) {
    if (st.kind == StmtKind::Let) expr(st.exprs[0]);
    if (st.kind == StmtKind::Store) expr(st.exprs[1]);
  });
}

std::string guards_key(const std::vector<LoadGuard>& guards) {
  std::string key;
  for (const LoadGuard& g : guards) key += (g.when_true ? "&" : "&!") + print_expr(g.condition);
  return key;
}

bool lane_contiguous(const ExprPtr& index, const std::string& v, int w, const std::set<std::string>& varying) {
  return w > 0 && lane_form(index, v, w, varying).kind == LaneForm::Lane;
}

std::set<std::string> loop_lets(const StmtPtr& loop) {
  std::set<std::string> names;
  visit(block(loop->body), [&](const Stmt& st) {
    if (st.kind == StmtKind::Let) names.insert(st.name);
  });
  return names;
}

int grid_stride_vector_width(const Kernel& k, const StmtPtr& loop) {
  if (loop->map != LoopMap::GpuGridStride) return 0;
  const std::string& v = loop->name;
  bool ok = true;
  int narrowest = 0;
  std::set<std::string> loaded, stored;
  auto buffer_ok = [&](const std::string& name) {
    const Buffer* b = k.find_buffer(name);
    int bytes = b ? element_bytes(b->dtype) : 0;
    if (bytes != 0) narrowest = narrowest == 0 ? bytes : std::min(narrowest, bytes);
    return bytes != 0;
  };
  std::function<void(const StmtPtr&)> stmt = [&](const StmtPtr& s) {
    switch (s->kind) {
      case StmtKind::Block:
        for (auto& b : s->body) stmt(b);
        return;
      case StmtKind::Let: return;
      case StmtKind::Store:
        ok = ok && is_var(s->exprs[0], v) && buffer_ok(s->name);
        stored.insert(s->name);
        return;
      default: ok = false; return;
    }
  };
  for (auto& b : loop->body) stmt(b);
  std::vector<const Expr*> loads;  // non-constant loads, under selects or not
  each_guarded_load(loop, [&](const Expr& x, const std::vector<LoadGuard>&) {
    const Buffer* b = k.find_buffer(x.name);
    if (b && b->role == BufferRole::Constant) return;  // a table in the kernel
    ok = ok && buffer_ok(x.name);
    loaded.insert(x.name);
    loads.push_back(&x);
  });
  for (auto& b : loaded) ok = ok && !stored.count(b);
  if (!ok || narrowest == 0) return 0;
  const int width = 16 / narrowest;
  const std::set<std::string> varying = loop_lets(loop);
  for (const Expr* x : loads)
    if (!lane_contiguous(x->args[0], v, width, varying)) return 0;
  return width;
}

std::vector<VectorLoad> grid_stride_vector_loads(const Kernel& k, const StmtPtr& loop, int width) {
  // Per buffer, its distinct (index, guards) in order. A load under selects whose conditions
  // are the same over each vector's W elements is a vector load under those conditions; one
  // under a condition that varies within a vector stays a scalar load; one that is also read
  // outside every select is that vector.
  const std::set<std::string> varying = loop_lets(loop);
  std::map<std::string, std::vector<std::pair<ExprPtr, std::vector<LoadGuard>>>> forms;
  each_guarded_load(loop, [&](const Expr& x, const std::vector<LoadGuard>& guards) {
    const Buffer* b = k.find_buffer(x.name);
    if (b && b->role == BufferRole::Constant) return;
    for (const LoadGuard& g : guards)
      if (lane_form(g.condition, loop->name, width, varying).kind != LaneForm::Invariant) return;
    auto& f = forms[x.name];
    const std::string key = print_expr(x.args[0]), gkey = guards_key(guards);
    for (auto& [i, g] : f)
      if (print_expr(i) == key && guards_key(g) == gkey) return;
    f.emplace_back(x.args[0], guards);
  });
  std::vector<VectorLoad> out;
  for (auto& [buffer, indices] : forms) {
    std::set<std::string> unguarded;
    for (auto& [i, g] : indices)
      if (g.empty()) unguarded.insert(print_expr(i));
    int n = 0;
    for (auto& [i, g] : indices) {
      if (!g.empty() && unguarded.count(print_expr(i))) continue;
      out.push_back({buffer, i, g, n == 0 ? buffer : fmt::format("{}_f{}", buffer, n)});
      ++n;
    }
  }
  return out;
}

const VectorLoad* find_vector_load(const std::vector<VectorLoad>& loads, const Expr& load, const std::vector<LoadGuard>& guards) {
  const std::string key = print_expr(load.args[0]), gkey = guards_key(guards);
  const VectorLoad* found = nullptr;
  for (const VectorLoad& vl : loads) {
    if (vl.buffer != load.name || print_expr(vl.index) != key) continue;
    if (vl.guards.empty()) return &vl;  // read whatever the selects: valid under any
    if (guards_key(vl.guards) == gkey) found = &vl;
  }
  return found;
}

ExprPtr vector_index(const ExprPtr& index, const std::string& v, const ExprPtr& q, int w) {
  if (is_var(index, v)) return q;
  // A row broadcast `v % C`: vector q % (C / W), as before the general form.
  if (index->kind == ExprKind::Mod && is_var(index->args[0], v) && index->args[1]->kind == ExprKind::IntImm)
    return mod(q, imm(index->args[1]->i / w));
  ExprPtr at = rewrite(index, [&](const ExprPtr& x) { return is_var(x, v) ? mul(q, imm(w)) : x; });
  return floordiv(at, imm(w));
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
