#pragma once
// Guards of kiln::compile (frontend/compile.h): what a compiled graph's trace depended on,
// per tensor and in the global state, checked at every call before the graph is reused
// (Dynamo's guards); and the one cache policy every compiled callable shares (GuardedCache).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

struct TensorGuard {
  std::string what;  // "input 0", "parameter 'fc.weight'": how a failure names the tensor
  TensorMeta meta;   // dtype, shape, strides, device
  bool requires_grad = false;
};

TensorGuard guard_of(const Tensor& t, std::string what);

// Why `t` fails the guard ("input 0: shape [64,64] -> [128,64]"), or nothing when it passes.
std::optional<std::string> guard_failure(const TensorGuard& guard, const Tensor& t);

// The first failure over a list of tensors, in order; nothing when all pass.
std::optional<std::string> first_guard_failure(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors);
// How far the tensors get through the guards before the first failure (each tensor's checks
// count: dtype, shape, device, strides, requires_grad); says which cache entry a call came
// nearest to, whose failure is the one worth reporting.
size_t guard_match_score(const std::vector<TensorGuard>& guards, const std::vector<Tensor>& tensors);

// The global state a trace depends on besides its tensors: grad mode (a function's trace:
// gradients or not) and the autocast scope (its casts are in the graph).
struct TraceState {
  bool grad_mode = true;
  std::optional<DType> autocast;
  static TraceState current();  // this thread's
};

// What one entry of a compiled callable was specialized on.
struct EntryGuards {
  std::vector<TensorGuard> tensors;  // the inputs, or a training step's batch
  TraceState state;
};

struct CompileStats;

// The cache policy of kiln::compile's callables (a function and a training step): entries are
// looked up newest first (the one compiled for the latest change is the likeliest match); a
// miss names the nearest entry's failing guard (the entry whose guards held longest, newest
// among equals: a user who changed one thing expects that thing named), is counted and logged
// (KILN_LOGS=recompiles), and past the size limit the callable stops compiling, saying so once.
class GuardedCache {
 public:
  // `what` names the callable in messages ("'mlp'", "training step 'train_step'"); `past_limit`
  // says what its calls do past the limit ("runs eagerly"); `checks_grad_mode`: whether an
  // entry holds only in the grad mode it was traced in (a training step always differentiates).
  GuardedCache(std::string what, std::string past_limit, int limit, bool checks_grad_mode);

  // The newest of `entries` (oldest first) whose guards hold for `tensors` in `state` and that
  // `also` accepts (by index; when given); -1 when none.
  int find(const std::vector<const EntryGuards*>& entries, const std::vector<Tensor>& tensors, const TraceState& state,
           const std::function<bool(size_t)>& also = {}) const;

  // A call that found no entry, with `entries` non-empty: why the nearest missed (`extra_why`
  // adds reasons past the tensors' guards, by index: a captured tensor's). Returns true when the
  // cache is full (the callable stops compiling: warned once); else counts the recompile in
  // `stats` and logs it.
  bool miss(const std::vector<const EntryGuards*>& entries, const std::vector<Tensor>& tensors, const TraceState& state,
            CompileStats& stats, const std::function<std::optional<std::string>(size_t)>& extra_why = {});

  bool full() const { return full_; }

 private:
  std::optional<std::string> state_miss(const TraceState& entry, const TraceState& now) const;
  std::string what_, past_limit_;
  int limit_;
  bool checks_grad_mode_;
  bool full_ = false;
};

}  // namespace kiln
