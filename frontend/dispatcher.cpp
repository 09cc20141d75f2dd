#include "frontend/dispatcher.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "frontend/autocast.h"
#include "frontend/cpu_kernel.h"
#include "frontend/device_kernel.h"
#include "frontend/trace_context.h"
#include "ir/error.h"

namespace kiln {

std::string_view dispatch_key_name(DispatchKey k) {
  switch (k) {
    case DispatchKey::CPU: return "CPU";
    case DispatchKey::Device: return "Device";
    case DispatchKey::Tracing: return "Tracing";
    case DispatchKey::Autocast: return "Autocast";
  }
  return "?";
}

DispatchKey DispatchKeySet::highest() const {
  KILN_INTERNAL_ASSERT(!empty(), "a dispatched call has at least one key");
  for (int k = kNumDispatchKeys - 1; k >= 0; --k)
    if (has(static_cast<DispatchKey>(k))) return static_cast<DispatchKey>(k);
  return DispatchKey::CPU;
}

std::string DispatchKeySet::str() const {
  std::string out = "{";
  for (int k = kNumDispatchKeys - 1; k >= 0; --k) {
    if (!has(static_cast<DispatchKey>(k))) continue;
    if (out.size() > 1) out += ",";
    out += dispatch_key_name(static_cast<DispatchKey>(k));
  }
  return out + "}";
}

namespace {

// The kernel table, indexed by key. Built-in kernels are installed here directly rather
// than by static registration objects, which a static library's linker may drop.
std::array<KernelEntry, kNumDispatchKeys>& kernel_table() {
  static std::array<KernelEntry, kNumDispatchKeys> table = [] {
    std::array<KernelEntry, kNumDispatchKeys> t;
    t[static_cast<int>(DispatchKey::CPU)] = {cpu_kernel, "cpu kernel (reference, or compiled when large)"};
    t[static_cast<int>(DispatchKey::Device)] = {device_kernel, "device kernel (the op compiled for the tensors' device)"};
    t[static_cast<int>(DispatchKey::Tracing)] = {TraceContext::tracing_kernel, "tracing kernel"};
    t[static_cast<int>(DispatchKey::Autocast)] = {autocast_kernel, "autocast kernel"};
    return t;
  }();
  return table;
}

struct TraceSettings {
  std::atomic<int> forced{-1};  // -1: follow the environment
  bool from_env = [] {
    const char* v = std::getenv("KILN_SHOW_DISPATCH_TRACE");
    return v && std::string_view(v) != "" && std::string_view(v) != "0";
  }();
  std::function<void(const std::string&)> sink;
  std::mutex mu;
};
TraceSettings& trace_settings() {
  static TraceSettings s;
  return s;
}

void emit_trace_line(const std::string& line) {
  auto& s = trace_settings();
  std::lock_guard lock(s.mu);
  if (s.sink) s.sink(line);
  else std::cerr << line << "\n";
}

// "%add_3 : f32[8,64]" for each traced result.
std::string describe_results(const std::vector<Tensor>& results) {
  std::string out;
  for (const Tensor& t : results) {
    if (!t.is_traced()) continue;
    out += (out.empty() ? "" : ", ") + ("%" + t.impl()->value.name() + " : " + t.meta().str());
  }
  return out.empty() ? "" : " (" + out + ")";
}

}  // namespace

void register_kernel(DispatchKey key, DispatchKernel fn, std::string description) {
  kernel_table()[static_cast<int>(key)] = {std::move(fn), std::move(description)};
}

void dispatch_trace_line(const std::string& line) { emit_trace_line(line); }

void set_dispatch_trace(bool on) { trace_settings().forced = on ? 1 : 0; }
bool dispatch_trace_enabled() {
  auto& s = trace_settings();
  return s.forced >= 0 ? s.forced == 1 : s.from_env;
}
void set_dispatch_trace_sink(std::function<void(const std::string&)> sink) {
  auto& s = trace_settings();
  std::lock_guard lock(s.mu);
  s.sink = std::move(sink);
}

DispatchKeySet compute_key_set(std::span<const Tensor> inputs) {
  DispatchKeySet keys;
  for (const Tensor& t : inputs) {
    if (!t.defined()) fail("an undefined tensor was passed to an op");
    keys |= t.key_set();
  }
  if (TraceContext::current()) keys |= DispatchKeySet(DispatchKey::Tracing) | DispatchKey::CPU;
  if (keys.empty()) keys = DispatchKey::CPU;  // creation ops outside a trace run eagerly
  if (autocast_key_active()) keys |= DispatchKey::Autocast;
  return keys;
}

std::vector<Tensor> dispatch(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  DispatchKeySet keys = compute_key_set(inputs);
  const KernelEntry& entry = kernel_table()[static_cast<int>(keys.highest())];
  KILN_INTERNAL_ASSERT(entry.fn, "every dispatch key has a kernel");
  bool show = dispatch_trace_enabled();
  std::string head = show ? fmt::format("[dispatch] {} keys={} -> {}", op_name(op), keys.str(), entry.description) : "";
  try {
    std::vector<Tensor> out = entry.fn(op, inputs, attrs);
    if (show) emit_trace_line(head + describe_results(out));
    return out;
  } catch (const Error&) {
    if (show) emit_trace_line(head + " (failed)");
    throw;
  }
}

}  // namespace kiln
