#include "codegen/kept_values.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace kiln::codegen {
namespace {

bool is_share(const Stmt& s) {
  return s.kind == StmtKind::For && (s.map == LoopMap::GpuThreads || s.map == LoopMap::GpuLanes) && s.vector > 0;
}

bool loads_any(const StmtPtr& s, const std::set<std::string>& buffers) {
  bool found = false;
  visit(s, [&](const Stmt& x) {
    for (auto& e : x.exprs)
      visit(e, [&](const Expr& y) { found = found || (y.kind == ExprKind::Load && buffers.count(y.name)); });
  });
  return found;
}

// The lets directly in a share loop, each with its value written out in full (the loop's earlier
// lets substituted) and its loop variable renamed, so that two loops' lets compare as text.
std::map<std::string, std::string> inlined_lets(const Stmt& loop, std::map<std::string, ExprPtr>& full) {
  std::map<std::string, std::string> text;
  for (auto& st : loop.body) {
    if (st->kind != StmtKind::Let) continue;
    ExprPtr v = rewrite(st->exprs[0], [&](const ExprPtr& e) -> ExprPtr {
      if (e->kind != ExprKind::Var) return e;
      if (e->name == loop.name) return var("@element", e->lo, e->hi);
      auto it = full.find(e->name);
      return it == full.end() ? e : it->second;
    });
    full[st->name] = v;
    if (st->dtype == DType::F32) text[st->name] = print_expr(v);
  }
  return text;
}

// What a value may depend on to be the same in two loops of one row: the element, the row loop's
// variable, the lets the row computed before the first loop, and buffers nothing in the row writes.
bool stable(const ExprPtr& v, const std::set<std::string>& allowed_vars, const std::set<std::string>& written, const std::set<std::string>& held) {
  bool ok = true, reads_held = false;
  visit(v, [&](const Expr& e) {
    if (e.kind == ExprKind::Var && e.name != "@element" && !allowed_vars.count(e.name)) ok = false;
    if (e.kind == ExprKind::Load) {
      if (written.count(e.name)) ok = false;
      reads_held = reads_held || held.count(e.name);
    }
  });
  return ok && reads_held;
}

// The statements of `loop` still needed once the lets in `replaced` read registers.
std::vector<StmtPtr> live_after(const Stmt& loop, const std::set<std::string>& replaced) {
  std::vector<StmtPtr> body;
  for (auto& st : loop.body)
    body.push_back(st->kind == StmtKind::Let && replaced.count(st->name) ? let(st->name, imm(DType::F32, 0)) : st);
  return without_dead_lets(body);
}

StmtPtr keep_in_row(const StmtPtr& row, std::vector<std::string>& record) {
  std::set<std::string> held(row->held.begin(), row->held.end());
  std::set<std::string> written;
  visit(row, [&](const Stmt& x) {
    if (x.kind == StmtKind::Store || x.kind == StmtKind::AtomicAdd) written.insert(x.name);
  });
  for (auto& b : row->held_written) written.insert(b);
  std::set<std::string> allowed{row->name};
  const auto& body = row->body;
  for (size_t a = 0; a < body.size(); ++a) {
    if (body[a]->kind == StmtKind::Let) allowed.insert(body[a]->name);
    if (!is_share(*body[a]) || !loads_any(body[a], held)) continue;
    std::map<std::string, ExprPtr> full_a;
    std::map<std::string, std::string> earlier = inlined_lets(*body[a], full_a);
    std::map<std::string, std::string> by_text;
    for (auto& [name, text] : earlier)
      if (stable(full_a.at(name), allowed, written, held)) by_text.emplace(text, name);
    if (by_text.empty()) continue;
    // Every later share loop: its lets equal to one of these read it from registers.
    std::vector<std::pair<std::string, std::string>> kept;
    std::map<size_t, std::set<std::string>> replaced;
    for (size_t b = a + 1; b < body.size(); ++b) {
      if (!is_share(*body[b]) || body[b]->vector != body[a]->vector || body[b]->extent != body[a]->extent) continue;
      std::map<std::string, ExprPtr> full_b;
      std::map<std::string, std::string> matches;
      for (auto& [name, text] : inlined_lets(*body[b], full_b))
        if (auto it = by_text.find(text); it != by_text.end()) matches[name] = it->second, replaced[b].insert(name);
      // Only the matches still read once all of them are registers (exp(x - max) is kept, not
      // also the x - max that fed it).
      std::set<std::string> live;
      for (auto& st : live_after(*body[b], replaced[b]))
        if (st->kind == StmtKind::Let) live.insert(st->name);
      replaced[b].clear();
      for (auto& [name, from] : matches)
        if (live.count(name)) kept.push_back({name, from}), replaced[b].insert(name);
    }
    if (kept.empty()) continue;
    // No register added: after loop a, nothing reads a held row but through kept values, and
    // there are no more kept values than held rows whose registers they take.
    std::set<std::string> sources;
    for (auto& [later, earlier_name] : kept) sources.insert(earlier_name);
    bool rows_die = sources.size() <= held.size();
    // (Only share loops read the held registers; a row-level load, as cross-entropy's gather of
    // the target's logit, reads memory.)
    for (size_t b = a + 1; b < body.size() && rows_die; ++b) {
      if (!is_share(*body[b])) continue;
      for (auto& st : live_after(*body[b], replaced[b])) {
        if (st->kind == StmtKind::Let && replaced[b].count(st->name)) continue;
        rows_die = rows_die && !loads_any(st, held);
      }
    }
    if (!rows_die) continue;
    auto copy = std::make_shared<Stmt>(*row);
    copy->kept_lets = kept;
    for (auto& s : sources) record.push_back(s);
    return copy;
  }
  return row;
}

StmtPtr walk(const StmtPtr& s, std::vector<std::string>& record) {
  if (s->kind == StmtKind::For && !s->held.empty() && !s->held_shared && (s->map == LoopMap::GpuBlocks || s->map == LoopMap::GpuWarps))
    return keep_in_row(s, record);
  if (s->body.empty()) return s;
  auto copy = std::make_shared<Stmt>(*s);
  for (auto& b : copy->body) b = walk(b, record);
  return copy;
}

}  // namespace

std::vector<StmtPtr> without_dead_lets(const std::vector<StmtPtr>& body) {
  std::set<std::string> needed;
  std::vector<StmtPtr> live;
  for (auto it = body.rbegin(); it != body.rend(); ++it) {
    const StmtPtr& st = *it;
    if (st->kind == StmtKind::Let && !needed.count(st->name)) continue;
    live.push_back(st);
    visit(st, [&](const Stmt& x) {
      for (auto& e : x.exprs)
        visit(e, [&](const Expr& y) {
          if (y.kind == ExprKind::Var) needed.insert(y.name);
        });
    });
  }
  return {live.rbegin(), live.rend()};
}

void keep_recomputed_values(Kernel& k) {
  std::vector<std::string> record;
  k.body = walk(k.body, record);
  k.schedule.kept = record;
}

}  // namespace kiln::codegen
