// The Autocast scope and the Autocast key's kernel (frontend/autocast.h); the table is in
// frontend/autocast_policy.cpp.
#include "frontend/autocast.h"

#include <fmt/format.h>

#include "frontend/dispatcher.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {
namespace {

thread_local std::optional<DType> g_autocast;
// Set while the Autocast kernel dispatches below itself (its casts and the op).
thread_local bool g_below_autocast = false;

struct BelowAutocast {
  bool saved = g_below_autocast;
  BelowAutocast() { g_below_autocast = true; }
  ~BelowAutocast() { g_below_autocast = saved; }
};

}  // namespace

std::string_view autocast_policy_name(AutocastPolicy p) {
  switch (p) {
    case AutocastPolicy::None: return "none";
    case AutocastPolicy::LowerPrecision: return "lower precision";
    case AutocastPolicy::Float32: return "f32";
    case AutocastPolicy::Promote: return "promote";
  }
  return "?";
}

Autocast::Autocast(std::optional<DType> dtype) : saved_(g_autocast) {
  if (dtype && *dtype != DType::BF16 && *dtype != DType::F16)
    fail("autocast runs in bf16 or f16, not {}: matmul-like ops are cast to it", dtype_name(*dtype));
  g_autocast = dtype;
}
Autocast::~Autocast() { g_autocast = saved_; }

std::optional<DType> autocast_dtype() { return g_autocast; }
std::string autocast_name(std::optional<DType> dtype) { return dtype ? std::string(dtype_name(*dtype)) : std::string("off"); }
bool autocast_key_active() { return g_autocast.has_value() && !g_below_autocast; }

std::vector<Tensor> autocast_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  const AutocastPolicy policy = autocast_policy(op);
  const DType low = *g_autocast;
  // The dtype each float input goes to, or none.
  std::optional<DType> target;
  switch (policy) {
    case AutocastPolicy::None: break;
    case AutocastPolicy::LowerPrecision: target = low; break;
    case AutocastPolicy::Float32: target = DType::F32; break;
    case AutocastPolicy::Promote: {
      std::optional<DType> widest;
      bool mixed = false;
      for (const Tensor& t : inputs) {
        if (!is_floating(t.dtype())) continue;
        if (widest && *widest != t.dtype()) mixed = true;
        widest = widest ? promote_types(*widest, t.dtype()) : t.dtype();
      }
      if (mixed) target = widest;
      break;
    }
  }
  auto casts_it = [&](const Tensor& t) {
    if (!target || !is_floating(t.dtype()) || t.dtype() == *target) return false;
    // Lower precision casts f32 only (f64 stays f64, as PyTorch's autocast leaves it); f32
    // widens only 16-bit floats.
    if (policy == AutocastPolicy::LowerPrecision) return t.dtype() == DType::F32;
    if (policy == AutocastPolicy::Float32) return t.dtype() == DType::BF16 || t.dtype() == DType::F16;
    return true;
  };
  // The decision first (before the lines of the casts it makes), then the casts and the op,
  // dispatched below the Autocast key.
  if (dispatch_trace_enabled() && policy != AutocastPolicy::None) {
    std::string decisions;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (casts_it(inputs[i]))
        decisions += fmt::format("{}input {} {} -> {}", decisions.empty() ? "" : ", ", i, dtype_name(inputs[i].dtype()), dtype_name(*target));
    dispatch_trace_line(fmt::format("[autocast] {}: {} ({}): {}", op_name(op), autocast_policy_name(policy), dtype_name(low),
                                    decisions.empty() ? "no casts" : decisions));
  }
  BelowAutocast below;
  std::vector<Tensor> cast;
  for (const Tensor& t : inputs) cast.push_back(casts_it(t) ? to(t, *target) : t);
  return dispatch(op, cast, attrs);
}

}  // namespace kiln
