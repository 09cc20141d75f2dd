#include "frontend/guards.h"

#include <fmt/format.h>

#include "frontend/autocast.h"
#include "frontend/compile.h"
#include "ir/log.h"

namespace kiln {

namespace {
std::string strides_str(const Strides& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + ")";
}
}  // namespace

TensorGuard guard_of(const Tensor& t, std::string what) { return {std::move(what), t.meta(), t.requires_grad()}; }

namespace {
// The checks of one tensor, in order: the first failing one's message, and how many passed.
std::optional<std::string> check(const TensorGuard& g, const Tensor& t, int* passed) {
  *passed = 0;
  if (!t.defined()) return fmt::format("{}: undefined", g.what);
  const TensorMeta& m = t.meta();
  if (m.dtype != g.meta.dtype)
    return fmt::format("{}: dtype {} -> {}", g.what, dtype_name(g.meta.dtype), dtype_name(m.dtype));
  ++*passed;
  if (m.shape != g.meta.shape)
    return fmt::format("{}: shape {} -> {}", g.what, shape_str(g.meta.shape), shape_str(m.shape));
  ++*passed;
  if (m.device != g.meta.device) return fmt::format("{}: device {} -> {}", g.what, g.meta.device.str(), m.device.str());
  ++*passed;
  // Strides matter only where a dimension has more than one element (PyTorch's contiguity ignores the rest).
  for (size_t d = 0; d < m.shape.size(); ++d)
    if (m.shape[d] > 1 && m.strides[d] != g.meta.strides[d])
      return fmt::format("{}: strides {} -> {}{}", g.what, strides_str(g.meta.strides), strides_str(m.strides),
                         m.is_contiguous() ? " (now contiguous)" : " (now not contiguous)");
  ++*passed;
  if (t.requires_grad() != g.requires_grad)
    return fmt::format("{}: requires_grad {} -> {}", g.what, g.requires_grad, t.requires_grad());
  ++*passed;
  return std::nullopt;
}
}  // namespace

std::optional<std::string> guard_failure(const TensorGuard& g, const Tensor& t) {
  int passed = 0;
  return check(g, t, &passed);
}

std::optional<std::string> first_guard_failure(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors) {
  if (guards.size() != tensors.size())
    return fmt::format("the number of inputs: {} -> {}", guards.size(), tensors.size());
  for (size_t i = 0; i < guards.size(); ++i)
    if (auto why = guard_failure(guards[i], tensors[i])) return why;
  return std::nullopt;
}

size_t guard_match_score(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors) {
  if (guards.size() != tensors.size()) return 0;
  size_t score = 0;
  for (size_t i = 0; i < guards.size(); ++i) {
    int passed = 0;
    bool failed = check(guards[i], tensors[i], &passed).has_value();
    score += static_cast<size_t>(passed);
    if (failed) break;
  }
  return score;
}

TraceState TraceState::current() { return TraceState{grad_enabled(), autocast_dtype()}; }

GuardedCache::GuardedCache(std::string what, std::string past_limit, int limit, bool checks_grad_mode)
    : what_(std::move(what)), past_limit_(std::move(past_limit)), limit_(limit), checks_grad_mode_(checks_grad_mode) {}

std::optional<std::string> GuardedCache::state_miss(const TraceState& e, const TraceState& now) const {
  if (checks_grad_mode_ && e.grad_mode != now.grad_mode)
    return fmt::format("grad mode {} -> {}", e.grad_mode ? "on" : "off", now.grad_mode ? "on" : "off");
  if (e.autocast != now.autocast) return fmt::format("autocast {} -> {}", autocast_name(e.autocast), autocast_name(now.autocast));
  return std::nullopt;
}

int GuardedCache::find(const std::vector<const EntryGuards*>& entries, const std::vector<Tensor>& tensors, const TraceState& state,
                       const std::function<bool(size_t)>& also) const {
  for (size_t k = entries.size(); k-- > 0;) {
    const EntryGuards& e = *entries[k];
    if (state_miss(e.state, state) || first_guard_failure(e.tensors, tensors)) continue;
    if (also && !also(k)) continue;
    return static_cast<int>(k);
  }
  return -1;
}

bool GuardedCache::miss(const std::vector<const EntryGuards*>& entries, const std::vector<Tensor>& tensors, const TraceState& state,
                        CompileStats& stats, const std::function<std::optional<std::string>(size_t)>& extra_why) {
  size_t nearest = entries.size() - 1, best = 0;
  for (size_t k = entries.size(); k-- > 0;)
    if (size_t n = guard_match_score(entries[k]->tensors, tensors); n > best && !state_miss(entries[k]->state, state)) {
      best = n;
      nearest = k;
    }
  std::string why = state_miss(entries[nearest]->state, state)
                        .value_or(first_guard_failure(entries[nearest]->tensors, tensors)
                                      .value_or(extra_why ? extra_why(nearest).value_or("") : ""));
  if (static_cast<int>(entries.size()) >= limit_) {
    if (!full_)
      fmt::print(stderr, "kiln: warning: {} was compiled {} times (cache_size_limit) and {} from now on; the last guard that failed: {}\n",
                 what_, entries.size(), past_limit_, why);
    full_ = true;
    return true;
  }
  ++stats.recompiles;
  stats.recompile_reasons.push_back(why);
  if (log_enabled("recompiles"))
    log_line("recompiles", fmt::format("{}: recompiling (compile {} of at most {}): {}", what_, entries.size() + 1, limit_, why));
  return false;
}

}  // namespace kiln
