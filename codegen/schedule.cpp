// The schedule step (see schedule.h): the CPU and CUDA mappings of loops.
#include "codegen/schedule.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "codegen/cuda_emitter.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Element-iterations inside one iteration of a loop's body (for the CPU's parallel grain).
int64_t work_of(const StmtPtr& s) {
  int64_t w = 0;
  for (auto& b : s->body) w += b->kind == StmtKind::For ? b->extent * std::max<int64_t>(work_of(b), 1) : work_of(b);
  return std::max<int64_t>(w, 1);
}

bool has_loops(const StmtPtr& s) {
  bool any = false;
  for (auto& b : s->body) visit(b, [&](const Stmt& x) { any = any || x.kind == StmtKind::For; });
  return any;
}

// Rebuilds `s` with fn applied to every loop below it (pre-order; fn returns the loop's new
// map, and may append statements to put right after the loop).
using MapFn = std::function<LoopMap(const Stmt& loop, std::vector<StmtPtr>& after)>;
StmtPtr map_loops(const StmtPtr& s, const MapFn& fn) {
  auto c = std::make_shared<Stmt>(*s);
  std::vector<StmtPtr> body;
  for (auto& b : s->body) {
    if (b->kind != StmtKind::For && b->kind != StmtKind::Block) {
      body.push_back(b);
      continue;
    }
    std::vector<StmtPtr> after;
    StmtPtr nb = map_loops(b, fn);
    if (b->kind == StmtKind::For) {
      auto m = std::make_shared<Stmt>(*nb);
      m->map = fn(*b, after);
      nb = m;
    }
    body.push_back(nb);
    for (auto& a : after) body.push_back(a);
  }
  c->body = std::move(body);
  return c;
}

// ---------------------------------------------------------------- CPU

void schedule_cpu(Kernel& k, const Target& t) {
  auto top = std::make_shared<Stmt>(*k.body);
  std::vector<StmtPtr> body;
  for (auto& s : k.body->kind == StmtKind::Block ? k.body->body : std::vector<StmtPtr>{k.body}) {
    if (s->kind != StmtKind::For) {
      body.push_back(s);
      continue;
    }
    StmtPtr inner = map_loops(s, [](const Stmt& l, std::vector<StmtPtr>&) {
      return l.loop == LoopKind::Parallel ? LoopMap::CpuVector : LoopMap::Serial;
    });
    int64_t work = work_of(s);
    LoopMap m = LoopMap::Serial;
    int64_t grain = 1;
    if (s->loop == LoopKind::Parallel) {
      if (has_loops(s)) {
        m = LoopMap::CpuThreads;
        grain = std::max<int64_t>(1, t.parallel_work / work);
      } else if (s->extent * work > t.parallel_work) {
        // A flat loop: contiguous chunks on the pool, each one loop clang vectorizes.
        m = LoopMap::CpuThreads;
        grain = std::max<int64_t>(t.flat_chunk_min, t.parallel_work / work);
      } else {
        m = LoopMap::CpuVector;
      }
    }
    body.push_back(with_map(inner, m, grain));
  }
  top->body = std::move(body);
  if (k.body->kind != StmtKind::Block) top = std::const_pointer_cast<Stmt>(block(top->body));
  k.body = top;
  k.index_bits = 64;
}

// ---------------------------------------------------------------- CUDA

// Accumulators a reduction loop accumulates into (in first-use order, each once).
std::vector<std::pair<std::string, const Stmt*>> accumulated_in(const Stmt& loop) {
  std::vector<std::pair<std::string, const Stmt*>> out;
  std::set<std::string> seen;
  for (auto& b : loop.body)
    visit(b, [&](const Stmt& s) {
      if (s.kind == StmtKind::Accumulate && seen.insert(s.name).second) out.emplace_back(s.name, &s);
    });
  return out;
}

// The type of each accumulator, from its declaration.
std::map<std::string, DType> acc_types(const StmtPtr& body) {
  std::map<std::string, DType> out;
  visit(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::DeclAcc) out[s.name] = s.dtype;
  });
  return out;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The longest leaf loop (a loop with no loop inside) below `s`, and whether any leaf is a
// reduction / a parallel loop.
struct Leaves {
  int64_t longest = 0;
  bool reduction = false, parallel = false;
};
Leaves leaves_of(const StmtPtr& s) {
  Leaves l;
  for (auto& b : s->body)
    visit(b, [&](const Stmt& x) {
      if (x.kind != StmtKind::For) return;
      bool leaf = true;
      for (auto& c : x.body) visit(c, [&](const Stmt& y) { leaf = leaf && y.kind != StmtKind::For; });
      if (!leaf) return;
      l.longest = std::max(l.longest, x.extent);
      l.reduction = l.reduction || x.loop == LoopKind::Reduction;
      l.parallel = l.parallel || x.loop == LoopKind::Parallel;
    });
  return l;
}

bool is_leaf(const Stmt& x) {
  bool leaf = true;
  for (auto& c : x.body) visit(c, [&](const Stmt& y) { leaf = leaf && y.kind != StmtKind::For; });
  return leaf;
}

void schedule_cuda(Kernel& k, const Target& t) {
  std::vector<StmtPtr> top = k.body->kind == StmtKind::Block ? k.body->body : std::vector<StmtPtr>{k.body};
  auto types = acc_types(k.body);
  std::vector<StmtPtr> out;
  int grid_loops = 0;
  LaunchConfig launch{1, 1, 0};
  auto grid_of = [&](int64_t items_per_block, int64_t extent) {
    int64_t want = std::max<int64_t>(1, (extent + items_per_block - 1) / items_per_block);
    return std::min<int64_t>(want, int64_t(t.num_sms) * t.blocks_per_sm);
  };
  for (auto& s : top) {
    if (s->kind != StmtKind::For || s->loop != LoopKind::Parallel || grid_loops > 0) {
      // Lets and stores outside loops, an ordered loop, or a second top-level loop: the
      // emitter runs them on thread 0 of block 0 (a second grid loop would need a grid-wide
      // barrier; the lowering never emits one).
      out.push_back(map_loops(s, [](const Stmt&, std::vector<StmtPtr>&) { return LoopMap::Serial; }));
      if (s->kind == StmtKind::For) {
        auto m = std::make_shared<Stmt>(*out.back());
        m->map = LoopMap::Serial;
        out.back() = m;
      }
      continue;
    }
    ++grid_loops;
    Leaves lv = leaves_of(s);
    bool nested = has_loops(s);
    auto serial_inside = [&](const StmtPtr& loop, LoopMap m) {
      StmtPtr inner = map_loops(loop, [](const Stmt&, std::vector<StmtPtr>&) { return LoopMap::Serial; });
      return with_map(inner, m);
    };
    if (!nested) {
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(s->extent, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(with_map(s, LoopMap::GpuGridStride));
      continue;
    }
    if (!lv.reduction && !lv.parallel) {
      // Only ordered work inside (a scatter along its dim): a thread per outer iteration.
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(s->extent, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(serial_inside(s, LoopMap::GpuGridStride));
      continue;
    }
    if (lv.longest <= t.thread_row_max) {
      // Short rows: one thread walks a whole row.
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(s->extent, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(serial_inside(s, LoopMap::GpuGridStride));
      continue;
    }
    bool warp = lv.reduction && lv.longest <= t.warp_row_max;
    LoopMap outer = warp ? LoopMap::GpuWarps : LoopMap::GpuBlocks;
    LoopMap inner = warp ? LoopMap::GpuLanes : LoopMap::GpuThreads;
    StmtPtr mapped = map_loops(s, [&](const Stmt& l, std::vector<StmtPtr>& after) {
      if (!is_leaf(l) || l.loop == LoopKind::Ordered) return LoopMap::Serial;
      if (l.loop == LoopKind::Reduction)
        for (auto& [acc, st] : accumulated_in(l)) {
          DType dt = types.count(acc) ? types[acc] : st->dtype;
          after.push_back(combine_across(acc, dt, st->combine, inner));
        }
      return inner;
    });
    out.push_back(with_map(mapped, outer));
    if (warp) {
      launch.block = int64_t(t.warp_rows_per_block) * t.warp_size;
      launch.grid = grid_of(t.warp_rows_per_block, s->extent);
    } else {
      int64_t cap = lv.reduction ? t.reduction_block : t.max_threads_per_block;
      launch.block = std::min<int64_t>(cap, std::max<int64_t>(32, round_up(lv.longest, 32)));
      launch.grid = grid_of(1, s->extent);
    }
  }
  k.body = block(std::move(out));
  k.launch = launch;
  k.launch.shared_bytes = cuda_shared_bytes(k);  // the scratch the emitter declares for block combines
  // 32-bit indices when every buffer and loop (and a grid-stride step past the end) fits.
  int64_t biggest = 0;
  for (const Buffer& b : k.buffers) biggest = std::max(biggest, b.numel);
  for (const Buffer& b : k.constants) biggest = std::max(biggest, b.numel);
  visit(k.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For) biggest = std::max(biggest, s.extent);
  });
  int64_t threads = launch.grid * launch.block;
  k.index_bits = biggest + threads < int64_t(INT32_MAX) ? 32 : 64;
}

}  // namespace

void schedule(Kernel& k, const Target& target) {
  if (target.is_gpu()) schedule_cuda(k, target);
  else schedule_cpu(k, target);
  verify(k);
}

void schedule(LoweredGraph& lg, const Target& target) {
  for (Kernel& k : lg.kernels) schedule(k, target);
}

}  // namespace kiln::codegen
