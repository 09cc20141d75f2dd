#pragma once
// Autocast: mixed precision as a dispatcher key, as PyTorch's Autocast keys are. Inside an
// `Autocast scope(DType::BF16)` (or F16) every op call goes first to the Autocast kernel,
// which casts the call's inputs as the op's row of one table says and dispatches the op again
// below itself:
//   LowerPrecision  matmul-like ops (matmul, bmm, linear, addmm): f32 inputs -> the scope's
//                   dtype, so GEMMs run in 16 bits (with f32 accumulation) on tensor cores;
//   Float32         precision-sensitive ops (reductions, softmax, log_softmax, layer_norm, the
//                   losses, exp/log/pow): 16-bit inputs -> f32;
//   Promote         ops that combine inputs (add, mul, where, cat, ...) whose float inputs
//                   differ: every float input -> the widest of them;
//   (no row)        the op runs on its inputs as they are.
// Autocast sits above Tracing: the casts it inserts are ops like any other, so a traced graph
// records them (`to` nodes) and autograd differentiates through them. Parameters stay f32
// master weights: a cast is a new value, the parameter itself is never rewritten, and the
// gradient of a cast flows back to the parameter's own dtype.
//
// Every decision is visible: with KILN_SHOW_DISPATCH_TRACE=1 the Autocast kernel prints
//   [autocast] matmul: lower precision (bf16): input 0 f32 -> bf16, input 1 f32 -> bf16
// before the lines of the casts and the op it dispatches.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attr.h"
#include "ir/dtype.h"
#include "ir/op_registry.h"

namespace kiln {

enum class AutocastPolicy : uint8_t { None, LowerPrecision, Float32, Promote };
std::string_view autocast_policy_name(AutocastPolicy p);

// The table (frontend/autocast_policy.cpp): the op's row, or None.
AutocastPolicy autocast_policy(Op op);

// Mixed precision on this thread while the scope lives. Scopes nest; the innermost wins, and
// `Autocast off(std::nullopt)` turns it off inside an outer one. The dtype must be bf16 or f16.
class Autocast {
 public:
  explicit Autocast(std::optional<DType> dtype);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> saved_;
};

// The dtype of this thread's innermost Autocast scope, if one is on.
std::optional<DType> autocast_dtype();
// "bf16", "f16", or "off" (recompile reasons).
std::string autocast_name(std::optional<DType> dtype);
// Whether the dispatcher adds the Autocast key (a scope is on, and the Autocast kernel is not
// already dispatching below itself).
bool autocast_key_active();

// The Autocast key's kernel.
std::vector<Tensor> autocast_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs);

}  // namespace kiln
