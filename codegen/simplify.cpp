#include "codegen/simplify.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

namespace kiln::codegen {

namespace {

using i128 = __int128;

int64_t fdiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t fmod_pos(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

bool is_index(const ExprPtr& e) { return e->dtype == DType::I64; }
bool is_const(const ExprPtr& e, int64_t* v = nullptr) {
  if (e->kind != ExprKind::IntImm || !is_index(e)) return false;
  if (v) *v = e->i;
  return true;
}

// constant + sum of coeff*atom; atoms keyed by their printed text (structural identity).
struct Lin {
  std::map<std::string, std::pair<ExprPtr, int64_t>> terms;
  int64_t c = 0;

  void add_term(const ExprPtr& atom, int64_t k) {
    if (k == 0) return;
    std::string key = print_expr(atom);
    auto [it, fresh] = terms.try_emplace(key, atom, k);
    if (!fresh && (it->second.second += k) == 0) terms.erase(it);
  }
  void add(const Lin& o, int64_t k) {
    for (auto& [key, t] : o.terms) add_term(t.first, t.second * k);
    c += o.c * k;
  }
  bool is_const() const { return terms.empty(); }
};

Lin simplify_lin(const ExprPtr& e);
ExprPtr from_lin(const Lin& l);
std::optional<IndexRange> range_of(const Lin& l);

std::optional<IndexRange> atom_range(const ExprPtr& e) {
  int64_t c = 0;
  switch (e->kind) {
    case ExprKind::IntImm: return IndexRange{e->i, e->i};
    case ExprKind::Var:
      if (!is_index(e) || e->lo > e->hi) return std::nullopt;
      return IndexRange{e->lo, e->hi};
    case ExprKind::Mod:
      if (is_const(e->args[1], &c) && c > 0) return IndexRange{0, c - 1};
      return std::nullopt;
    case ExprKind::FloorDiv:
      if (is_const(e->args[1], &c) && c > 0) {
        auto r = index_range(e->args[0]);
        if (r) return IndexRange{fdiv(r->lo, c), fdiv(r->hi, c)};
      }
      return std::nullopt;
    case ExprKind::Min:
    case ExprKind::Max: {
      auto a = index_range(e->args[0]), b = index_range(e->args[1]);
      if (!a || !b) return std::nullopt;
      if (e->kind == ExprKind::Min) return IndexRange{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      return IndexRange{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    }
    case ExprKind::Mul: {
      auto a = index_range(e->args[0]), b = index_range(e->args[1]);
      if (!a || !b) return std::nullopt;
      i128 v[4] = {i128(a->lo) * b->lo, i128(a->lo) * b->hi, i128(a->hi) * b->lo, i128(a->hi) * b->hi};
      i128 lo = *std::min_element(v, v + 4), hi = *std::max_element(v, v + 4);
      if (lo < INT64_MIN || hi > INT64_MAX) return std::nullopt;
      return IndexRange{int64_t(lo), int64_t(hi)};
    }
    default: return std::nullopt;
  }
}

std::optional<IndexRange> range_of(const Lin& l) {
  i128 lo = l.c, hi = l.c;
  for (auto& [key, t] : l.terms) {
    auto r = atom_range(t.first);
    if (!r) return std::nullopt;
    i128 a = i128(r->lo) * t.second, b = i128(r->hi) * t.second;
    lo += std::min(a, b);
    hi += std::max(a, b);
  }
  if (lo < INT64_MIN || hi > INT64_MAX) return std::nullopt;
  return IndexRange{int64_t(lo), int64_t(hi)};
}

Lin constant(int64_t v) {
  Lin l;
  l.c = v;
  return l;
}
Lin atom(const ExprPtr& e) {
  Lin l;
  l.add_term(e, 1);
  return l;
}

// The single atom of `l` when it is exactly 1*atom.
const ExprPtr* single_atom(const Lin& l) {
  if (l.c != 0 || l.terms.size() != 1 || l.terms.begin()->second.second != 1) return nullptr;
  return &l.terms.begin()->second.first;
}

// l as big + small with big's coefficients multiples of a g that divides c, and small (the
// other terms and the constant) in [0, g): then l / c = (big / g) / (c / g) and l % c =
// big % c + small (row * 32000 + r over a [2048, 32000] buffer, r < 32000: l / 65536000 is
// row / 2048). The largest such g among the terms' coefficients; false when none.
bool split_below(const Lin& l, int64_t c, Lin& big_over_g, Lin& small, int64_t& g) {
  std::vector<int64_t> candidates;
  for (auto& [key, t] : l.terms)
    if (t.second > 1 && c % t.second == 0) candidates.push_back(t.second);
  std::sort(candidates.rbegin(), candidates.rend());
  for (int64_t cand : candidates) {
    Lin b, sm;
    for (auto& [key, t] : l.terms) {
      if (t.second % cand == 0) b.add_term(t.first, t.second / cand);
      else sm.add_term(t.first, t.second);
    }
    sm.c = l.c;
    auto r = range_of(sm);
    if (!r || r->lo < 0 || r->hi >= cand) continue;
    big_over_g = b;
    small = sm;
    g = cand;
    return true;
  }
  return false;
}

Lin div_lin(const Lin& l, int64_t c) {
  if (c == 1) return l;
  Lin q, r;
  for (auto& [key, t] : l.terms) {
    if (t.second % c == 0) q.add_term(t.first, t.second / c);
    else r.add_term(t.first, t.second);
  }
  q.c = fdiv(l.c, c);
  r.c = l.c - q.c * c;
  if (auto rr = range_of(r); rr && fdiv(rr->lo, c) == fdiv(rr->hi, c)) {
    q.c += fdiv(rr->lo, c);
    return q;
  }
  if (const ExprPtr* a = single_atom(r); a && (*a)->kind == ExprKind::FloorDiv) {
    int64_t inner = 0;
    if (is_const((*a)->args[1], &inner) && inner > 0) {  // (x / a) / c = x / (a*c)
      q.add(div_lin(simplify_lin((*a)->args[0]), inner * c), 1);
      return q;
    }
  }
  Lin big, small;
  int64_t g = 0;
  if (split_below(r, c, big, small, g)) {
    q.add(div_lin(big, c / g), 1);
    return q;
  }
  q.add_term(floordiv(from_lin(r), imm(c)), 1);
  return q;
}

Lin mod_lin(const Lin& l, int64_t c) {
  if (c == 1) return constant(0);
  Lin r;
  for (auto& [key, t] : l.terms) r.add_term(t.first, fmod_pos(t.second, c));
  r.c = fmod_pos(l.c, c);
  if (r.is_const()) return r;
  if (auto rr = range_of(r); rr && fdiv(rr->lo, c) == fdiv(rr->hi, c)) {
    r.c -= fdiv(rr->lo, c) * c;
    return r;
  }
  if (const ExprPtr* a = single_atom(r); a && (*a)->kind == ExprKind::Mod) {
    int64_t inner = 0;
    if (is_const((*a)->args[1], &inner) && inner > 0 && inner % c == 0)  // (x % (k*c)) % c = x % c
      return mod_lin(simplify_lin((*a)->args[0]), c);
  }
  Lin big, small;
  int64_t g = 0;
  if (split_below(r, c, big, small, g) && !small.is_const()) {
    Lin out = mod_lin(big, c / g);  // (big % c) = (big / g % (c / g)) * g
    Lin scaled;
    scaled.add(out, g);
    scaled.add(small, 1);
    return scaled;
  }
  return atom(mod(from_lin(r), imm(c)));
}

// A digit of x in a mixed radix: (x / d) % m, or x / d with no modulus (m = 0); d = 1 is
// x % m. Unravelling an index into dims writes one digit per dim; views that merge dims again
// (a reshape of a slice, a cat's pieces) leave sums of adjacent digits behind.
struct Digit {
  ExprPtr x;
  int64_t d = 1, m = 0;
};
std::optional<Digit> digit_of(const ExprPtr& e) {
  int64_t c = 0;
  if (e->kind == ExprKind::Mod && is_const(e->args[1], &c) && c > 0) {
    const ExprPtr& a = e->args[0];
    int64_t d = 0;
    if (a->kind == ExprKind::FloorDiv && is_const(a->args[1], &d) && d > 0) return Digit{a->args[0], d, c};
    return Digit{a, 1, c};
  }
  if (e->kind == ExprKind::FloorDiv && is_const(e->args[1], &c) && c > 0) return Digit{e->args[0], c, 0};
  return std::nullopt;
}

// Merges adjacent digits of one x back into one (for x >= 0):
//   (x / d % m)*k + (x / (d*m) % n)*(k*m) = (x / d % (m*n))*k
//   (x / d % m)*k + (x / (d*m))*(k*m)     = (x / d)*k
// which covers what an unravel split apart, (x / a)*a + x % a = x and (x / a % b)*a + x % a =
// x % (a*b), and the digit sums a reshape of a sliced or concatenated view leaves:
// (i / 4096)*4096 + (i / 256 % 16)*256 + (i / 64 % 4)*64 + (i / 2 % 32)*2 = (i / 2)*2.
// Repeats until nothing merges.
void merge_unravels(Lin& l) {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [key, t] : l.terms) {
      std::optional<Digit> lo = digit_of(t.first);
      const int64_t k = t.second;
      if (!lo || lo->m == 0) continue;
      std::string xs = print_expr(lo->x);
      for (auto& [key2, t2] : l.terms) {
        std::optional<Digit> hi = digit_of(t2.first);
        if (!hi || t2.second != k * lo->m || hi->d != lo->d * lo->m || print_expr(hi->x) != xs) continue;
        Lin x = simplify_lin(lo->x);
        Lin merged = lo->d == 1 ? x : div_lin(x, lo->d);
        if (hi->m != 0) merged = mod_lin(merged, lo->m * hi->m);
        ExprPtr a = t.first, b = t2.first;
        l.add_term(a, -k);
        l.add_term(b, -k * lo->m);
        l.add(merged, k);
        changed = true;
        break;
      }
      if (changed) break;
    }
  }
}

ExprPtr simplify_value(const ExprPtr& e);

Lin simplify_lin(const ExprPtr& e) {
  if (!is_index(e)) return atom(simplify_value(e));
  switch (e->kind) {
    case ExprKind::IntImm: return constant(e->i);
    case ExprKind::Add:
    case ExprKind::Sub: {
      Lin l = simplify_lin(e->args[0]);
      l.add(simplify_lin(e->args[1]), e->kind == ExprKind::Add ? 1 : -1);
      merge_unravels(l);
      return l;
    }
    case ExprKind::Mul: {
      Lin a = simplify_lin(e->args[0]), b = simplify_lin(e->args[1]);
      Lin out;
      if (a.is_const()) out.add(b, a.c);
      else if (b.is_const()) out.add(a, b.c);
      else return atom(mul(from_lin(a), from_lin(b)));
      merge_unravels(out);
      return out;
    }
    case ExprKind::FloorDiv:
    case ExprKind::Mod: {
      Lin a = simplify_lin(e->args[0]), b = simplify_lin(e->args[1]);
      if (b.is_const() && b.c > 0) return e->kind == ExprKind::FloorDiv ? div_lin(a, b.c) : mod_lin(a, b.c);
      ExprPtr x = from_lin(a), y = from_lin(b);
      return atom(e->kind == ExprKind::FloorDiv ? floordiv(x, y) : mod(x, y));
    }
    case ExprKind::Min:
    case ExprKind::Max: {
      Lin a = simplify_lin(e->args[0]), b = simplify_lin(e->args[1]);
      auto ra = range_of(a), rb = range_of(b);
      bool is_min = e->kind == ExprKind::Min;
      if (ra && rb) {
        if (ra->hi <= rb->lo) return is_min ? a : b;
        if (rb->hi <= ra->lo) return is_min ? b : a;
      }
      return atom(is_min ? min(from_lin(a), from_lin(b)) : max(from_lin(a), from_lin(b)));
    }
    default: return atom(simplify_value(e));
  }
}

ExprPtr from_lin(const Lin& l) {
  std::vector<std::pair<ExprPtr, int64_t>> terms;
  for (auto& [key, t] : l.terms) terms.push_back(t);
  // Largest strides first (p*1023 + i), positive before negative.
  std::stable_sort(terms.begin(), terms.end(), [](auto& x, auto& y) {
    if ((x.second > 0) != (y.second > 0)) return x.second > 0;
    return std::llabs(x.second) > std::llabs(y.second);
  });
  ExprPtr out;
  for (auto& [a, k] : terms) {
    int64_t mag = std::llabs(k);
    ExprPtr term = mag == 1 ? a : mul(a, imm(mag));
    if (!out) out = k > 0 ? term : mul(a, imm(k));
    else out = k > 0 ? add(out, term) : sub(out, term);
  }
  if (!out) return imm(l.c);
  if (l.c > 0) out = add(out, imm(l.c));
  if (l.c < 0) out = sub(out, imm(-l.c));
  return out;
}

// A comparison of two index values that their ranges decide, from the range of a - b (so that
// i + 1 > i is decided whatever i's range): a cat's "which input" select inside one input's
// loop, a pad's bounds check where the loop stays inside, a causal mask's i >= j where i's
// tile lies wholly below j's.
std::optional<bool> decided_comparison(const std::string& op, const ExprPtr& a, const ExprPtr& b) {
  Lin d = simplify_lin(a);
  d.add(simplify_lin(b), -1);
  std::optional<IndexRange> r = range_of(d);
  if (!r) return std::nullopt;
  auto decide = [](bool yes, bool no) -> std::optional<bool> {
    if (yes) return true;
    if (no) return false;
    return std::nullopt;
  };
  if (op == "lt") return decide(r->hi < 0, r->lo >= 0);
  if (op == "le") return decide(r->hi <= 0, r->lo > 0);
  if (op == "gt") return decide(r->lo > 0, r->hi <= 0);
  if (op == "ge") return decide(r->lo >= 0, r->hi < 0);
  if (op == "eq") return decide(r->lo == 0 && r->hi == 0, r->lo > 0 || r->hi < 0);
  if (op == "ne") return decide(r->lo > 0 || r->hi < 0, r->lo == 0 && r->hi == 0);
  return std::nullopt;
}

bool is_bool_const(const ExprPtr& e, bool v) { return e->kind == ExprKind::IntImm && e->dtype == DType::Bool && (e->i != 0) == v; }

ExprPtr simplify_value(const ExprPtr& e) {
  if (is_index(e) && e->kind != ExprKind::Load && e->kind != ExprKind::Call && e->kind != ExprKind::Var &&
      e->kind != ExprKind::Select && e->kind != ExprKind::Cast)
    return from_lin(simplify_lin(e));
  std::vector<ExprPtr> args;
  for (auto& a : e->args) args.push_back(is_index(a) ? from_lin(simplify_lin(a)) : simplify_value(a));
  ExprPtr out = with_args(*e, std::move(args));
  if (out->kind == ExprKind::Cast) {
    const ExprPtr& x = out->args[0];
    bool narrow_float = out->dtype == DType::F16 || out->dtype == DType::BF16;
    if (x->kind == ExprKind::FloatImm && is_floating(out->dtype) && !narrow_float &&
        (out->dtype == DType::F64 || static_cast<double>(static_cast<float>(x->f)) == x->f))
      return imm(out->dtype, x->f);
    if (x->kind == ExprKind::IntImm && out->dtype == DType::Bool) return imm(DType::Bool, x->i != 0);
    if (x->kind == ExprKind::IntImm && (out->dtype == DType::I64 || (out->dtype == DType::F64 && std::llabs(x->i) < (1LL << 53)) ||
                                        (out->dtype == DType::F32 && std::llabs(x->i) < (1LL << 24))))
      return imm(out->dtype, static_cast<double>(x->i));
  }
  if (out->kind == ExprKind::Call && out->args.size() == 2 && is_index(out->args[0]) && is_index(out->args[1]))
    if (std::optional<bool> v = decided_comparison(out->name, out->args[0], out->args[1])) return imm(DType::Bool, *v);
  if (out->kind == ExprKind::Call && out->args.size() == 2 && (out->name == "logical_and" || out->name == "logical_or")) {
    const bool is_and = out->name == "logical_and";
    for (int k = 0; k < 2; ++k) {
      const ExprPtr& x = out->args[static_cast<size_t>(k)];
      const ExprPtr& other = out->args[static_cast<size_t>(1 - k)];
      if (is_bool_const(x, !is_and)) return imm(DType::Bool, !is_and);          // false && y, true || y
      if (is_bool_const(x, is_and) && other->dtype == DType::Bool) return other;  // true && y, false || y
    }
  }
  if (out->kind == ExprKind::Select && out->args[0]->kind == ExprKind::IntImm)
    return out->args[0]->i ? out->args[1] : out->args[2];
  return out;
}

}  // namespace

std::optional<IndexRange> index_range(const ExprPtr& e) {
  if (!is_index(e)) return std::nullopt;
  if (e->kind == ExprKind::Add || e->kind == ExprKind::Sub) return range_of(simplify_lin(e));
  return atom_range(e);
}

ExprPtr simplify(const ExprPtr& e) { return is_index(e) ? from_lin(simplify_lin(e)) : simplify_value(e); }

StmtPtr simplify(const StmtPtr& s) {
  auto c = std::make_shared<Stmt>(*s);
  for (auto& e : c->exprs) e = simplify(e);
  for (auto& b : c->body) b = simplify(b);
  return c;
}

}  // namespace kiln::codegen
