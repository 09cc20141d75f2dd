#pragma once
// The dispatcher: every op call on Tensors goes through dispatch(op, inputs, attrs).
// Like PyTorch's c10 dispatcher, it computes the call's key set -- the union of its inputs'
// keys plus `Tracing` while a trace is active on this thread (so creation ops with no inputs
// are recorded too) -- and runs the kernel registered for the highest-priority key:
//   Autocast -> cast the inputs as the op's autocast row says, then dispatch below itself
//              (frontend/autocast.h; only inside an Autocast scope)
//   Tracing -> record a node into the graph being built (frontend/trace_context.h)
//   Device  -> compile the op for the tensors' device (a GPU, or any device with memory of its
//              own) and run it there (frontend/device_kernel.h)
//   CPU     -> run the op's reference kernel eagerly (frontend/cpu_kernel.h)
// New features are new keys plus register_kernel().
// With KILN_SHOW_DISPATCH_TRACE=1 each decision is printed to stderr as one line:
//   [dispatch] add keys={Tracing,CPU} -> tracing kernel (%add_3 : f32[8,64])
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attr.h"
#include "ir/op_registry.h"

namespace kiln {

// In increasing priority: a later key's kernel runs first. Autocast is above Tracing, so that
// a traced graph records the casts it inserts.
enum class DispatchKey : uint8_t { CPU, Device, Tracing, Autocast };
inline constexpr int kNumDispatchKeys = 4;
std::string_view dispatch_key_name(DispatchKey k);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr DispatchKeySet(DispatchKey k) : bits_(uint32_t{1} << static_cast<int>(k)) {}  // NOLINT
  constexpr bool has(DispatchKey k) const { return bits_ & DispatchKeySet(k).bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return from_bits(bits_ | o.bits_); }
  DispatchKeySet& operator|=(DispatchKeySet o) { return *this = *this | o; }
  constexpr bool operator==(const DispatchKeySet&) const = default;
  DispatchKey highest() const;  // the set must not be empty
  std::string str() const;      // "{Tracing,CPU}": highest priority first

 private:
  static constexpr DispatchKeySet from_bits(uint32_t b) {
    DispatchKeySet s;
    s.bits_ = b;
    return s;
  }
  uint32_t bits_ = 0;
};

// A kernel runs one op on the dispatched inputs and returns its results.
using DispatchKernel = std::function<std::vector<Tensor>(Op, std::span<const Tensor>, const Attrs&)>;
struct KernelEntry {
  DispatchKernel fn;
  std::string description;  // for the dispatch trace: "tracing kernel"
};
// Replaces the kernel of a key (the built-in keys come registered).
void register_kernel(DispatchKey key, DispatchKernel fn, std::string description);

// The key set of a call: its inputs' keys, plus Tracing while a trace is active, plus
// Autocast inside an Autocast scope.
DispatchKeySet compute_key_set(std::span<const Tensor> inputs);

// Runs `op` through the kernel of the highest-priority key. Attributes are checked against
// the op's schema; errors are kiln::Error naming the op and the input shapes.
std::vector<Tensor> dispatch(Op op, std::span<const Tensor> inputs, const Attrs& attrs = {});

// The dispatch trace: on when KILN_SHOW_DISPATCH_TRACE=1 (read once, at the first dispatch);
// set_dispatch_trace overrides it (tests). Lines go to stderr, or to the sink if one is set.
void set_dispatch_trace(bool on);
bool dispatch_trace_enabled();
void set_dispatch_trace_sink(std::function<void(const std::string&)> sink);  // empty: stderr
// A line of the dispatch trace from a kernel (the Autocast kernel's decisions).
void dispatch_trace_line(const std::string& line);

}  // namespace kiln
