#include "codegen/cuda_emitter.h"

#include "codegen/attention.h"
#include "codegen/sort.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/c_family.h"
#include "codegen/simplify.h"
#include "codegen/tiling.h"
#include "codegen/vectorize.h"
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

// The loop body for element j of the vector: a load that one of the loop's vector loads gives
// reads `<name>_v.v[j]`, others (under a select that varies within a vector) stay loads at v;
// stores write `b_v.v[j]`.
StmtPtr vector_element(const StmtPtr& s, const std::vector<VectorLoad>& vloads, int j) {
  std::vector<LoadGuard> guards;
  std::function<ExprPtr(const ExprPtr&)> lane = [&](const ExprPtr& e) -> ExprPtr {
    if (e->kind == ExprKind::Load)
      if (const VectorLoad* vl = find_vector_load(vloads, *e, guards)) return load(vl->name + "_v.v", e->dtype, imm(j));
    if (e->args.empty()) return e;
    auto c = std::make_shared<Expr>(*e);
    for (size_t i = 0; i < c->args.size(); ++i) {
      const bool branch = e->kind == ExprKind::Select && i > 0;
      if (branch) guards.push_back({e->args[0], i == 1});
      c->args[i] = lane(e->args[i]);
      if (branch) guards.pop_back();
    }
    return c;
  };
  switch (s->kind) {
    case StmtKind::Block: {
      std::vector<StmtPtr> body;
      for (auto& b : s->body) body.push_back(vector_element(b, vloads, j));
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

// The dialect of one kernel: its index width, and the approximate f32 math its schedule chose.
CDialect kernel_dialect(const Kernel& k) {
  CDialect d = cuda_dialect(k.index_bits);
  d.approx_f32 = k.schedule.approx_f32_math;
  return d;
}

class CudaEmitter : public CEmitter {
 public:
  explicit CudaEmitter(const Kernel& k) : CEmitter(kernel_dialect(k)), k_(k) {}

  void kernel_body(int ind) {
    StmtPtr top = sole_loop(k_.body);
    if (top && top->map == LoopMap::GpuGridStride && top->vector > 0) return vectorized(top, top->vector, ind);
    if (top && top->map == LoopMap::GpuTiles) return tiled(top, ind);
    stmt(k_.body, ind);
  }

 protected:
  // Stores and atomic adds that every thread of a block/warp/launch would repeat are done
  // by one of them.
  std::string one_writer() const {
    switch (runs_.back()) {
      case Runs::Thread: return "";
      case Runs::Block: return cluster_ > 1 ? "kiln_crank == 0 && threadIdx.x == 0" : "threadIdx.x == 0";
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
    bool reads_held = std::any_of(bases.begin(), bases.end(), [&](auto& b) { return held_.count(b.first) > 0; });
    std::string vectors = int_literal(s->extent / w, d_);
    if (reads_held) {
      // The same walk as the held loads (emit_held): iteration h of every thread is vector
      // `tid + h * T` of the row, so register h holds what the iteration reads.
      line(ind, fmt::format("// {} consecutive elements per {} per iteration, of a row held in {}", w, lanes ? "lane" : "thread",
                            held_shared_ ? "shared memory" : "registers"));
      line(ind, held_shared_ ? "#pragma unroll 4" : "#pragma unroll");
      line(ind, fmt::format("for (int {0}_h = 0; {0}_h < {1}; ++{0}_h) {{", v, held_vectors_));
      bool reads_memory = std::any_of(bases.begin(), bases.end(), [&](auto& b) { return held_.count(b.first) == 0; });
      bool tail = (s->extent / w) % held_threads_ != 0;
      std::vector<StmtPtr> first;
      for (auto& st : s->body) first.push_back(row_vector_element(st, bases, v, 0));
      if (reads_memory || tail || uses_var(block(std::move(first)), v))
        line(ind + 1, fmt::format("const {0} {1} = ({0})({2}) + {3}_h * {4};", I, q, lanes ? "threadIdx.x % 32" : thread_in_row(), v, held_threads_));
      if (tail) line(ind + 1, fmt::format("if ({} >= {}) break;", q, vectors));
    } else {
      line(ind, fmt::format("// {} consecutive elements per {} per iteration: one {}-byte access per buffer", w, lanes ? "lane" : "thread",
                            w * widest_bytes(bases)));
      line(ind, fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} += {4}) {{", I, q, lanes ? "threadIdx.x % 32" : thread_in_row(), vectors,
                            lanes ? "32" : row_stride()));
    }
    runs_.push_back(Runs::Thread);
    std::set<std::string> stored;
    for (auto& st : s->body)
      if (st->kind == StmtKind::Store) stored.insert(st->name);
    auto vec_type = [&](const std::string& b) { return fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), w); };
    for (auto& [b, base] : bases) {
      std::string at = fmt::format("({}) / {} + {}", expr(base), w, q);
      if (base->kind == ExprKind::IntImm && base->i == 0) at = q;
      if (stored.count(b) && carried_.count(b)) line(ind + 1, fmt::format("{0} {1}_v = {1}_held[{2}];", vec_type(b), b, held_slot(v + "_h")));
      else if (stored.count(b)) line(ind + 1, fmt::format("{} {}_v;", vec_type(b), b));
      else if (held_.count(b)) line(ind + 1, fmt::format("const {0} {1}_v = {1}_held[{2}];", vec_type(b), b, held_slot(v + "_h")));
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
      if (stored.count(b) && carried_.count(b)) {
        line(ind + 1, fmt::format("{0}_held[{1}] = {0}_v;", b, held_slot(v + "_h")));
      } else if (stored.count(b)) {
        std::string at = base->kind == ExprKind::IntImm && base->i == 0 ? q : fmt::format("({}) / {} + {}", expr(base), w, q);
        line(ind + 1, fmt::format("(({}*){})[{}] = {}_v;", vec_type(b), b, at, b));
      }
    runs_.pop_back();
    line(ind, "}");
  }

  void loop(const StmtPtr& s, int ind) override {
    KILN_INTERNAL_ASSERT(s->map != LoopMap::Unmapped, "the kernel was scheduled (codegen/schedule.h) before the CUDA emitter ran");
    if (s->vector > 0 && (s->map == LoopMap::GpuThreads || s->map == LoopMap::GpuLanes)) {
      std::map<std::string, ExprPtr> bases;
      KILN_INTERNAL_ASSERT(row_vector_width(k_, s, bases, true, carried_names()) >= s->vector, "the schedule vectorized a row loop the analysis allows");
      return row_vectorized(s, s->vector, bases, ind);
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
      case LoopMap::GpuWarps:
        head = fmt::format("for ({0} {1} = {3}; {1} < {2}; {1} += {4}) {{", I, v, E, row_start(*s, I), row_step(*s, I));
        runs = s->map == LoopMap::GpuBlocks ? Runs::Block : Runs::Warp;
        break;
      case LoopMap::GpuThreads:
        head = fmt::format("for ({0} {1} = {3}; {1} < {2}; {1} += {4}) {{", I, v, E, thread_in_row(), row_stride());
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
    // A thread's serial walk with no loop inside (partials combined in chunk order, a column
    // chunk's rows): unrolled so that the next iterations' loads are issued before this one's
    // result is used.
    else if (s->map == LoopMap::Serial && s->extent >= 16 && is_innermost(*s)) line(ind, "#pragma unroll 8");
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
    auto held_before = held_;
    auto carried_before = carried_;
    int64_t vectors_before = held_vectors_, threads_before = held_threads_;
    bool shared_before = held_shared_, lanes_before = held_lanes_;
    std::map<std::string, std::pair<ExprPtr, int64_t>> found;
    const bool holds = !s->held.empty() || !s->held_written.empty();
    if (s->map == LoopMap::GpuBlocks) cluster_ = std::max(s->cluster, 1);
    if (holds) found = find_held(s);
    if (s->prefetch && !s->held.empty()) {
      // The first iteration's rows, before the loop (emit_held takes the rest).
      for (auto& b : s->held)
        line(ind, fmt::format("kiln_vec<{}, {}> {}_next[{}];", c_storage_type(k_.find_buffer(b)->dtype), held_.at(b), b, held_vectors_));
      if (s->map == LoopMap::Serial) {
        emit_prefetch(s, found, imm(0), ind);
      } else {
        // A block's or a warp's first row, where it has one.
        const std::string first = v + "_first";
        line(ind, "{");
        line(ind + 1, fmt::format("const {} {} = {};", I, first, row_start(*s, I)));
        line(ind + 1, fmt::format("if ({} < {}) {{", first, E));
        emit_prefetch(s, found, var(first, 0, s->extent - 1), ind + 2);
        line(ind + 1, "}");
        line(ind, "}");
      }
    }
    line(ind, head);
    runs_.push_back(runs);
    if (holds) emit_held(s, found, ind + 1);
    body(s, ind + 1);
    if (!s->held_written.empty()) emit_write_back(s, ind + 1);
    held_ = std::move(held_before);
    carried_ = std::move(carried_before);
    held_vectors_ = vectors_before, held_threads_ = threads_before, held_shared_ = shared_before, held_lanes_ = lanes_before;
    if (s->map == LoopMap::GpuBlocks) cluster_ = 1;
    runs_.pop_back();
    line(ind, "}");
  }

  // A block's or a warp's row loop: the first row it takes, and the step to its next (a
  // cluster per row: its blocks take the same rows).
  static std::string row_start(const Stmt& s, std::string_view I) {
    if (s.map == LoopMap::GpuWarps) return fmt::format("({})(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32)", I);
    return s.cluster > 1 ? fmt::format("blockIdx.x / {}", s.cluster) : std::string("blockIdx.x");
  }
  static std::string row_step(const Stmt& s, std::string_view I) {
    if (s.map == LoopMap::GpuWarps) return fmt::format("({})(gridDim.x * (blockDim.x / 32))", I);
    return s.cluster > 1 ? fmt::format("gridDim.x / {}", s.cluster) : std::string("gridDim.x");
  }

  static bool is_innermost(const Stmt& loop) {
    bool inner = true;
    for (auto& b : loop.body) visit(b, [&](const Stmt& x) { inner = inner && x.kind != StmtKind::For; });
    return inner;
  }

  // The rows a row loop holds (Stmt::held): each thread loads its vectors of the row into
  // registers, all loads issued before the first use; the share loops read them
  // (row_vectorized) in the same walk.
  // Where the rows a loop holds are (each held buffer's base and row length in vectors), and
  // the walk's sizes; before the loop's first line, so that a prefetch can use them.
  std::map<std::string, std::pair<ExprPtr, int64_t>> find_held(const StmtPtr& row) {
    held_vectors_ = row->held_vectors;
    const Stmt* share = nullptr;
    visit(row, [&](const Stmt& x) {
      if (!share && x.kind == StmtKind::For && (x.map == LoopMap::GpuLanes || x.map == LoopMap::GpuThreads) && x.vector > 0) share = &x;
    });
    KILN_INTERNAL_ASSERT(share, "a row loop that holds rows has a vectorized share loop");
    held_lanes_ = share->map == LoopMap::GpuLanes;
    held_threads_ = held_lanes_ ? 32 : k_.launch.block * cluster_;
    for (auto& b : row->held_written) carried_[b] = {};
    std::map<std::string, std::pair<ExprPtr, int64_t>> found;  // held buffer -> base, row length
    visit(row, [&](const Stmt& x) {
      if (x.kind != StmtKind::For || x.vector == 0 || !(x.map == LoopMap::GpuLanes || x.map == LoopMap::GpuThreads)) return;
      std::map<std::string, ExprPtr> bases;
      row_vector_width(k_, std::make_shared<Stmt>(x), bases, true, carried_names());
      for (auto* list : {&row->held, &row->held_written})
        for (auto& b : *list)
          if (bases.count(b) && !found.count(b)) found[b] = {bases[b], x.extent / x.vector}, held_[b] = x.vector;
    });
    return found;
  }

  // A serial loop that prefetches (Stmt::prefetch): its held rows for the iteration `at`
  // (an expression of the loop variable) loaded into `<b>_next`.
  void emit_prefetch(const StmtPtr& loop, const std::map<std::string, std::pair<ExprPtr, int64_t>>& found, ExprPtr at, int ind) {
    for (auto& b : loop->held) {
      auto [base, vectors] = found.at(b);
      int w = held_.at(b);
      ExprPtr moved = simplify(rewrite(base, [&](const ExprPtr& x) { return x->kind == ExprKind::Var && x->name == loop->name ? at : x; }));
      std::string vt = fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), w);
      held_walk(ind, held_lanes_, 0, vectors, fmt::format("{}_next[h] = ((const {}*){})[{}];", b, vt, b, vector_at(moved, w)));
    }
  }

  void emit_held(const StmtPtr& row, const std::map<std::string, std::pair<ExprPtr, int64_t>>& found, int ind) {
    const bool lanes = held_lanes_;
    held_shared_ = row->held_shared;
    KILN_INTERNAL_ASSERT(!held_shared_ || !lanes, "rows held in shared memory are a block's");
    KILN_INTERNAL_ASSERT(!held_shared_ || row->held_written.empty(), "rows carried from row to row are in registers");
    for (auto& b : row->held_written) {
      KILN_INTERNAL_ASSERT(found.count(b), "a carried row is read by a vectorized share loop");
      auto [base, vectors] = found.at(b);
      carried_[b] = {base, vectors};
      line(ind, fmt::format("// the row of {} carried in registers ({} vectors per thread) from its first store; stored back once, "
                            "at the end", b, held_vectors_));
      line(ind, fmt::format("kiln_vec<{}, {}> {}_held[{}] = {{}};", c_storage_type(k_.find_buffer(b)->dtype), held_[b], b, held_vectors_));
    }
    if (row->held.empty()) return;
    if (row->prefetch) {
      // This iteration's rows were loaded during the last one; the next iteration's are
      // issued now, to arrive while this one computes.
      line(ind, fmt::format("// the row of {} loaded during the last iteration; the next one's loads issued now", fmt::join(row->held, ", ")));
      for (auto& b : row->held) {
        std::string vt = fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), held_.at(b));
        line(ind, fmt::format("{0} {1}_held[{2}];", vt, b, held_vectors_));
        line(ind, "#pragma unroll");
        line(ind, fmt::format("for (int h = 0; h < {0}; ++h) {1}_held[h] = {1}_next[h];", held_vectors_, b));
      }
      if (row->map == LoopMap::Serial) {
        line(ind, fmt::format("if ({} + 1 < {}) {{", row->name, int_literal(row->extent, d_)));
        emit_prefetch(row, found, add(var(row->name, 0, row->extent - 1), imm(1)), ind + 1);
        line(ind, "}");
        return;
      }
      const std::string next = row->name + "_next";
      line(ind, "{");
      line(ind + 1, fmt::format("const {0} {1} = {2} + {3};", d_.index_type, next, row->name, row_step(*row, d_.index_type)));
      line(ind + 1, fmt::format("if ({} < {}) {{", next, int_literal(row->extent, d_)));
      emit_prefetch(row, found, var(next, 0, row->extent - 1), ind + 2);
      line(ind + 1, "}");
      line(ind, "}");
      return;
    }
    if (held_shared_)
      line(ind, fmt::format("// the row of {} read once, into shared memory: {} vectors per thread, in slots only that thread writes and "
                            "reads (no barrier)", fmt::join(row->held, ", "), held_vectors_));
    else
      line(ind, fmt::format("// the row of {} read once, into registers: {} vectors per {}", fmt::join(row->held, ", "), held_vectors_,
                            lanes ? "lane" : "thread"));
    int64_t offset = 0;
    for (auto& b : row->held) {
      KILN_INTERNAL_ASSERT(found.count(b), "a held row is read by a vectorized share loop");
      auto [base, vectors] = found.at(b);
      int w = held_[b];
      DType dt = k_.find_buffer(b)->dtype;
      std::string vt = fmt::format("kiln_vec<{}, {}>", c_storage_type(dt), w);
      if (held_shared_) {
        line(ind, fmt::format("{0}* {1}_held = ({0}*)(kiln_dynamic_smem + {2});", vt, b, offset));
        offset += held_shared_bytes(dt, held_vectors_, held_threads_, w);
      } else {
        line(ind, fmt::format("{} {}_held[{}];", vt, b, held_vectors_));
      }
      held_walk(ind, lanes, held_shared_ ? 8 : 0, vectors,
                fmt::format("{}_held[{}] = ((const {}*){})[{}];", b, held_slot("h"), vt, b, vector_at(base, w)));
    }
  }

  // The index of a thread's vector `held_vq` of a row at `base`, in vectors of w elements.
  std::string vector_at(const ExprPtr& base, int w) {
    return base->kind == ExprKind::IntImm && base->i == 0 ? std::string("held_vq") : fmt::format("({}) / {} + held_vq", expr(base), w);
  }
  // A loop over a thread's vectors of a held row (vector `held_vq` of the row in iteration h),
  // `text` for each one that exists. unroll: 0 for a full unroll.
  void held_walk(int ind, bool lanes, int unroll, int64_t vectors, const std::string& text) {
    std::string_view I = d_.index_type;
    line(ind, unroll > 0 ? fmt::format("#pragma unroll {}", unroll) : "#pragma unroll");
    line(ind, fmt::format("for (int h = 0; h < {}; ++h) {{", held_vectors_));
    line(ind + 1, fmt::format("const {0} held_vq = ({0})({1}) + h * {2};", I, lanes ? "threadIdx.x % 32" : thread_in_row(), held_threads_));
    if (vectors % held_threads_ != 0 || vectors / held_threads_ != held_vectors_) line(ind + 1, fmt::format("if (held_vq < {}) ", int_literal(vectors, d_)) + text);
    else line(ind + 1, text);
    line(ind, "}");
  }

  // The rows a loop carried (Stmt::held_written), stored back at the end of its iteration.
  void emit_write_back(const StmtPtr& loop, int ind) {
    for (auto& b : loop->held_written) {
      auto [base, vectors] = carried_.at(b);
      int w = held_.at(b);
      std::string vt = fmt::format("kiln_vec<{}, {}>", c_storage_type(k_.find_buffer(b)->dtype), w);
      line(ind, fmt::format("// {} stored back from registers", b));
      held_walk(ind, false, 0, vectors, fmt::format("(({}*){})[{}] = {}_held[h];", vt, b, vector_at(base, w), b));
    }
  }

  std::set<std::string> carried_names() const {
    std::set<std::string> out;
    for (auto& [b, at] : carried_) out.insert(b);
    return out;
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
    // Across a cluster's blocks (a row shared by a cluster): the block's combine, then the
    // cluster's through distributed shared memory (the prelude's kiln_cluster_*).
    const bool cluster = block && cluster_ > 1;
    const std::string across = cluster ? "kiln_cluster" : "kiln_block", blocks = cluster ? fmt::format(", {}", cluster_) : "";
    if (s->combine == CombineOp::Argmax) {
      if (block) line(ind, fmt::format("{2}_pair({0}, {0}_idx, {1}, kiln_smem_idx, kiln_argmax_merge_op(){3});", a, scratch_of(s->dtype), across, blocks));
      else line(ind, fmt::format("kiln_warp_pair({0}, {0}_idx, kiln_argmax_merge_op());", a));
      return;
    }
    if (s->combine == CombineOp::Welford) {
      std::string sc = scratch_of(s->dtype);
      if (block) line(ind, fmt::format("{2}_triple({0}, {0}_mean, {0}_n, {1}, {1}_mean, {1}_n, kiln_welford_merge_op(){3});", a, sc, across, blocks));
      else line(ind, fmt::format("kiln_warp_triple({0}, {0}_mean, {0}_n, kiln_welford_merge_op());", a));
      return;
    }
    if (s->combine == CombineOp::SumExp) {
      if (block) line(ind, fmt::format("{2}_pair({0}, {0}_max, {1}, {1}_max, kiln_sumexp_merge_op(){3});", a, scratch_of(s->dtype), across, blocks));
      else line(ind, fmt::format("kiln_warp_pair({0}, {0}_max, kiln_sumexp_merge_op());", a));
      return;
    }
    std::string_view op = s->combine == CombineOp::Sum ? "kiln_sum_op()" : s->combine == CombineOp::Prod ? "kiln_prod_op()"
                          : s->combine == CombineOp::Max ? "kiln_max_op()" : "kiln_min_op()";
    if (block) line(ind, fmt::format("{0} = {3}_combine({0}, {1}, {2}{4});", a, op, scratch_of(s->dtype), across, blocks));
    else line(ind, fmt::format("{0} = kiln_warp_combine({0}, {1});", a, op));
  }

  void barrier(const StmtPtr&, int ind) override { line(ind, "__syncthreads();"); }

 private:
  // A flat loop in tiles of its [rows, cols] view (Stmt::tiles, codegen/tiling.h), the blocks
  // striding over the tiles: each transposed load read down the tile's columns (a warp's 32
  // lanes on 32 consecutive rows, contiguous in that buffer) into registers, then shared
  // memory; the body run along the tile's rows (a warp's lanes on 32 consecutive columns, the
  // output's contiguous dim) with those loads read from shared memory. The next tile's loads
  // are issued before this tile's body runs, so that they are in flight while it computes
  // (every block starts its first tile at once: without this its loads and its arithmetic
  // would not overlap).
  void tiled(const StmtPtr& s, int ind) {
    const TilePlan& t = s->tiles;
    const std::string& v = s->name;
    std::string_view I = d_.index_type;
    const int64_t T = t.tile, row_tiles = (t.rows + T - 1) / T, col_tiles = (t.cols + T - 1) / T, threads = k_.launch.block;
    KILN_INTERNAL_ASSERT(threads > 0 && (T * T) % threads == 0, "a tile's elements split evenly over the block's threads");
    const int64_t per_thread = T * T / threads;
    const bool whole = t.rows % T == 0 && t.cols % T == 0;
    auto lit = [&](int64_t x) { return int_literal(x, d_); };
    if (!s->comment.empty()) line(ind, "// " + s->comment);
    line(ind, fmt::format("// as [{}, {}] in tiles of {} x {}: the transposed loads through registers and shared memory, the next tile's "
                          "in flight while this one computes", t.rows, t.cols, T, T));
    std::string tv = v + "_tile", tid = v + "_t", k = v + "_k", r0 = v + "_r0", c0 = v + "_c0", r = v + "_r", c = v + "_c";
    for (size_t n = 0; n < t.loads.size(); ++n) {
      line(ind, fmt::format("__shared__ {} {}[{}];  // {}", c_storage_type(t.loads[n]->dtype), tile_array_name(t, n), tile_array_elements(t),
                            print_expr(t.loads[n])));
      line(ind, fmt::format("{} {}_next[{}];", c_storage_type(t.loads[n]->dtype), tile_array_name(t, n), per_thread));
    }
    line(ind, fmt::format("const {} {} = threadIdx.x;", I, tid));
    // Element e = thread + k * threads of a tile (k the unrolled loop's variable): every index
    // below is an expression of the thread and k, simplified, so that what depends on the
    // thread alone is computed once and each unrolled k adds a constant (e % T is the thread's
    // own column where the block is a multiple of T).
    const ExprPtr ev = add(var(tid, 0, threads - 1), mul(var(k, 0, per_thread - 1), imm(threads)));
    const ExprPtr e_mod = mod(ev, imm(T)), e_div = floordiv(ev, imm(T));
    const ExprPtr r0v = var(r0, 0, std::max<int64_t>(t.rows - 1, 0)), c0v = var(c0, 0, std::max<int64_t>(t.cols - 1, 0));
    auto ix = [&](const ExprPtr& x) { return expr(simplify(x)); };
    // The loop variable as (row, column) of the view, each var knowing its range: indices
    // written in it simplify to the buffers' own strides ((i % C) * R + i / C is c * R + r),
    // where NVRTC, given i = r * C + c, divides and takes remainders per element.
    auto at_row_col = [&](const std::string& row, const std::string& col) {
      return add(mul(var(row, 0, t.rows - 1), imm(t.cols)), var(col, 0, t.cols - 1));
    };
    auto in_view = [&](const ExprPtr& e_, const std::string& row, const std::string& col) {
      ExprPtr rc = at_row_col(row, col);
      return simplify(rewrite(e_, [&](const ExprPtr& x) { return x->kind == ExprKind::Var && x->name == v ? rc : x; }));
    };
    // The origin of tile `tile`, and the head of a loop over this thread's `per_thread` elements
    // of a tile (unrolled: all its loads in flight at once).
    auto origin = [&](const std::string& tile, int at) {
      line(at, fmt::format("const {0} {1} = {2} / {3} * {4}, {5} = {2} % {3} * {4};", I, r0, tile, lit(col_tiles), lit(T), c0));
    };
    auto elements = [&](int at) {
      line(at, "#pragma unroll");
      line(at, fmt::format("for (int {0} = 0; {0} < {1}; ++{0}) {{", k, per_thread));
    };
    // This thread's elements of tile `tile` (when there is one), read into the registers:
    // element e of a tile is row e % T, column e / T (a tile's edge repeats the last row or column).
    auto read_tile = [&](const std::string& tile, int at) {
      line(at, fmt::format("if ({} < {}) {{", tile, lit(row_tiles * col_tiles)));
      origin(tile, at + 1);
      elements(at + 1);
      const std::string lr = v + "_lr", lc = v + "_lc";
      const std::string lr_at = ix(add(r0v, e_mod)), lc_at = ix(add(c0v, e_div));
      if (whole)
        line(at + 2, fmt::format("const {0} {1} = {2}, {3} = {4};", I, lr, lr_at, lc, lc_at));
      else
        line(at + 2, fmt::format("const {0} {1} = min({2}, ({0}){3}), {4} = min({5}, ({0}){6});", I, lr, lr_at, t.rows - 1, lc, lc_at, t.cols - 1));
      for (size_t n = 0; n < t.loads.size(); ++n)
        line(at + 2, fmt::format("{}_next[{}] = {}[{}];", tile_array_name(t, n), k, t.loads[n]->name, expr(in_view(t.loads[n]->args[0], lr, lc))));
      line(at + 1, "}");
      line(at, "}");
    };
    line(ind, "{");
    line(ind + 1, fmt::format("const {} {} = blockIdx.x;", I, tv));
    read_tile(tv, ind + 1);
    line(ind, "}");
    line(ind, fmt::format("for ({0} {1} = blockIdx.x; {1} < {2}; {1} += gridDim.x) {{", I, tv, lit(row_tiles * col_tiles)));
    elements(ind + 1);
    const std::string stage_at = ix(add(mul(e_div, imm(T + 1)), e_mod));
    for (size_t n = 0; n < t.loads.size(); ++n) line(ind + 2, fmt::format("{}[{}] = {}_next[{}];", tile_array_name(t, n), stage_at, tile_array_name(t, n), k));
    line(ind + 1, "}");
    line(ind + 1, "__syncthreads();");
    line(ind + 1, "{");
    line(ind + 2, fmt::format("const {0} {1} = {2} + gridDim.x;", I, tv + "_next", tv));
    read_tile(tv + "_next", ind + 2);
    line(ind + 1, "}");
    origin(tv, ind + 1);
    line(ind + 1, fmt::format("// along the rows: the block's threads on consecutive columns, from column {}", c0));
    elements(ind + 1);
    line(ind + 2, fmt::format("const {0} {1} = {2}, {3} = {4};", I, r, ix(add(r0v, e_div)), c, ix(add(c0v, e_mod))));
    int b = ind + 2;
    if (!whole) line(b++, fmt::format("if ({} < {} && {} < {}) {{", r, lit(t.rows), c, lit(t.cols)));
    // The staged loads: the element (r, c) of the tile sits at column c % T, row r % T.
    ExprPtr at = simplify(add(mul(e_mod, imm(T + 1)), e_div));
    std::map<std::string, std::string> staged;
    for (size_t n = 0; n < t.loads.size(); ++n) staged[t.loads[n]->name + "@" + print_expr(t.loads[n]->args[0])] = tile_array_name(t, n);
    StmtPtr body = rewrite_exprs(block(s->body), [&](const ExprPtr& x) {
      if (x->kind != ExprKind::Load) return x;
      auto it = staged.find(x->name + "@" + print_expr(x->args[0]));
      return it == staged.end() ? x : load(it->second, x->dtype, at);
    });
    const ExprPtr rc = at_row_col(r, c);
    body = simplify(rewrite_exprs(body, [&](const ExprPtr& x) { return x->kind == ExprKind::Var && x->name == v ? rc : x; }));
    runs_.push_back(Runs::Thread);
    stmt(body, b);
    runs_.pop_back();
    if (!whole) line(ind + 2, "}");
    line(ind + 1, "}");
    line(ind + 1, "__syncthreads();  // before the next tile overwrites shared memory");
    line(ind, "}");
  }

  // The grid-stride loop on 16-byte vectors (Stmt::vector), then the scalar tail.
  void vectorized(const StmtPtr& s, int width, int ind) {
    const std::string& v = s->name;
    std::string_view I = d_.index_type;
    std::set<std::string> stored;
    visit(s, [&](const Stmt& st) {
      if (st.kind == StmtKind::Store) stored.insert(st.name);
    });
    const std::vector<VectorLoad> vloads = grid_stride_vector_loads(k_, s, width);
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
      // The loads of the iteration at vector `at`, into `<name>_v<suffix>`.
      auto loads = [&](int at_ind, const std::string& at, const std::string& suffix) {
        const ExprPtr at_var = var(paren(at), 0, std::max<int64_t>(vectors - 1, 0));
        for (const VectorLoad& vl : vloads) {
          const ExprPtr& x = vl.index;
          const bool direct = x->kind == ExprKind::Var && x->name == v;
          const bool row = x->kind == ExprKind::Mod && x->args[0]->kind == ExprKind::Var && x->args[0]->name == v &&
                           x->args[1]->kind == ExprKind::IntImm;
          std::string i = direct ? at
                          : row  ? fmt::format("{} % {}", paren(at), int_literal(x->args[1]->i / width, d_))
                                 : expr(simplify(vector_index(x, v, at_var, width)));
          // Under selects: read where they hold (the same over the vector's elements), else zeros.
          std::string when;
          auto at_vector = [&](const ExprPtr& e) {
            return rewrite(e, [&](const ExprPtr& y) { return y->kind == ExprKind::Var && y->name == v ? mul(at_var, imm(width)) : y; });
          };
          for (const LoadGuard& g : vl.guards)
            when += fmt::format("{}{}{}", when.empty() ? "" : " && ", g.when_true ? "" : "!", paren(expr(simplify(at_vector(g.condition)))));
          std::string read = fmt::format("((const {0}*){1})[{2}]", vec_type(vl.buffer), vl.buffer, i);
          if (!when.empty()) read = fmt::format("{} ? {} : {}{{}}", when, read, vec_type(vl.buffer));
          line(at_ind, fmt::format("const {0} {1}_v{3} = {2};", vec_type(vl.buffer), vl.name, read, suffix));
        }
      };
      // The iteration at vector q: its elements from its loads (`<buffer>_v`), and its stores.
      auto compute_and_store = [&](int at_ind) {
        for (const std::string& b : stored) line(at_ind, fmt::format("{} {}_v;", vec_type(b), b));
        for (int j = 0; j < width; ++j) {
          StmtPtr el = vector_element(block(s->body), vloads, j);
          line(at_ind, "{");
          if (uses_var(el, v)) line(at_ind + 1, fmt::format("const {} {} = {} * {} + {};", I, v, q, width, j));
          stmt(el, at_ind + 1);
          line(at_ind, "}");
        }
        for (const std::string& b : stored) line(at_ind, fmt::format("(({}*){})[{}] = {}_v;", vec_type(b), b, q, b));
      };
      const int unroll = s->unroll > 1 ? s->unroll : 1;
      if (unroll == 1) {
        line(ind, grid_stride_header(q, "", vectors));
      } else {
        // `unroll` iterations a grid stride apart (each still coalesced across the warp): all
        // their loads, then each one's elements; what is left, one at a time.
        const std::string base = q + "_base", n = int_literal(vectors, d_);
        line(ind, fmt::format("// {} iterations at once, their loads first (Stmt::unroll); the rest one at a time", unroll));
        line(ind, fmt::format("const {0} kiln_stride = ({0})(gridDim.x * blockDim.x);", I));
        line(ind, fmt::format("{0} {1} = ({0})(blockIdx.x * blockDim.x + threadIdx.x);", I, base));
        line(ind, fmt::format("for (; {0} + {1} * kiln_stride < {2}; {0} += {3} * kiln_stride) {{", base, unroll - 1, n, unroll));
        for (int u = 0; u < unroll; ++u) loads(ind + 1, u == 0 ? base : fmt::format("{} + {} * kiln_stride", base, u), std::to_string(u));
        for (int u = 0; u < unroll; ++u) {
          line(ind + 1, "{");
          line(ind + 2, fmt::format("const {} {} = {} + {} * kiln_stride;", I, q, base, u));
          for (const VectorLoad& vl : vloads) line(ind + 2, fmt::format("const {0}& {1}_v = {1}_v{2};", vec_type(vl.buffer), vl.name, u));
          compute_and_store(ind + 2);
          line(ind + 1, "}");
        }
        line(ind, "}");
        line(ind, fmt::format("for ({0} {1} = {2}; {1} < {3}; {1} += kiln_stride) {{", I, q, base, n));
      }
      loads(ind + 1, q, "");
      compute_and_store(ind + 1);
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

  int widest_bytes(const std::map<std::string, ExprPtr>& bases) const {
    int widest = 0;
    for (auto& [b, base] : bases) widest = std::max(widest, element_bytes(k_.find_buffer(b)->dtype));
    return widest;
  }

  // A thread's position among the threads sharing a row, and their count: the block's, or in a
  // cluster per row all its blocks' (kiln_crank, the block's rank in the cluster).
  std::string thread_in_row() const { return cluster_ > 1 ? "(kiln_crank * blockDim.x + threadIdx.x)" : "threadIdx.x"; }
  std::string row_stride() const { return cluster_ > 1 ? fmt::format("blockDim.x * {}", cluster_) : "blockDim.x"; }

  // Where a thread's vector `h` of a held row is: register h, or the thread's slot h of shared
  // memory (slots interleaved across threads: a warp's accesses fall on consecutive words).
  std::string held_slot(const std::string& h) const {
    return held_shared_ ? fmt::format("{} * {} + threadIdx.x", h, held_threads_) : h;
  }

  const Kernel& k_;
  std::vector<Runs> runs_{Runs::Launch};
  std::map<std::string, int> held_;  // the rows the current row loop holds: buffer -> vector width
  std::map<std::string, std::pair<ExprPtr, int64_t>> carried_;  // rows carried (held_written): buffer -> base, row length in vectors
  int64_t held_vectors_ = 0, held_threads_ = 0;
  bool held_lanes_ = false;
  bool held_shared_ = false;
  int cluster_ = 1;  // blocks sharing the current row (Stmt::cluster)
};

}  // namespace

int64_t cuda_shared_bytes(const Kernel& k) {
  int64_t bytes = 0;
  for (auto& [name, type] : scratch_arrays(k)) bytes += kScratchSlots * (type == "float" ? 4 : 8);
  visit(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && s.map == LoopMap::GpuTiles) bytes += tile_shared_bytes(s.tiles);
  });
  return bytes;
}

namespace {

// The opening of a kernel whose body is a call of a prelude routine (attention, sort): its
// comment, its signature (every buffer __restrict__: none aliases another) and what each buffer
// holds. Returns the buffers' names, each followed by ", ".
std::string open_routine_kernel(std::string& out, const Kernel& k) {
  std::string params, args;
  for (const Buffer& b : k.buffers) {
    bool in = b.role == BufferRole::Input;
    params += fmt::format("{}{}{}* __restrict__ {}", params.empty() ? "" : ", ", in ? "const " : "", c_storage_type(b.dtype), b.name);
    args += fmt::format("{}, ", b.name);
  }
  if (!k.comment.empty()) out += "// " + k.comment + "\n";
  out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", k.launch.block, k.name, params);
  for (const Buffer& b : k.buffers) out += fmt::format("  // {}: {} {}\n", b.name, buffer_role_name(b.role), b.what);
  return args;
}

// An attention kernel: a call of the prelude's routine with the schedule's tiles; blocks past
// the grid's tiles (an empty call still launches one) return at once.
std::string emit_attention_kernel(const Kernel& k) {
  const AttentionKernel& a = *k.attention;
  std::string out;
  const std::string args = open_routine_kernel(out, k);
  const char* routine = a.pass == AttentionKernel::Pass::Forward      ? "kiln_attn_fwd"
                        : a.pass == AttentionKernel::Pass::BackwardKV ? "kiln_attn_bwd_kv"
                                                                      : "kiln_attn_bwd_q";
  const int64_t tiles = a.batch * (a.pass == AttentionKernel::Pass::BackwardKV ? (a.S + a.block_n - 1) / a.block_n
                                                                               : (a.L + a.block_m - 1) / a.block_m);
  out += fmt::format("  if (blockIdx.x >= {}) return;\n", tiles);
  const std::string sizes = fmt::format("{}, {}, {}, {}, {}", a.L, a.S, a.E, a.Ev, float_literal(a.scale, DType::F64, cuda_dialect(64)));
  if (a.tensor_cores && a.pass == AttentionKernel::Pass::Forward)
    out += fmt::format("  {}_mma<{}, {}, {}, {}, {}, {}>({}{});\n", routine, attention_dtype_code(a.dtype), a.head, a.block_n, a.block_m / 64,
                       a.q_in_registers ? "true" : "false", a.causal ? "true" : "false", args, sizes);
  else if (a.tensor_cores)
    out += fmt::format("  {}_mma<{}, {}, {}, {}>({}{});\n", routine, attention_dtype_code(a.dtype), a.head,
                       a.pass == AttentionKernel::Pass::BackwardKV ? a.block_m : a.block_n, a.causal ? "true" : "false", args, sizes);
  else
    out += fmt::format("  {}<{}, {}, {}, {}, {}>({}{});\n", routine, attention_dtype_code(a.dtype), a.block_m, a.block_n, a.head,
                       a.causal ? "true" : "false", args, sizes);
  out += "}\n";
  return out;
}

// A sort kernel: a call of the prelude's routine (codegen/sort.h), a block per row.
std::string emit_sort_kernel(const Kernel& k) {
  const SortKernel& s = *k.sort;
  std::string out;
  open_routine_kernel(out, k);
  out += fmt::format("  kiln_sort_rows<{}>(b0, b1, b2, {}, {}, {}LL, {}LL, {}LL, {}LL, {}, {});\n", sort_dtype_code(s.dtype),
                     s.scratch ? "b3" : "0", s.scratch ? "b4" : "0", s.outer, s.n, s.inner, s.k, s.descending ? "true" : "false",
                     s.in_shared ? "true" : "false");
  out += "}\n";
  return out;
}

// A sorted scatter kernel: a call of the prelude's routine (codegen/sorted_scatter.h).
std::string emit_sorted_scatter_kernel(const Kernel& k) {
  const SortedScatterKernel& s = *k.sorted_scatter;
  std::string out;
  open_routine_kernel(out, k);
  out += fmt::format("  kiln_sorted_scatter_add<{}, {}>(b0, b1, b2, b3, {}LL, {}LL, {}LL, {}LL);\n", sort_dtype_code(s.src),
                     sort_dtype_code(s.acc), s.outer, s.n, s.rows, s.inner);
  out += "}\n";
  return out;
}

}  // namespace

namespace {

StmtPtr with_names(const StmtPtr& s, const std::map<std::string, std::string>& names) {
  auto c = std::make_shared<Stmt>(*s);
  if (auto it = names.find(c->name); it != names.end()) c->name = it->second;
  c->comment.clear();
  for (ExprPtr& e : c->exprs)
    e = rewrite(e, [&](const ExprPtr& x) {
      auto it = x->kind == ExprKind::Var ? names.find(x->name) : names.end();
      if (it == names.end()) return x;
      auto r = std::make_shared<Expr>(*x);
      r->name = it->second;
      return ExprPtr(r);
    });
  for (StmtPtr& b : c->body) b = with_names(b, names);
  return c;
}

std::string without_comments(const std::string& code) {
  std::string out;
  for (size_t i = 0; i < code.size();) {
    if (code.compare(i, 2, "//") == 0) {
      i = code.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    out += code[i++];
  }
  return out;
}

}  // namespace

std::string cuda_kernel_identity(const Kernel& k) {
  std::map<std::string, std::string> names;
  visit(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For || s.kind == StmtKind::Let || s.kind == StmtKind::DeclAcc)
      names.emplace(s.name, fmt::format("kiln_v{}", names.size()));
  });
  Kernel c = k;
  c.name = "kiln_kernel";
  c.comment.clear();
  for (Buffer& b : c.buffers) b.what.clear();
  for (Buffer& b : c.constants) b.what.clear();
  c.body = with_names(k.body, names);
  return without_comments(emit_cuda_kernel(c));
}

std::string emit_cuda_kernel(const Kernel& k) {
  if (k.attention) return emit_attention_kernel(k);
  if (k.sort) return emit_sort_kernel(k);
  if (k.sorted_scatter) return emit_sorted_scatter_kernel(k);
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
  // A kernel of thread-block clusters says its cluster size (compiled in: a plain launch then
  // forms the clusters, its grid a multiple of it).
  std::string cluster = k.launch.cluster > 1 ? fmt::format(" __cluster_dims__({}, 1, 1)", k.launch.cluster) : "";
  std::string bounds = fmt::format("{}", std::max<int64_t>(k.launch.block, 1));
  if (k.launch.min_blocks_per_sm > 0) bounds += fmt::format(", {}", k.launch.min_blocks_per_sm);
  em.line(0, fmt::format("extern \"C\" __global__ void{} __launch_bounds__({}) {}({}) {{", cluster, bounds, k.name, params));
  for (const Buffer& b : k.buffers) em.line(1, fmt::format("// {}: {} {}", b.name, buffer_role_name(b.role), b.what));
  for (const Buffer& c : k.constants) {
    std::string values = c.data.empty() ? "0" : constant_table(c, d);
    // A table holding NaN or an infinity is not static: those are __int_as_float(bits), which
    // CUDA 13's NVRTC refuses to initialize a function-scope static with ("dynamic
    // initialization is not supported"; 11.8 folded it). Such tables are rare and small.
    bool special = values.find("KILN_NAN") != std::string::npos || values.find("KILN_INF") != std::string::npos;
    em.line(1, fmt::format("{}const {} {}[{}] = {{{}}};  // {}", special ? "" : "static ", c_storage_type(c.dtype), c.name,
                           std::max<size_t>(c.data.size(), 1), values, c.what));
  }
  for (auto& [name, type] : scratch_arrays(k)) em.line(1, fmt::format("__shared__ {} {}[{}];", type, name, kScratchSlots));
  if (k.launch.dynamic_shared_bytes > 0) em.line(1, "extern __shared__ __align__(16) unsigned char kiln_dynamic_smem[];");
  if (k.launch.cluster > 1) em.line(1, "const unsigned kiln_crank = kiln_cluster_rank();  // this block's rank in its cluster");
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
