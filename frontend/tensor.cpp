#include "frontend/tensor.h"

#include "frontend/dispatcher.h"
#include "frontend/trace_context.h"
#include "ir/error.h"
#include "ir/random.h"

namespace kiln {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) fail("use of an undefined tensor");
  return *impl;
}
}  // namespace

Tensor::Tensor(HostTensor data, std::string name) : impl_(std::make_shared<TensorImpl>()) {
  if (!data.defined()) fail("a tensor needs defined data");
  impl_->meta = data.meta();
  impl_->data = std::move(data);
  impl_->name = std::move(name);
}

const TensorMeta& Tensor::meta() const { return checked(impl_).meta; }

int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim())]; }

const HostTensor& Tensor::data() const {
  const TensorImpl& impl = checked(impl_);
  if (impl.trace_id != 0)
    fail("tensor {} is being traced and has no values; data() works on eager tensors only", str());
  if (impl.device_data)
    fail("tensor {} is on {}: data() gives host memory; copy it with .cpu() (or host_data()) first", str(),
         impl.meta.device.str());
  return impl.data;
}

namespace {
// item() / bool() of a traced tensor: a graph break under kiln::compile, an error under kiln::trace.
void read_traced_value(const Tensor& t, const std::source_location* where, std::string_view what) {
  TraceContext* ctx = TraceContext::current();
  if (ctx && ctx->id() == t.impl()->trace_id && ctx->break_handler()) {
    ctx->break_handler()(t, where, what);
    KILN_INTERNAL_ASSERT(!t.is_traced(), "a graph break leaves the tensor it read concrete");
    return;
  }
  std::string at = where ? fmt::format(" at {}:{}", where->file_name(), where->line()) : "";
  if (ctx && ctx->id() == t.impl()->trace_id && !ctx->one_graph_because().empty())
    fail("{} reads the value of traced tensor {}{}: {}", what, t.str(), at, ctx->one_graph_because());
  fail("{} reads the value of traced tensor {}{}: kiln::trace records one graph, whose tensors have no values "
       "yet. kiln::compile (frontend/compile.h) breaks the graph there instead: it runs the graph so far, reads "
       "the value and traces the rest",
       what, t.str(), at);
}
}  // namespace

double Tensor::item(std::source_location where) const {
  if (numel() != 1) fail("item() needs a tensor with one element, got shape {}", shape_str(shape()));
  if (is_traced()) read_traced_value(*this, &where, "item()");
  return host_data().get(0);
}

bool Tensor::is_nonzero(std::source_location where) const {
  if (numel() != 1)
    fail("the truth value of a tensor with {} elements (shape {}) is ambiguous: reduce it to one element first (e.g. (t > 0).sum() > 0)", numel(),
         shape_str(shape()));
  if (is_traced()) read_traced_value(*this, &where, "is_nonzero()");
  return host_data().get(0) != 0;
}

Tensor::operator bool() const {
  if (numel() != 1)
    fail("the truth value of a tensor with {} elements (shape {}) is ambiguous: reduce it to one element first (e.g. (t > 0).sum() > 0)", numel(),
         shape_str(shape()));
  // A conversion operator cannot take the caller's location; is_nonzero() can.
  if (is_traced()) read_traced_value(*this, nullptr, "bool()");
  return host_data().get(0) != 0;
}

bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  const TensorImpl& impl = checked(impl_);
  if (on && !is_floating(impl.meta.dtype))
    fail("requires_grad_(): only floating-point tensors can require gradients, {} is {}", str(),
         dtype_name(impl.meta.dtype));
  if (impl.trace_id) fail("requires_grad_() on traced tensor {}: mark leaves before calling the function", str());
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(checked(impl_).grad); }

void Tensor::zero_grad() { checked(impl_), impl_->grad.reset(); }

const std::string& Tensor::name() const { return checked(impl_).name; }

Tensor& Tensor::set_name(std::string name) {
  checked(impl_);
  impl_->name = std::move(name);
  return *this;
}

DispatchKeySet Tensor::key_set() const {
  const TensorImpl& impl = checked(impl_);
  DispatchKeySet keys = impl.meta.device.kind == Device::Kind::CPU ? DispatchKey::CPU : DispatchKey::Device;
  if (impl.trace_id != 0) keys |= DispatchKey::Tracing;
  return keys;
}

std::string Tensor::str() const {
  if (!impl_) return "(undefined)";
  std::string s = impl_->meta.str();
  if (!impl_->name.empty()) s += " '" + impl_->name + "'";
  if (!impl_->trace_id) return s + " (eager)";
  // The value's node lives in its trace's graph, which may be gone once the trace has ended.
  TraceContext* ctx = TraceContext::current();
  if (ctx && ctx->id() == impl_->trace_id) return s + " (traced %" + impl_->value.name() + ")";
  return s + " (traced by an ended trace)";
}

// ---- factories

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != numel(shape))
    fail("a tensor of shape {} needs {} values, got {}", shape_str(shape), numel(shape), values.size());
  return Tensor(HostTensor::from_doubles(dtype, shape, values));
}

Tensor tensor_of_ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != numel(shape))
    fail("a tensor of shape {} needs {} values, got {}", shape_str(shape), numel(shape), values.size());
  return Tensor(HostTensor::from_ints(dtype, shape, values));
}

Tensor scalar_tensor(Scalar value, std::optional<DType> dtype) {
  DType dt = dtype.value_or(value.is_floating() ? kDefaultFloat : value.is_bool() ? DType::Bool : DType::I64);
  if (std::holds_alternative<int64_t>(value.attr()) && !is_floating(dt)) {
    int64_t v = std::get<int64_t>(value.attr());
    return Tensor(HostTensor::from_ints(dt, {}, std::span<const int64_t>(&v, 1)));
  }
  return Tensor(HostTensor::scalar(dt, value.to_double()));
}

namespace {
template <typename Gen>
Tensor random_fill(const Shape& shape, DType dtype, const char* what, Gen gen) {
  if (!is_floating(dtype)) fail("{} needs a floating-point dtype, got {}", what, dtype_name(dtype));
  HostTensor t = HostTensor::empty(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, gen(static_cast<uint64_t>(i)));
  return Tensor(std::move(t));
}
}  // namespace

Tensor randn(const Shape& shape, uint64_t seed, DType dtype) {
  return random_fill(shape, dtype, "randn", [&](uint64_t i) { return random_normal(seed, i); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, uint64_t seed, DType dtype) {
  if (high <= low) fail("randint needs low < high, got [{}, {})", low, high);
  if (!is_integral(dtype)) fail("randint needs an integer dtype, got {}", dtype_name(dtype));
  HostTensor t = HostTensor::empty(dtype, shape);
  uint64_t range = static_cast<uint64_t>(high - low);
  for (int64_t i = 0; i < t.numel(); ++i) {
    // 64 random bits from two counters, so the modulo's bias is negligible for any range.
    uint64_t bits = (uint64_t{random_bits(seed, 2 * i)} << 32) | random_bits(seed, 2 * i + 1);
    t.set_int(i, low + static_cast<int64_t>(bits % range));
  }
  return Tensor(std::move(t));
}

}  // namespace kiln
