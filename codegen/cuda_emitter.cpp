#include "codegen/cuda_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/c_family.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// ---- shared memory of block combines

// The scratch array a block combine of a `t` accumulator uses (one per value type: combines
// run one after another, and kiln_block_combine makes reuse safe).
std::string scratch_of(DType t) {
  std::string_view vt = c_value_type(t);
  KILN_INTERNAL_ASSERT(vt != "bool", "a combine across threads has a numeric accumulator");
  return vt == "float" ? "kiln_smem_f32" : vt == "double" ? "kiln_smem_f64" : "kiln_smem_i64";
}
constexpr int kScratchSlots = 33;  // 32 warps' partials and the broadcast slot

// Scratch arrays a kernel declares: name -> element type.
std::map<std::string, std::string> scratch_arrays(const Kernel& k) {
  std::map<std::string, std::string> out;
  visit(k.body, [&](const Stmt& s) {
    if (s.kind != StmtKind::CombineAcross || s.map != LoopMap::GpuThreads) return;
    out[scratch_of(s.dtype)] = std::string(c_value_type(s.dtype));
    if (s.combine == CombineOp::Argmax) out["kiln_smem_idx"] = "int64_t";
    if (s.combine == CombineOp::SumExp) out[scratch_of(s.dtype) + "_max"] = std::string(c_value_type(s.dtype));
    if (s.combine == CombineOp::Welford) {
      out[scratch_of(s.dtype) + "_mean"] = std::string(c_value_type(s.dtype));
      out[scratch_of(s.dtype) + "_n"] = std::string(c_value_type(s.dtype));
    }
  });
  return out;
}

// Whether the body of `loop` indexes with both `v / c` and `v % c` of its variable v.
bool divides_and_wraps(const Stmt& loop) {
  bool div = false, mod = false;
  auto of_var = [&](const ExprPtr& e) {
    bool found = false;
    visit(e, [&](const Expr& x) { found = found || (x.kind == ExprKind::Var && x.name == loop.name); });
    return found;
  };
  for (const StmtPtr& b : loop.body)
    visit(b, [&](const Stmt& st) {
      for (const ExprPtr& e : st.exprs)
        visit(e, [&](const Expr& x) {
          if (x.kind == ExprKind::FloorDiv && !x.args.empty()) div = div || of_var(x.args[0]);
          if (x.kind == ExprKind::Mod && !x.args.empty()) mod = mod || of_var(x.args[0]);
        });
    });
  return div && mod;
}

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

// The kernel's body as one loop (Blocks of one statement around it), or null.
StmtPtr sole_loop(const StmtPtr& s) {
  if (s->kind == StmtKind::For) return s;
  if (s->kind == StmtKind::Block && s->body.size() == 1) return sole_loop(s->body[0]);
  return nullptr;
}

bool is_var(const ExprPtr& e, const std::string& v) { return e->kind == ExprKind::Var && e->name == v; }

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

// Elements per thread per iteration if `loop` can run on 16-byte vectors, else 0.
int vector_width(const Kernel& k, const StmtPtr& loop) {
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

// The loop body for element j of the vector: loads of b[v] read `b_v.v[j]`, stores write it.
StmtPtr vector_element(const StmtPtr& s, const Kernel& k, const std::string& v, int j) {
  auto lane = [&](const ExprPtr& e) {
    return rewrite(e, [&](const ExprPtr& x) {
      if (x->kind != ExprKind::Load || period_of(x->args[0], v) < 0) return x;
      const Buffer* b = k.find_buffer(x->name);
      if (b && b->role == BufferRole::Constant) return x;
      return load(x->name + "_v.v", x->dtype, imm(j));
    });
  };
  switch (s->kind) {
    case StmtKind::Block: {
      std::vector<StmtPtr> body;
      for (auto& b : s->body) body.push_back(vector_element(b, k, v, j));
      return block(std::move(body));
    }
    case StmtKind::Let: return let(s->name, lane(s->exprs[0]));
    case StmtKind::Store: return store(s->name + "_v.v", imm(j), lane(s->exprs[1]));
    default: KILN_INTERNAL_ASSERT(false, "a vectorized loop holds only lets and stores"); return s;
  }
}

bool uses_var(const StmtPtr& s, const std::string& v) {
  bool used = false;
  visit(s, [&](const Stmt& st) {
    for (auto& e : st.exprs)
      visit(e, [&](const Expr& x) { used = used || (x.kind == ExprKind::Var && x.name == v); });
  });
  return used;
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

// Elements per vector for a row loop (see above), or 0; `bases` gets each buffer's base.
int row_vector_width(const Kernel& k, const StmtPtr& loop, std::map<std::string, ExprPtr>& bases) {
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
  for (auto& b : loaded) ok = ok && !stored.count(b);
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
    ok = ok && buf && buf->role != BufferRole::Temp && !(buf->role == BufferRole::Output && loaded_anywhere.count(b));
  }
  if (!ok || widest == 0 || accesses.empty()) return 0;
  int w = 16 / widest;
  if (loop->extent % w != 0) return 0;
  for (auto& [b, index] : accesses) {
    ExprPtr base = aligned_base(index, v, w);
    if (!base) return 0;
    auto it = bases.find(b);
    if (it != bases.end() && print_expr(it->second) != print_expr(base)) return 0;  // one form per buffer
    bases[b] = base;
  }
  return w;
}

// The body for element j of a row vector: accesses at base + v read/write `b_v.v[j]`.
StmtPtr row_vector_element(const StmtPtr& s, const std::map<std::string, ExprPtr>& bases, const std::string& v, int j) {
  auto lane = [&](const ExprPtr& e) {
    return rewrite(e, [&](const ExprPtr& x) {
      if (x->kind != ExprKind::Load || !bases.count(x->name)) return x;
      bool uses_v = false;
      visit(x->args[0], [&](const Expr& y) { uses_v = uses_v || (y.kind == ExprKind::Var && y.name == v); });
      return uses_v ? load(x->name + "_v.v", x->dtype, imm(j)) : x;
    });
  };
  switch (s->kind) {
    case StmtKind::Let: return let(s->name, lane(s->exprs[0]));
    case StmtKind::Accumulate: {
      auto c = std::make_shared<Stmt>(*s);
      for (auto& e : c->exprs) e = lane(e);
      return c;
    }
    case StmtKind::Store: return store(s->name + "_v.v", imm(j), lane(s->exprs[1]));
    default: KILN_INTERNAL_ASSERT(false, "a vectorized row loop holds lets, accumulations and stores"); return s;
  }
}

// ---- the emitter

// Who runs a statement: every thread for itself (inside a grid-stride, thread or lane loop),
// every thread of a block or lanes of a warp redundantly, or (outside every grid-mapped loop)
// every thread of the launch redundantly.
enum class Runs { Launch, Thread, Block, Warp };

class CudaEmitter : public CEmitter {
 public:
  explicit CudaEmitter(const Kernel& k) : CEmitter(cuda_dialect(k.index_bits)), k_(k) {}

  void kernel_body(int ind) {
    StmtPtr top = sole_loop(k_.body);
    if (top && vector_width(k_, top) > 0) return vectorized(top, vector_width(k_, top), ind);
    stmt(k_.body, ind);
  }

 protected:
  // Stores and atomic adds that every thread of a block/warp/launch would repeat are done
  // by one of them.
  std::string one_writer() const {
    switch (runs_.back()) {
      case Runs::Thread: return "";
      case Runs::Block: return "threadIdx.x == 0";
      case Runs::Warp: return "(threadIdx.x & 31) == 0";
      case Runs::Launch: return "blockIdx.x == 0 && threadIdx.x == 0";
    }
    return "";
  }
  void guarded(int ind, const std::string& s) {
    std::string who = one_writer();
    line(ind, who.empty() ? s : "if (" + who + ") " + s);
  }

  std::string grid_stride_header(const std::string& v, const std::string& start, int64_t extent) const {
    std::string_view I = d_.index_type;
    return fmt::format("for ({0} {1} = {2}({0})(blockIdx.x * blockDim.x + threadIdx.x); {1} < {3}; {1} += ({0})(gridDim.x * blockDim.x)) {{",
                       I, v, start, int_literal(extent, d_));
  }

  // A thread's or lane's share of a row, W elements per iteration (row_vector_width).
  void row_vectorized(const StmtPtr& s, int w, const std::map<std::string, ExprPtr>& bases, int ind) {
    std::string_view I = d_.index_type;
    const std::string& v = s->name;
    std::string q = v + "_vec";
    bool lanes = s->map == LoopMap::GpuLanes;
    if (!s->comment.empty()) line(ind, "// " + s->comment);
    line(ind, fmt::format("// {} consecutive elements per {} per iteration: one 16-byte access per buffer", w, lanes ? "lane" : "thread"));
    line(ind, fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} += {4}) {{", I, q, lanes ? "threadIdx.x % 32" : "threadIdx.x",
                          int_literal(s->extent / w, d_), lanes ? "32" : "blockDim.x"));
    runs_.push_back(Runs::Thread);
    std::set<std::string> stored;
    for (auto& st : s->body)
      if (st->kind == StmtKind::Store) stored.insert(st->name);
    auto vec_type = [&](const std::string& b) { return fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), w); };
    for (auto& [b, base] : bases) {
      std::string at = fmt::format("({}) / {} + {}", expr(base), w, q);
      if (base->kind == ExprKind::IntImm && base->i == 0) at = q;
      if (stored.count(b)) line(ind + 1, fmt::format("{} {}_v;", vec_type(b), b));
      else line(ind + 1, fmt::format("const {0} {1}_v = ((const {0}*){1})[{2}];", vec_type(b), b, at));
    }
    for (int j = 0; j < w; ++j) {
      std::vector<StmtPtr> el;
      for (auto& st : s->body) el.push_back(row_vector_element(st, bases, v, j));
      StmtPtr blk = block(std::move(el));
      line(ind + 1, "{");
      if (uses_var(blk, v)) line(ind + 2, fmt::format("const {} {} = {} * {} + {};", I, v, q, w, j));
      stmt(blk, ind + 2);
      line(ind + 1, "}");
    }
    for (auto& [b, base] : bases)
      if (stored.count(b)) {
        std::string at = base->kind == ExprKind::IntImm && base->i == 0 ? q : fmt::format("({}) / {} + {}", expr(base), w, q);
        line(ind + 1, fmt::format("(({}*){})[{}] = {}_v;", vec_type(b), b, at, b));
      }
    runs_.pop_back();
    line(ind, "}");
  }

  void loop(const StmtPtr& s, int ind) override {
    KILN_INTERNAL_ASSERT(s->map != LoopMap::Unmapped, "the kernel was scheduled (codegen/schedule.h) before the CUDA emitter ran");
    {
      std::map<std::string, ExprPtr> bases;
      if (int w = row_vector_width(k_, s, bases); w > 0) return row_vectorized(s, w, bases, ind);
    }
    KILN_INTERNAL_ASSERT(s->map == LoopMap::Serial || is_gpu_map(s->map), "the CUDA emitter is given a GPU kernel, not a CPU-mapped one");
    if (!s->comment.empty()) line(ind, "// " + s->comment);
    // A thread's share of a row (see the pragmas below).
    const bool share = s->map == LoopMap::GpuThreads || s->map == LoopMap::GpuLanes;
    const bool rolled_64bit = share && s->extent < 128 && divides_and_wraps(*s);
    std::string_view I = rolled_64bit ? "long long" : d_.index_type;
    const std::string& v = s->name;
    std::string E = int_literal(s->extent, d_);
    std::string head;
    Runs runs = runs_.back();
    switch (s->map) {
      case LoopMap::GpuGridStride:
        head = grid_stride_header(v, "", s->extent);
        runs = Runs::Thread;
        break;
      case LoopMap::GpuBlocks:
        head = fmt::format("for ({0} {1} = blockIdx.x; {1} < {2}; {1} += gridDim.x) {{", I, v, E);
        runs = Runs::Block;
        break;
      case LoopMap::GpuWarps:
        head = fmt::format("for ({0} {1} = ({0})(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32); {1} < {2}; {1} += ({0})(gridDim.x * (blockDim.x / 32))) {{",
                           I, v, E);
        runs = Runs::Warp;
        break;
      case LoopMap::GpuThreads:
        head = fmt::format("for ({0} {1} = threadIdx.x; {1} < {2}; {1} += blockDim.x) {{", I, v, E);
        runs = Runs::Thread;
        break;
      case LoopMap::GpuLanes:
        head = fmt::format("for ({0} {1} = threadIdx.x % 32; {1} < {2}; {1} += 32) {{", I, v, E);
        runs = Runs::Thread;
        break;
      default: head = fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", I, v, E); break;
    }
    // A thread's share of a row: unrolled so that several loads are in flight before the
    // first is used (a loop whose step branches, as online softmax's, would otherwise wait
    // for each load in turn and leave the memory system half idle).
    if (share && s->extent >= 128) line(ind, "#pragma unroll 4");
    // NVRTC 13.0 (NVVM: for sm_80, sm_90 and compute_90 alike) segfaults on a short share of
    // a row, a few iterations per thread or one, whose index both divides and takes the
    // remainder of a 32-bit loop variable, as a reduction over the non-contiguous dims of a
    // permuted tensor does inside the rows' grid-stride loop: `for (int r = lane; r < 30; r +=
    // 32) ... x[(r / 15) * 65 + ((r / 3) % 5) * 13 + row]` (three kiln fuzz findings on the H100:
    // tests/tools/fuzz_regressions/nvrtc13_*). Kernels varied and compiled there alone: it
    // crashes unrolled or not, and with the remainder written as a subtraction when unrolled;
    // it compiles with a 64-bit (or unsigned) loop variable and the loop kept rolled. Both,
    // then: the 64-bit division by a constant costs a few instructions in a loop of a few
    // iterations (I above). The long ones (unroll 4) have not crashed.
    else if (rolled_64bit) {
      line(ind, "// (a 64-bit variable, not unrolled: NVRTC 13.0 crashes on this loop otherwise)");
      line(ind, "#pragma unroll 1");
    }
    line(ind, head);
    runs_.push_back(runs);
    body(s, ind + 1);
    runs_.pop_back();
    line(ind, "}");
  }

  void store(const StmtPtr& s, int ind) override { guarded(ind, store_text(*s)); }

  void atomic_add(const StmtPtr& s, int ind) override {
    const Buffer* b = k_.find_buffer(s->name);
    KILN_INTERNAL_ASSERT(b, "an atomic add names a buffer of the kernel");
    std::string at = s->name + "[" + expr(s->exprs[0]) + "]", v = expr(s->exprs[1]);
    // Two's complement: an unsigned add wraps exactly as the signed sum should.
    if (b->dtype == DType::I64) return guarded(ind, fmt::format("atomicAdd((unsigned long long*)&{}, (unsigned long long){});", at, paren(v)));
    KILN_INTERNAL_ASSERT(b->dtype == DType::I32, "atomic adds are of i32 or i64 (the verifier rejects floats)");
    guarded(ind, fmt::format("atomicAdd((int*)&{}, (int){});", at, paren(v)));
  }

  void combine_across(const StmtPtr& s, int ind) override {
    const std::string& a = s->name;
    bool block = s->map == LoopMap::GpuThreads;
    KILN_INTERNAL_ASSERT(block || s->map == LoopMap::GpuLanes, "a combine is across a block's threads or a warp's lanes");
    if (s->combine == CombineOp::Argmax) {
      if (block) line(ind, fmt::format("kiln_block_pair({0}, {0}_idx, {1}, kiln_smem_idx, kiln_argmax_merge_op());", a, scratch_of(s->dtype)));
      else line(ind, fmt::format("kiln_warp_pair({0}, {0}_idx, kiln_argmax_merge_op());", a));
      return;
    }
    if (s->combine == CombineOp::Welford) {
      std::string sc = scratch_of(s->dtype);
      if (block) line(ind, fmt::format("kiln_block_triple({0}, {0}_mean, {0}_n, {1}, {1}_mean, {1}_n, kiln_welford_merge_op());", a, sc));
      else line(ind, fmt::format("kiln_warp_triple({0}, {0}_mean, {0}_n, kiln_welford_merge_op());", a));
      return;
    }
    if (s->combine == CombineOp::SumExp) {
      if (block) line(ind, fmt::format("kiln_block_pair({0}, {0}_max, {1}, {1}_max, kiln_sumexp_merge_op());", a, scratch_of(s->dtype)));
      else line(ind, fmt::format("kiln_warp_pair({0}, {0}_max, kiln_sumexp_merge_op());", a));
      return;
    }
    std::string_view op = s->combine == CombineOp::Sum ? "kiln_sum_op()" : s->combine == CombineOp::Prod ? "kiln_prod_op()"
                          : s->combine == CombineOp::Max ? "kiln_max_op()" : "kiln_min_op()";
    if (block) line(ind, fmt::format("{0} = kiln_block_combine({0}, {1}, {2});", a, op, scratch_of(s->dtype)));
    else line(ind, fmt::format("{0} = kiln_warp_combine({0}, {1});", a, op));
  }

  void barrier(const StmtPtr&, int ind) override { line(ind, "__syncthreads();"); }

 private:
  // The grid-stride loop on 16-byte vectors (see vector_width), then the scalar tail.
  void vectorized(const StmtPtr& s, int width, int ind) {
    const std::string& v = s->name;
    std::string_view I = d_.index_type;
    std::set<std::string> loaded, stored;
    visit(s, [&](const Stmt& st) {
      if (st.kind == StmtKind::Store) stored.insert(st.name);
      for (auto& e : st.exprs)
        visit(e, [&](const Expr& x) {
          const Buffer* b = x.kind == ExprKind::Load ? k_.find_buffer(x.name) : nullptr;
          if (b && b->role != BufferRole::Constant) loaded.insert(x.name);
        });
    });
    auto vec_type = [&](const std::string& b) {
      return fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), width);
    };
    if (!s->comment.empty()) line(ind, "// " + s->comment);
    int64_t vectors = s->extent / width, done = vectors * width;
    runs_.push_back(Runs::Thread);
    if (vectors > 0) {
      line(ind, fmt::format("// {} elements per thread per iteration: one 16-byte load per input, one store per output", width));
      line(ind, "// (every buffer is 16-byte aligned; see codegen/cuda_emitter.h)");
      std::string q = v + "_vec";
      line(ind, grid_stride_header(q, "", vectors));
      std::map<std::string, int64_t> period = load_periods(k_, s);
      for (const std::string& b : loaded) {
        int64_t p = period[b];
        std::string at = p > 0 ? fmt::format("{} % {}", q, int_literal(p / width, d_)) : q;
        line(ind + 1, fmt::format("const {0} {1}_v = ((const {0}*){1})[{2}];", vec_type(b), b, at));
      }
      for (const std::string& b : stored) line(ind + 1, fmt::format("{} {}_v;", vec_type(b), b));
      for (int j = 0; j < width; ++j) {
        StmtPtr el = vector_element(block(s->body), k_, v, j);
        line(ind + 1, "{");
        if (uses_var(el, v)) line(ind + 2, fmt::format("const {} {} = {} * {} + {};", I, v, q, width, j));
        stmt(el, ind + 2);
        line(ind + 1, "}");
      }
      for (const std::string& b : stored) line(ind + 1, fmt::format("(({}*){})[{}] = {}_v;", vec_type(b), b, q, b));
      line(ind, "}");
    }
    if (done < s->extent) {
      if (vectors > 0) line(ind, "// the scalar tail: elements past the last whole vector");
      line(ind, grid_stride_header(v, fmt::format("{} + ", int_literal(done, d_)), s->extent));
      body(s, ind + 1);
      line(ind, "}");
    }
    runs_.pop_back();
  }

  const Kernel& k_;
  std::vector<Runs> runs_{Runs::Launch};
};

}  // namespace

int64_t cuda_shared_bytes(const Kernel& k) {
  int64_t bytes = 0;
  for (auto& [name, type] : scratch_arrays(k)) bytes += kScratchSlots * (type == "float" ? 4 : 8);
  return bytes;
}

std::string emit_cuda_kernel(const Kernel& k) {
  const CDialect d = cuda_dialect(k.index_bits);
  CudaEmitter em(k);
  if (!k.comment.empty()) em.line(0, "// " + k.comment);
  // No __restrict__ in a kernel that loads from a buffer it writes (cuda_emitter.h says why).
  std::set<std::string> written;
  for (const Buffer& b : k.buffers)
    if (b.role == BufferRole::Output || b.role == BufferRole::Temp) written.insert(b.name);
  bool reads_back = false;
  visit(k.body, [&](const Stmt& st) {
    for (const ExprPtr& e : st.exprs)
      visit(e, [&](const Expr& x) { reads_back |= x.kind == ExprKind::Load && written.count(x.name) > 0; });
  });
  const char* restrict = reads_back ? "" : " __restrict__";
  std::string params;
  for (const Buffer& b : k.buffers) {
    bool in = b.role == BufferRole::Input || b.role == BufferRole::Constant;
    params += fmt::format("{}{}{}*{} {}", params.empty() ? "" : ", ", in ? "const " : "", c_storage_type(b.dtype), restrict, b.name);
  }
  em.line(0, fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{", std::max<int64_t>(k.launch.block, 1), k.name, params));
  for (const Buffer& b : k.buffers) em.line(1, fmt::format("// {}: {} {}", b.name, buffer_role_name(b.role), b.what));
  for (const Buffer& c : k.constants)
    em.line(1, fmt::format("static const {} {}[{}] = {{{}}};  // {}", c_storage_type(c.dtype), c.name, std::max<size_t>(c.data.size(), 1),
                           c.data.empty() ? "0" : constant_table(c, d), c.what));
  for (auto& [name, type] : scratch_arrays(k)) em.line(1, fmt::format("__shared__ {} {}[{}];", type, name, kScratchSlots));
  em.kernel_body(1);
  em.line(0, "}");
  return em.out;
}

std::string emit_cuda_module(const std::vector<Kernel>& kernels) {
  std::string out(cuda_prelude());
  for (const Kernel& k : kernels) out += "\n" + emit_cuda_kernel(k);
  return out;
}

}  // namespace kiln::codegen
