// verify(Kernel): the structural invariants of the kernel IR (see kernel_ir.h). Run after
// the lowering and after the schedule step, so an emitter never sees a kernel that would
// race on a GPU or use an undeclared name.
#include <fmt/format.h>

#include <map>
#include <set>
#include <vector>

#include "codegen/kernel_ir.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

class KernelVerifier {
 public:
  explicit KernelVerifier(const Kernel& k) : k_(k) {}

  void run() {
    for (const Buffer& b : k_.buffers) buffers_.insert(b.name);
    for (const Buffer& c : k_.constants) buffers_.insert(c.name);
    scopes_.emplace_back();
    stmt(k_.body);
  }

 private:
  struct Loop {
    const Stmt* s;
    size_t scope_depth;  // scopes_ size when its body started
  };

  [[noreturn]] void broken(const std::string& what, const Stmt* s = nullptr) {
    std::string where = s ? " at `" + print_stmt(std::make_shared<Stmt>(*s)).substr(0, 160) + "`" : "";
    while (!where.empty() && (where.back() == '\n' || where.back() == ' ')) where.pop_back();
    fail("internal error: kernel {} breaks a kernel IR invariant: {}{}", k_.name, what, where);
  }

  bool declared(const std::string& n) const {
    for (auto& sc : scopes_)
      if (sc.count(n)) return true;
    return false;
  }
  // The index of the scope that declares `n` (-1 if none).
  int scope_of(const std::string& n) const {
    for (size_t i = scopes_.size(); i-- > 0;)
      if (scopes_[i].count(n)) return static_cast<int>(i);
    return -1;
  }

  void expr(const ExprPtr& e, const Stmt* at) {
    if (!e) broken("a null expression", at);
    visit(e, [&](const Expr& x) {
      if (x.kind == ExprKind::Var && !declared(x.name)) broken(fmt::format("use of undeclared variable '{}'", x.name), at);
      if (x.kind == ExprKind::Load && !buffers_.count(x.name)) broken(fmt::format("load from unknown buffer '{}'", x.name), at);
      if (x.kind == ExprKind::Load && (x.args.size() != 1 || !is_integral_index(x.args[0])))
        broken(fmt::format("load from '{}' with a non-integer index", x.name), at);
    });
  }
  static bool is_integral_index(const ExprPtr& e) { return e->dtype == DType::I64 || e->dtype == DType::I32; }

  // The innermost loop mapped to threads or lanes we are in, if any.
  const Stmt* thread_loop() const {
    for (size_t i = loops_.size(); i-- > 0;)
      if (loops_[i].s->map == LoopMap::GpuThreads || loops_[i].s->map == LoopMap::GpuLanes || loops_[i].s->map == LoopMap::GpuGridStride ||
          loops_[i].s->map == LoopMap::GpuTiles)
        return loops_[i].s;
    return nullptr;
  }
  const Stmt* enclosing_map(LoopMap m) const {
    for (size_t i = loops_.size(); i-- > 0;)
      if (loops_[i].s->map == m) return loops_[i].s;
    return nullptr;
  }

  void stmt(const StmtPtr& sp) {
    const Stmt* s = sp.get();
    switch (s->kind) {
      case StmtKind::Block:
        for (auto& b : s->body) stmt(b);
        return;
      case StmtKind::Let:
        if (s->exprs.size() != 1) broken("a let with no value", s);
        expr(s->exprs[0], s);
        if (declared(s->name)) broken(fmt::format("'{}' is declared twice", s->name), s);
        scopes_.back().insert(s->name);
        return;
      case StmtKind::Store:
      case StmtKind::AtomicAdd: {
        if (!buffers_.count(s->name)) broken(fmt::format("store to unknown buffer '{}'", s->name), s);
        const Buffer* b = k_.find_buffer(s->name);
        if (b->role == BufferRole::Input || b->role == BufferRole::Constant)
          broken(fmt::format("store to {} buffer '{}'", buffer_role_name(b->role), s->name), s);
        if (s->exprs.size() != 2 || !is_integral_index(s->exprs[0])) broken("a store needs an integer index and a value", s);
        expr(s->exprs[0], s);
        expr(s->exprs[1], s);
        if (s->kind == StmtKind::AtomicAdd && is_floating(s->exprs[1]->dtype))
          broken("an atomic add of a float (not deterministic run to run)", s);
        return;
      }
      case StmtKind::DeclAcc:
        if (declared(s->name)) broken(fmt::format("accumulator '{}' is declared twice", s->name), s);
        scopes_.back().insert(s->name);
        scopes_.back().insert(s->name + "_idx");
        scopes_.back().insert(s->name + "_max");
        scopes_.back().insert(s->name + "_mean");
        scopes_.back().insert(s->name + "_n");
        accs_[s->name] = s;
        return;
      case StmtKind::Accumulate: {
        auto it = accs_.find(s->name);
        if (it == accs_.end() || !declared(s->name)) broken(fmt::format("accumulate into undeclared accumulator '{}'", s->name), s);
        for (auto& e : s->exprs) expr(e, s);
        // The innermost loop must be a reduction loop whose body does not declare the acc.
        if (loops_.empty()) return;  // a single accumulation: nothing to check
        const Loop& l = loops_.back();
        int at = scope_of(s->name);
        if (at >= static_cast<int>(l.scope_depth))
          return;  // declared inside the loop's body: a per-iteration accumulator
        if (l.s->loop == LoopKind::Parallel)
          broken(fmt::format("accumulator '{}' declared outside a {} loop is accumulated in it", s->name, loop_kind_name(l.s->loop)),
                 s);
        return;
      }
      case StmtKind::CombineAcross: {
        if (!accs_.count(s->name) || !declared(s->name)) broken(fmt::format("combine of undeclared accumulator '{}'", s->name), s);
        if (s->map != LoopMap::GpuThreads && s->map != LoopMap::GpuLanes) broken("a combine across neither a block nor a warp", s);
        LoopMap outer = s->map == LoopMap::GpuThreads ? LoopMap::GpuBlocks : LoopMap::GpuWarps;
        if (!enclosing_map(outer)) broken(fmt::format("a combine across a {} outside a loop mapped to {}", s->map == LoopMap::GpuThreads ? "block" : "warp", loop_map_name(outer)), s);
        if (thread_loop()) broken("a combine inside a thread-mapped loop (not every thread reaches it)", s);
        return;
      }
      case StmtKind::Barrier:
        if (thread_loop()) broken("a barrier inside a thread-mapped loop (not every thread reaches it)", s);
        return;
      case StmtKind::For: {
        if (s->extent < 0) broken("a loop with a negative extent", s);
        if (declared(s->name)) broken(fmt::format("loop variable '{}' shadows a declaration", s->name), s);
        LoopMap m = s->map;
        bool in_thread = thread_loop() != nullptr;
        bool grid = m == LoopMap::GpuGridStride || m == LoopMap::GpuBlocks || m == LoopMap::GpuWarps || m == LoopMap::GpuTiles;
        if (grid && (in_thread || enclosing_map(LoopMap::GpuBlocks) || enclosing_map(LoopMap::GpuWarps)))
          broken(fmt::format("a loop mapped to {} inside a loop mapped to the grid", loop_map_name(m)), s);
        if (m == LoopMap::GpuThreads && (!enclosing_map(LoopMap::GpuBlocks) || in_thread))
          broken("a loop mapped to the threads of a block outside a block-mapped loop (or inside a thread-mapped one)", s);
        if (m == LoopMap::GpuLanes && (!enclosing_map(LoopMap::GpuWarps) || in_thread))
          broken("a loop mapped to the lanes of a warp outside a warp-mapped loop (or inside a thread-mapped one)", s);
        if (m == LoopMap::GpuTiles) {
          const TilePlan& t = s->tiles;
          if (t.tile <= 0 || t.rows * t.cols != s->extent || t.loads.empty()) broken("a tiled loop whose plan does not cover its extent", s);
          for (auto& b : s->body)
            visit(b, [&](const Stmt& x) {
              if (x.kind == StmtKind::For) broken("a tiled loop with a loop inside", s);
            });
          for (auto& l : t.loads)
            if (l->kind != ExprKind::Load || !buffers_.count(l->name)) broken("a tiled loop stages a load of an unknown buffer", s);
        }
        if (s->loop == LoopKind::Ordered && is_gpu_map(m)) broken("an ordered loop spread over GPU threads", s);
        if (s->loop == LoopKind::Reduction && (grid || m == LoopMap::CpuThreads))
          broken("a reduction loop spread over independent workers with no combine", s);
        loops_.push_back({s, scopes_.size()});
        scopes_.emplace_back();
        scopes_.back().insert(s->name);
        for (auto& b : s->body) stmt(b);
        scopes_.pop_back();
        loops_.pop_back();
        return;
      }
    }
  }

  const Kernel& k_;
  std::set<std::string> buffers_;
  std::vector<std::set<std::string>> scopes_;
  std::vector<Loop> loops_;
  std::map<std::string, const Stmt*> accs_;
};

}  // namespace

void verify(const Kernel& k) {
  if (!k.body) fail("internal error: kernel {} has no body", k.name);
  KernelVerifier(k).run();
}

}  // namespace kiln::codegen
