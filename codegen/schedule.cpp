// The schedule step (see schedule.h): the CPU and CUDA mappings of loops.
#include "codegen/schedule.h"

#include "codegen/attention.h"
#include "codegen/sort.h"
#include "codegen/sorted_scatter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "codegen/cuda_emitter.h"
#include "codegen/invariant_division.h"
#include "codegen/tiling.h"
#include "codegen/vectorize.h"
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
    if (m == LoopMap::CpuThreads && s->extent > grain && k.schedule.mapping.empty())
      k.schedule = {"thread pool", 0, 0, 0, {}, 0,
                    fmt::format("{} iterations of {} element-iterations each, in chunks of at least {} (Target::parallel_work {}); "
                                "inner loops left to clang's vectorizer",
                                s->extent, work, grain, t.parallel_work), {}};
  }
  if (k.schedule.mapping.empty())
    k.schedule = {"calling thread", 0, 0, 0, {}, 0, fmt::format("less work than one chunk of Target::parallel_work ({} element-iterations)", t.parallel_work), {}};
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

// Rebuilds `s` with fn applied to every loop at or below it (fn edits a copy of the loop).
StmtPtr edit_loops(const StmtPtr& s, const std::function<void(Stmt&)>& fn) {
  if (s->kind != StmtKind::For && s->kind != StmtKind::Block) return s;
  auto c = std::make_shared<Stmt>(*s);
  for (auto& b : c->body) b = edit_loops(b, fn);
  if (c->kind == StmtKind::For) fn(*c);
  return c;
}

bool is_share(const Stmt& s) { return s.kind == StmtKind::For && (s.map == LoopMap::GpuLanes || s.map == LoopMap::GpuThreads); }

// Rows held in registers. In a row loop whose share loops read the same input row more than
// once (softmax: the max pass, the sum pass, the output pass; layer_norm: statistics, then
// normalize; cross-entropy: the log-sum-exp, then the gradient), every read after the first
// would come from L2 or DRAM again: a warp's 4 KB row does not stay in L1 between passes
// when 64 warps per SM stream theirs. Held, the row is read once, into registers, at the top
// of each row's iteration (all its loads in flight at once), and every pass reads the
// registers. It pays when the registers fit: at most Target::held_bytes_per_thread bytes per
// thread for all held rows together (128: 32 f32 registers), with a block of up to 1024 threads for a
// long row. A row longer than that (a 50257-word vocabulary) is held in the registers of a
// thread-block cluster on sm_90 (choose_vectors), else in the block's shared memory, up to
// `shared_limit` bytes: each thread's vectors in slots of its own, which it alone writes and
// reads back, so no barrier orders them.
// A block walking a chunk of rows (column partials) is alone on its SM whatever its registers,
// and with fewer threads each row's block combines wait on fewer warps: it holds up to twice
// as much a thread before it grows (Target::chunk_held_bytes_per_thread 256; layer-norm
// backward [16384,4096] on the H200: 512 threads holding 8 elements of x, dy, w and two
// partials 0.255 ms, 1024 threads holding 4: 0.287 ms).
// The portable limit of a thread-block cluster, and the threads an SM runs at once (sm_80, sm_90).
constexpr int kMostClusterBlocks = 8;
constexpr int64_t kThreadsPerSm = 2048;
// The smallest block a flat loop shrinks to so that its blocks reach every SM.
constexpr int64_t kSmallestFlatBlock = 128;
// The smallest block a row's block shrinks to so that each thread holds more of the row.
constexpr int64_t kSmallestRowBlock = 128;

struct Held {
  std::vector<std::string> buffers;
  // Output rows read and written by the share loops (a chunk's column partials): in registers
  // from their first store, stored back at the end of their holder's iteration.
  std::vector<std::string> written;
  // The loop that holds each buffer: the row loop, or a serial loop inside it (a chunk's row)
  // when the buffer's row moves with that loop's variable.
  std::map<std::string, std::string> holder;
  int width = 0;           // the vector width every loop reading them runs at
  int64_t extent = 0;      // the row length those loops share
  int64_t vectors = 0;     // vectors per thread
  int64_t threads = 0;     // threads per row
  bool shared = false;     // in shared memory, not registers
  int64_t shared_bytes = 0;
  int cluster = 0;         // blocks sharing each row (threads: all of theirs)
};

// What `row` (a GpuWarps or GpuBlocks loop over `threads` threads per row, or up to
// `max_threads` for a block) can hold; empty buffers when nothing pays.
Held rows_to_hold(const Kernel& k, const Stmt& row, int64_t threads, int64_t max_threads, int64_t shared_limit, const Target& t,
                  int64_t min_threads) {
  struct Access {
    StmtPtr loop;
    std::vector<std::string> chain;  // the loops around it inside `row`, `row` first
    int width = 0;                   // the loop's vector width allowing scalar (0: none)
    std::map<std::string, ExprPtr> bases;
  };
  std::vector<Access> loops;
  std::vector<std::string> chain{row.name};
  std::function<void(const StmtPtr&)> walk = [&](const StmtPtr& x) {
    if (is_share(*x)) return loops.push_back({x, chain, 0, {}});
    if (x->kind == StmtKind::For) chain.push_back(x->name);
    for (auto& b : x->body) walk(b);
    if (x->kind == StmtKind::For) chain.pop_back();
  };
  for (auto& b : row.body) walk(b);
  // Outputs that may be carried: loaded and stored by share loops only, each first stored (by
  // a loop that does not load it) before any loop loads it.
  std::set<std::string> carried;
  {
    std::map<std::string, int> in_loops, anywhere;
    // Accesses of each buffer under `s`; `loaded` gets the buffers it loads.
    auto count = [](const StmtPtr& s, std::map<std::string, int>& n, std::set<std::string>& loaded) {
      visit(s, [&](const Stmt& st) {
        if (st.kind == StmtKind::Store) ++n[st.name];
        for (auto& e : st.exprs)
          visit(e, [&](const Expr& x) {
            if (x.kind != ExprKind::Load) return;
            ++n[x.name];
            loaded.insert(x.name);
          });
      });
    };
    std::set<std::string> loaded_anywhere;
    count(k.body, anywhere, loaded_anywhere);
    std::set<std::string> first_stored, loaded_before;
    for (auto& a : loops) {
      std::set<std::string> loaded;
      count(a.loop, in_loops, loaded);
      for (auto& st : a.loop->body)
        if (st->kind == StmtKind::Store && !loaded.count(st->name) && !loaded_before.count(st->name)) first_stored.insert(st->name);
      loaded_before.insert(loaded.begin(), loaded.end());
    }
    for (auto& b : first_stored) {
      const Buffer* buf = k.find_buffer(b);
      if (buf && buf->role == BufferRole::Output && loaded_before.count(b) && in_loops[b] == anywhere[b]) carried.insert(b);
    }
  }
  for (auto& a : loops) a.width = row_vector_width(k, a.loop, a.bases, /*scalar_ok=*/true, carried);
  std::map<std::string, int> reads;  // buffer -> share loops touching it at one base
  std::map<std::string, std::string> base_of;
  std::map<std::string, std::vector<std::string>> common;  // the loops around every loop touching it
  std::set<std::string> refused;
  for (auto& a : loops)
    for (auto& [b, base] : a.bases) {
      const Buffer* buf = k.find_buffer(b);
      std::string form = fmt::format("{}@{}", print_expr(base), a.loop->extent);
      if (a.width == 0 || !buf || (buf->role != BufferRole::Input && !carried.count(b)) || (base_of.count(b) && base_of[b] != form))
        refused.insert(b);
      base_of[b] = form;
      ++reads[b];
      if (!common.count(b)) common[b] = a.chain;
      auto& c = common[b];
      size_t n = 0;
      while (n < c.size() && n < a.chain.size() && c[n] == a.chain[n]) ++n;
      c.resize(n);
    }
  Held h;
  int64_t bytes = 0;
  for (auto& [b, n] : reads) {
    if (refused.count(b)) continue;
    // The holder: the outermost loop around every loop touching the row whose variable, with
    // those outside it, is all the row's base uses (a weight read by every row of a chunk is
    // read once per chunk; a chunk's row of x once per row).
    const std::vector<std::string>& c = common[b];
    std::set<std::string> uses;
    for (auto& a : loops)
      if (a.bases.count(b))
        visit(a.bases.at(b), [&](const Expr& x) {
          if (x.kind == ExprKind::Var) uses.insert(x.name);
        });
    size_t at = 0;
    while (at < c.size() && std::any_of(uses.begin(), uses.end(), [&](const std::string& u) {
             return std::find(c.begin() + static_cast<long>(at) + 1, c.end(), u) != c.end();
           }))
      ++at;
    bool ok = !c.empty() && std::all_of(uses.begin(), uses.end(), [&](const std::string& u) { return std::find(c.begin(), c.end(), u) != c.end(); });
    if (!ok) continue;
    // A row read by one loop, once per iteration of the loop around it, gains nothing held;
    // one read again by each row of a chunk (a weight) or loaded ahead of a chunk's next row
    // (a serial holder prefetches) does.
    bool once = n < 2 && c[at] == row.name && c.size() == at + 1;
    if (once && !carried.count(b)) continue;
    (carried.count(b) ? h.written : h.buffers).push_back(b);
    h.holder[b] = c[at];
    bytes += element_bytes(k.find_buffer(b)->dtype);
  }
  if (h.buffers.empty() && h.written.empty()) return {};
  // Every loop reading a held row walks it the same way: one width (the narrowest of theirs,
  // powers of two, so it divides the others) and one length.
  for (auto& a : loops) {
    bool reads_held = false;
    for (auto& [b, l] : h.holder) reads_held = reads_held || a.bases.count(b);
    if (!reads_held) continue;
    if (h.extent != 0 && h.extent != a.loop->extent) return {};
    h.extent = a.loop->extent;
    h.width = h.width == 0 ? a.width : std::min(h.width, a.width);
  }
  int64_t vectors = h.extent / h.width;
  bool chunk = !h.written.empty() || std::any_of(h.holder.begin(), h.holder.end(), [&](auto& b) { return b.second != row.name; });
  const int64_t most_bytes = chunk ? t.chunk_held_bytes_per_thread : t.held_bytes_per_thread;
  for (h.threads = threads; h.threads <= max_threads; h.threads *= 2) {
    h.vectors = (vectors + h.threads - 1) / h.threads;
    if (h.vectors * h.width * bytes > most_bytes) continue;
    // Each thread of a row's block holds at least Target::held_min_bytes_per_thread: fewer
    // threads, each with more of the row, spread a block combine's shuffles and barriers over
    // more elements (bf16 layer norm [16384,4096] on the H200: 512 threads holding 8 elements
    // 0.104 ms, 256 holding 16 0.085 ms; bench/NOTES.md, stop 33).
    while (!chunk && h.threads / 2 >= min_threads && h.vectors * h.width * bytes < t.held_min_bytes_per_thread) {
      const int64_t fewer = h.threads / 2, more = (vectors + fewer - 1) / fewer;
      if (more * h.width * bytes > most_bytes) break;
      h.threads = fewer;
      h.vectors = more;
    }
    return h;
  }
  // Too long for registers: shared memory, with as many threads as the row may have (rows
  // carried from row to row stay in memory then: they are no more than one row per chunk).
  if (!h.written.empty()) return {};
  h.threads = std::max(threads, max_threads);
  h.vectors = (vectors + h.threads - 1) / h.threads;
  h.shared = true;
  for (auto& b : h.buffers) h.shared_bytes += held_shared_bytes(k.find_buffer(b)->dtype, h.vectors, h.threads, h.width);
  if (row.map == LoopMap::GpuBlocks && h.shared_bytes <= shared_limit) return h;
  return {};
}

// Sets each share loop's vector width (and the held rows' walk) and each grid-stride loop's.
// A grid-stride loop vectorizes only as the kernel's sole statement (the emitter then prints
// its scalar tail after it).
StmtPtr set_vectors(const Kernel& k, const StmtPtr& body, const Held& held, const Target& t) {
  // What the held rows take a thread in registers (the row loop's prefetch doubles it).
  int64_t held_bytes = 0;
  for (auto& b : held.buffers) held_bytes += held.vectors * held.width * element_bytes(k.find_buffer(b)->dtype);
  std::set<std::string> held_set;
  for (auto& [b, loop] : held.holder) held_set.insert(b);
  std::set<std::string> carried(held.written.begin(), held.written.end());
  StmtPtr sole = sole_loop(body);
  return edit_loops(body, [&](Stmt& l) {
    auto self = std::make_shared<Stmt>(l);
    std::map<std::string, ExprPtr> bases;
    if (l.map == LoopMap::GpuGridStride) {
      l.vector = sole && sole->name == l.name ? grid_stride_vector_width(k, self) : 0;
      l.unroll = l.vector > 0 && t.pointwise_unroll > 1 ? t.pointwise_unroll : 0;
    } else if (is_share(l)) {
      // A loop reading a held row walks it at the held width; any other keeps 16-byte vectors
      // where its row allows them (width 1, one element per access, only serves a held row).
      int width = row_vector_width(k, self, bases, /*scalar_ok=*/true, carried);
      bool reads_held = std::any_of(bases.begin(), bases.end(), [&](auto& b) { return held_set.count(b.first) > 0; });
      l.vector = reads_held ? held.width : width > 1 ? width : 0;
    } else if (l.map == LoopMap::GpuWarps || l.map == LoopMap::GpuBlocks || l.map == LoopMap::Serial) {
      l.held.clear();
      l.held_written.clear();
      for (auto& b : held.buffers)
        if (held.holder.at(b) == l.name) l.held.push_back(b);
      for (auto& b : held.written)
        if (held.holder.at(b) == l.name) l.held_written.push_back(b);
      l.held_vectors = l.held.empty() && l.held_written.empty() ? 0 : held.vectors;
      l.held_shared = held.shared && !l.held.empty();
      // A chunk's rows come one after another: the next row's loads overlap this row's work.
      // So do a block's or a warp's rows, where the copy in flight fits the budget (a cluster's
      // row is one at a time).
      const bool row_loop = (l.map == LoopMap::GpuWarps || l.map == LoopMap::GpuBlocks) && held.cluster <= 1 &&
                            held_bytes <= t.row_prefetch_bytes_per_thread;
      l.prefetch = (l.map == LoopMap::Serial || row_loop) && !l.held.empty() && !held.shared;
      l.cluster = l.map == LoopMap::GpuBlocks ? held.cluster : 0;
    }
  });
}

void schedule_cuda(Kernel& k, const Target& t) {
  std::vector<StmtPtr> top = k.body->kind == StmtKind::Block ? k.body->body : std::vector<StmtPtr>{k.body};
  auto types = acc_types(k.body);
  std::vector<StmtPtr> out;
  int grid_loops = 0;
  ScheduleRecord rec{"one thread", 0, 0, 0, {}, 0, "no parallel loop", {}};
  int64_t row_max_threads = 0;  // the most threads a reduction row's block may grow to
  LaunchConfig launch{1, 1, 0};
  auto grid_of = [&](int64_t items_per_block, int64_t extent) {
    int64_t want = std::max<int64_t>(1, (extent + items_per_block - 1) / items_per_block);
    if (t.blocks_per_sm <= 0) return want;  // a full grid: every block one step of its loop
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
      if (auto plan = transposed_reads(k, s)) {
        // Transposed reads: tiles of the loop's [rows, cols] view, the blocks striding over
        // them, staged through shared memory (codegen/tiling.h).
        auto tiled = std::make_shared<Stmt>(*with_map(s, LoopMap::GpuTiles));
        int64_t tiles = ((plan->rows + plan->tile - 1) / plan->tile) * ((plan->cols + plan->tile - 1) / plan->tile);
        // A few blocks an SM, each walking several tiles: a block's next tile is loaded while
        // its current one computes (the emitter's prefetch), which one tile a block cannot do.
        launch.block = t.pointwise_block;
        launch.grid = std::min<int64_t>(tiles, int64_t(t.num_sms) * t.tile_blocks_per_sm);
        std::vector<std::string> names;
        std::set<std::string> buffers;
        for (auto& l : plan->loads)
          if (buffers.insert(l->name).second) names.push_back(l->name);
        rec = {"block per tile", 0, 0, 0, {}, 0,
               fmt::format("{} read down the output's columns, a transposed view: staged through shared memory, coalesced on both sides",
                           fmt::join(names, ", ")),
               fmt::format("tiles of {} x {} of the loop as [{}, {}], {:.1f} KB shared", plan->tile, plan->tile, plan->rows, plan->cols,
                           tile_shared_bytes(*plan) / 1024.0)};
        tiled->tiles = std::move(*plan);
        out.push_back(tiled);
        continue;
      }
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(s->extent, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(with_map(s, LoopMap::GpuGridStride));
      rec = {"grid-stride", 0, 1, 0, {}, 0, "a flat loop: one element per thread per iteration", {}};
      continue;
    }
    if (!lv.reduction && !lv.parallel) {
      // Only ordered work inside (a scatter along its dim, partials combined in chunk order):
      // a thread per outer iteration, in blocks small enough to reach every SM (4096 columns
      // of partials in blocks of 256 ran on 16 SMs: 23 us on the H200, bench/NOTES.md).
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up((s->extent + t.num_sms - 1) / t.num_sms, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(serial_inside(s, LoopMap::GpuGridStride));
      rec = {"thread per row", launch.block, 1, 0, {}, 0, "ordered work inside: each thread runs its own in order", {}};
      continue;
    }
    if (lv.longest <= t.thread_row_max) {
      // Short rows: one thread walks a whole row.
      launch.block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(s->extent, 32)));
      launch.grid = grid_of(launch.block, s->extent);
      out.push_back(serial_inside(s, LoopMap::GpuGridStride));
      rec = {"thread per row", launch.block, 1, 0, {}, 0, fmt::format("rows of at most {} elements (Target::thread_row_max)", t.thread_row_max), {}};
      continue;
    }
    // Rows walked in order inside, each reduced (a chunk of rows carrying column partials,
    // codegen/lower_column_partials.cpp): a block per chunk, whatever the row's length, since a
    // chunk is many rows' work and its partials are one block's registers.
    bool chunks = false;
    for (auto& b : s->body)
      visit(b, [&](const Stmt& x) {
        if (x.kind != StmtKind::For || x.loop != LoopKind::Ordered || is_leaf(x)) return;
        for (auto& c : x.body)
          visit(c, [&](const Stmt& y) { chunks = chunks || (y.kind == StmtKind::For && y.loop == LoopKind::Reduction); });
      });
    bool warp = lv.reduction && lv.longest <= t.warp_row_max && !chunks;
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
      rec = {"warp per row", t.warp_rows_per_block, t.warp_size, 0, {}, 0,
             fmt::format("reduction rows of {} to {} elements (Target::warp_row_max)", t.thread_row_max + 1, t.warp_row_max), {}};
      row_max_threads = t.warp_size;
    } else {
      int64_t cap = lv.reduction ? t.reduction_block : t.max_threads_per_block;
      launch.block = std::min<int64_t>(cap, std::max<int64_t>(32, round_up(lv.longest, 32)));
      launch.grid = grid_of(1, s->extent);
      rec = chunks        ? ScheduleRecord{"block per chunk of rows", 1, launch.block, 0, {}, 0, "rows walked in order, carrying the chunk's column partials", {}}
            : lv.reduction ? ScheduleRecord{"block per row", 1, launch.block, 0, {}, 0, fmt::format("reduction rows longer than {} elements", t.warp_row_max), {}}
                           : ScheduleRecord{"block per tile", 1, launch.block, 0, {}, 0, "independent inner loops: a block per outer iteration", {}};
      if (lv.reduction) row_max_threads = launch.block == cap ? t.max_threads_per_block : launch.block;
    }
  }
  k.body = block(std::move(out));
  k.schedule = rec;
  k.launch = launch;
  k.launch.shared_bytes = cuda_shared_bytes(k);  // the scratch the emitter declares for block combines
  choose_vectors(k, row_max_threads, t);
  if (k.schedule.mapping == "grid-stride" && k.schedule.vector > 1) {
    // A vectorized flat loop has extent / vector iterations of work, not extent: sized by the
    // extent, a grid of 64K elements in 4-element vectors gave 64 busy blocks out of 256 (half
    // the SMs idle). Blocks halve (to 128) until they cover every SM: the tuner picked 128 for
    // most small flat loops of the benchmark rows (bench/NOTES.md, stop 31).
    int64_t items = 0;
    visit(k.body, [&](const Stmt& x) {
      if (x.kind == StmtKind::For && x.map == LoopMap::GpuGridStride) items = (x.extent + k.schedule.vector - 1) / k.schedule.vector;
    });
    int64_t block = std::min<int64_t>(t.pointwise_block, std::max<int64_t>(32, round_up(items, 32)));
    while (block > kSmallestFlatBlock && (items + block - 1) / block < t.num_sms) block /= 2;
    k.launch.block = block;
    // (A full grid gives each thread its unrolled iterations, not one.)
    const int64_t unroll = std::max<int64_t>(1, k.schedule.unroll);
    k.launch.grid = grid_of(t.blocks_per_sm > 0 ? block : block * unroll, items);
  }
  if (k.launch.cluster > 1) {
    // Clusters of blocks per row, as many as the SMs run at once.
    int64_t rows = 0;
    visit(k.body, [&](const Stmt& x) {
      if (x.kind == StmtKind::For && x.cluster > 1) rows = x.extent;
    });
    int64_t resident = int64_t(t.num_sms) * (kThreadsPerSm / k.launch.block) / k.launch.cluster;
    k.launch.grid = std::max<int64_t>(1, std::min(rows, resident)) * k.launch.cluster;
  }
  if (k.schedule.held_shared) {
    // As many blocks as the SMs hold at once, each walking its rows (a block waiting for a
    // slot would only add a wave's tail).
    int64_t per_sm = std::max<int64_t>(1, t.shared_memory_optin / (k.launch.dynamic_shared_bytes + k.launch.shared_bytes));
    k.launch.grid = std::min<int64_t>(k.launch.grid, t.num_sms * std::min<int64_t>(per_sm, t.blocks_per_sm > 0 ? t.blocks_per_sm : per_sm));
  }
  // Every mapping above strides over its work by gridDim.x; a cluster's grid is whole clusters
  // placed together, left as it is.
  // blocks_per_sm 0 asks for a full grid, each block one step, as Triton's kernels launch.
  k.launch.persistent = grid_loops > 0 && k.launch.cluster <= 1 && t.blocks_per_sm > 0;
  if (grid_loops > 0 && t.min_blocks_per_sm > 0 && t.min_blocks_per_sm * k.launch.block <= kThreadsPerSm)
    k.launch.min_blocks_per_sm = t.min_blocks_per_sm;
  // 32-bit indices when every buffer and loop (and a grid-stride step past the end, `unroll`
  // grid strides for an unrolled loop) fits.
  int64_t biggest = 0, steps = 1;
  for (const Buffer& b : k.buffers) biggest = std::max(biggest, b.numel);
  for (const Buffer& b : k.constants) biggest = std::max(biggest, b.numel);
  visit(k.body, [&](const Stmt& s) {
    if (s.kind != StmtKind::For) return;
    biggest = std::max(biggest, s.extent);
    steps = std::max<int64_t>(steps, s.unroll);
  });
  int64_t threads = launch.grid * launch.block;
  k.index_bits = biggest + steps * threads < int64_t(INT32_MAX) ? 32 : 64;
  // Numerics: a kernel whose every result is 16-bit computes f32 exp and division approximately
  // (Target::approx_math_for_16bit_results says why).
  bool results = false, all_16_bit = true;
  for (const Buffer& b : k.buffers)
    if (b.role == BufferRole::Output || b.role == BufferRole::Temp) {
      results = true;
      all_16_bit = all_16_bit && (b.dtype == DType::F16 || b.dtype == DType::BF16);
    }
  k.schedule.approx_f32_math = t.approx_math_for_16bit_results && results && all_16_bit;
}

}  // namespace

void choose_vectors(Kernel& k, int64_t max_row_threads, const Target& t) {
  const int64_t shared_limit = t.shared_memory_optin - k.launch.shared_bytes;
  const int max_cluster = t.supports_clusters() ? kMostClusterBlocks : 1;
  Held held;
  if (max_row_threads > 0)
    visit(k.body, [&](const Stmt& x) {
      if (!held.holder.empty() || (x.map != LoopMap::GpuWarps && x.map != LoopMap::GpuBlocks)) return;
      bool block_may_grow = x.map == LoopMap::GpuBlocks && k.schedule.threads_per_row == k.launch.block;
      int64_t threads = x.map == LoopMap::GpuWarps ? 32 : k.launch.block;
      int64_t most = block_may_grow ? std::max(threads, max_row_threads) : threads;
      // A block that may grow may shrink too, down to the smallest a row's block takes.
      const int64_t fewest = block_may_grow ? std::min(threads, kSmallestRowBlock) : threads;
      held = rows_to_hold(k, x, threads, most, /*shared_limit=*/0, t, fewest);
      // Too long for one block's registers: a cluster's, the smallest blocks first (more of
      // them per SM, so that one block's loads overlap another's arithmetic), then shared memory.
      for (int64_t per_block : {256, 512, 1024})
        for (int cs = 2; held.holder.empty() && block_may_grow && cs <= max_cluster && per_block <= most; cs *= 2)
          if (Held h = rows_to_hold(k, x, per_block * cs, per_block * cs, 0, t, per_block * cs); !h.holder.empty()) {
            held = h;
            held.cluster = cs;
          }
      if (held.holder.empty()) held = rows_to_hold(k, x, threads, most, shared_limit, t, threads);
    });
  if (held.cluster > 1) {
    k.launch.block = held.threads / held.cluster;
    k.launch.cluster = held.cluster;
    k.schedule.threads_per_row = held.threads;
    k.schedule.cluster = held.cluster;
    k.schedule.mapping = "cluster per row";
    k.schedule.rows_per_block = 0;
  } else if (!held.holder.empty() && held.threads != k.launch.block && k.schedule.threads_per_row == k.launch.block) {
    k.launch.block = k.schedule.threads_per_row = held.threads;
  }
  k.body = set_vectors(k, k.body, held, t);
  k.schedule.vector = k.schedule.unroll = 0;
  visit(k.body, [&](const Stmt& x) {
    if (x.kind == StmtKind::For) k.schedule.vector = std::max(k.schedule.vector, x.vector);
    if (x.kind == StmtKind::For) k.schedule.unroll = std::max(k.schedule.unroll, x.unroll);
  });
  k.schedule.held = held.buffers;
  k.schedule.carried = held.written;
  k.schedule.held_elements = held.vectors * held.width;
  k.schedule.held_shared = held.shared;
  k.launch.dynamic_shared_bytes = held.shared ? held.shared_bytes : 0;
}

void schedule(Kernel& k, const Target& target) {
  if (k.attention) schedule_attention(k, target);
  else if (k.sort) schedule_sort(k, target);
  else if (k.sorted_scatter) schedule_sorted_scatter(k, target);
  else if (target.is_gpu()) schedule_cuda(k, target);
  else schedule_cpu(k, target);
  // After the mapping, so that each reciprocal lands before the loop as it finally runs.
  if (!k.attention && !k.sort && !k.sorted_scatter) k.body = hoist_invariant_reciprocals(k.body);
  verify(k);
}

void schedule(LoweredGraph& lg, const Target& target) {
  for (Kernel& k : lg.kernels) schedule(k, target);
}

}  // namespace kiln::codegen
