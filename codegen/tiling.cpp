// Transposed reads through shared-memory tiles: the analysis (see tiling.h).
#include "codegen/tiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "ir/dtype.h"

namespace kiln::codegen {

namespace {

// A block's tile: 64 x 64 where the view is that large (a 256-thread block's 16 elements a
// thread in each phase, all loads in flight at once), else 32 x 32 (a warp's worth of rows and
// of columns).
constexpr int kLargeTile = 64, kSmallTile = 32;
// The tiles are static shared memory (48 KB at most without opting in); a loop with more
// transposed loads than fit keeps the rest as they are.
constexpr size_t kMostTiledLoads = 8;
constexpr int64_t kStaticSharedBytes = 48 * 1024;

bool uses_var(const ExprPtr& e, const std::string& v) {
  bool used = false;
  visit(e, [&](const Expr& x) { used = used || (x.kind == ExprKind::Var && x.name == v); });
  return used;
}

// Whether `e` is index arithmetic over `v` and constants only (no load, no other variable).
bool index_of_only(const ExprPtr& e, const std::string& v) {
  bool ok = true;
  visit(e, [&](const Expr& x) {
    switch (x.kind) {
      case ExprKind::Var: ok = ok && x.name == v; break;
      case ExprKind::IntImm:
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::FloorDiv:
      case ExprKind::Mod:
      case ExprKind::Min:
      case ExprKind::Max: break;
      default: ok = false;
    }
  });
  return ok;
}

// The value of an index expression of `v` alone at v = i (index_of_only holds).
int64_t value_at(const ExprPtr& e, int64_t i) {
  auto x = [&](size_t n) { return value_at(e->args[n], i); };
  switch (e->kind) {
    case ExprKind::Var: return i;
    case ExprKind::IntImm: return e->i;
    case ExprKind::Add: return x(0) + x(1);
    case ExprKind::Sub: return x(0) - x(1);
    case ExprKind::Mul: return x(0) * x(1);
    case ExprKind::FloorDiv: {
      int64_t d = x(1);
      return d == 0 ? 0 : x(0) / d;
    }
    case ExprKind::Mod: {
      int64_t d = x(1);
      return d == 0 ? 0 : x(0) % d;
    }
    case ExprKind::Min: return std::min(x(0), x(1));
    case ExprKind::Max: return std::max(x(0), x(1));
    default: return 0;
  }
}

// Whether a load at `index` is transposed in the [rows, cols] view of the loop variable: at
// most probe points a step down a column (i + cols) moves the index by 1, and at every point a
// step along a row (i + 1) moves it by a sector or more (`sector` elements).
bool transposed_in(const ExprPtr& index, int64_t rows, int64_t cols, int64_t sector) {
  int unit_down = 0, probes = 0;
  for (int64_t r : {int64_t(0), rows / 3, rows / 2, rows - 2})
    for (int64_t c : {int64_t(0), cols / 2, cols - 2}) {
      int64_t i = r * cols + c;
      int64_t at = value_at(index, i);
      if (std::llabs(value_at(index, i + 1) - at) < sector) return false;
      unit_down += value_at(index, i + cols) - at == 1;
      ++probes;
    }
  return unit_down * 4 >= probes * 3;
}

}  // namespace

std::optional<TilePlan> transposed_reads(const Kernel& k, const StmtPtr& loop) {
  if (loop->kind != StmtKind::For || loop->loop != LoopKind::Parallel) return std::nullopt;
  const std::string& v = loop->name;
  const int64_t n = loop->extent;
  // The loop's loads that may move to the first phase, its stored buffers, and its form.
  std::vector<ExprPtr> candidates;
  std::set<std::string> stored, seen;
  bool ok = true;
  std::function<void(const ExprPtr&, bool)> expr = [&](const ExprPtr& e, bool guarded) {
    if (e->kind == ExprKind::Load) {
      const Buffer* b = k.find_buffer(e->name);
      bool movable = b && b->role != BufferRole::Constant && !guarded && index_of_only(e->args[0], v) && uses_var(e->args[0], v) &&
                     !(e->args[0]->kind == ExprKind::Var);
      if (movable && seen.insert(e->name + "@" + print_expr(e->args[0])).second) candidates.push_back(e);
      return;
    }
    for (size_t i = 0; i < e->args.size(); ++i) expr(e->args[i], guarded || (e->kind == ExprKind::Select && i > 0));
  };
  for (auto& s : loop->body) {
    if (s->kind == StmtKind::Let) expr(s->exprs[0], false);
    else if (s->kind == StmtKind::Store) {
      ok = ok && s->exprs[0]->kind == ExprKind::Var && s->exprs[0]->name == v;
      stored.insert(s->name);
      expr(s->exprs[1], false);
    } else ok = false;
  }
  if (!ok || candidates.empty()) return std::nullopt;
  // The row lengths to try: every divisor of v in the candidates' indices.
  std::set<int64_t> divisors;
  for (auto& l : candidates)
    visit(l->args[0], [&](const Expr& x) {
      if ((x.kind == ExprKind::FloorDiv || x.kind == ExprKind::Mod) && x.args[1]->kind == ExprKind::IntImm && uses_var(x.args[0], v))
        divisors.insert(x.args[1]->i);
    });
  std::optional<TilePlan> best;
  for (int64_t cols : divisors) {
    if (cols < kSmallTile / 2 || n % cols != 0 || n / cols < kSmallTile / 2) continue;
    // The large tile where the view and shared memory allow (16 loads in flight a thread),
    // else the small one.
    for (int tile : {kLargeTile, kSmallTile}) {
      if (tile == kLargeTile && (cols < kLargeTile || n / cols < kLargeTile)) continue;
      TilePlan plan{n / cols, cols, tile, {}};
      int64_t bytes = 0;
      bool all = true;
      for (auto& l : candidates) {
        if (stored.count(l->name)) continue;  // its first phase would run ahead of the tile's stores
        int64_t size = dtype_size(k.find_buffer(l->name)->dtype);
        if (!transposed_in(l->args[0], plan.rows, cols, std::max<int64_t>(1, 32 / size))) continue;
        if (plan.loads.size() == kMostTiledLoads || bytes + tile_array_elements(plan) * size > kStaticSharedBytes) {
          all = false;
          break;
        }
        bytes += tile_array_elements(plan) * size;
        plan.loads.push_back(l);
      }
      if (tile == kLargeTile && !all) continue;
      if (!plan.loads.empty() && (!best || plan.loads.size() > best->loads.size())) best = std::move(plan);
      break;
    }
  }
  return best;
}

std::string tile_array_name(const TilePlan& t, size_t n) { return fmt::format("{}_tile{}", t.loads.at(n)->name, n); }

int64_t tile_array_elements(const TilePlan& t) { return int64_t(t.tile) * (t.tile + 1); }

int64_t tile_shared_bytes(const TilePlan& t) {
  int64_t bytes = 0;
  for (auto& l : t.loads) bytes += tile_array_elements(t) * dtype_size(l->dtype);
  return bytes;
}

}  // namespace kiln::codegen
