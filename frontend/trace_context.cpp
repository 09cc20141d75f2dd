#include "frontend/trace_context.h"

#include <atomic>
#include <cctype>

#include "ir/error.h"

namespace kiln {

namespace {
thread_local TraceContext* g_current = nullptr;
std::atomic<uint64_t> g_next_trace_id{1};

// A graph input's type: the tensor's dtype and shape, contiguous, with no device (graphs are
// device-neutral; compiling one for a device places it).
TensorMeta graph_meta(const TensorMeta& m) { return TensorMeta(m.dtype, m.shape); }

std::string shapes_str(std::span<const Value> values) {
  std::string out;
  for (const Value& v : values) out += (out.empty() ? "" : ", ") + v.meta().str();
  return out;
}
}  // namespace

std::string sanitize_value_name(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

TraceContext::TraceContext(std::string graph_name) : id_(g_next_trace_id++), graph_(std::move(graph_name)) {}

TraceContext* TraceContext::current() { return g_current; }

ActiveTrace::ActiveTrace(TraceContext& ctx) {
  if (g_current)
    fail("nested traces are not supported: a trace of graph '{}' is already active on this thread",
         g_current->graph().name());
  g_current = &ctx;
}

ActiveTrace::~ActiveTrace() { g_current = nullptr; }

void TraceContext::switch_current(TraceContext& next) {
  KILN_INTERNAL_ASSERT(g_current, "a trace continues in a new graph only while one is active");
  g_current = &next;
}

std::vector<std::shared_ptr<TensorImpl>> TraceContext::live_traced_tensors() const {
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& w : traced_)
    if (auto impl = w.lock(); impl && impl->trace_id == id_) live.push_back(std::move(impl));
  return live;
}

Tensor TraceContext::add_input(const Tensor& example, const std::string& name) {
  Value v = graph_.add_input(graph_.fresh_name(name), graph_meta(example.meta()));
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = v.meta();
  impl->value = v;
  impl->trace_id = id_;
  impl->name = example.name();
  impl->requires_grad = example.impl()->requires_grad;
  traced_.push_back(impl);
  lifted_[example.impl()] = v;
  keep_alive_.push_back(example.impl_ptr());
  return Tensor(std::move(impl));
}

Value TraceContext::value_of(const Tensor& t) {
  if (!t.defined()) fail("an undefined tensor was used while tracing graph '{}'", graph_.name());
  const TensorImpl* impl = t.impl();
  if (impl->trace_id == id_) return impl->value;
  if (impl->trace_id != 0)
    fail("tensor {} comes from another trace (traced tensors are only valid inside their trace)", t.str());
  if (auto it = lifted_.find(impl); it != lifted_.end()) return it->second;
  // A concrete tensor the function uses: lift it into a graph input and keep its value.
  std::string base = impl->name.empty() ? "const" : sanitize_value_name(impl->name);
  Value v = graph_.add_input(graph_.fresh_name(base), graph_meta(impl->meta));
  lifted_[impl] = v;
  keep_alive_.push_back(t.impl_ptr());
  params_.push_back(impl->device_data ? t.host_data() : impl->data.contiguous());
  param_tensors_.push_back(t);
  param_names_.push_back(v.name());
  param_paths_.push_back(impl->name);
  return v;
}

void TraceContext::write(const Tensor& t, Value v) {
  TensorImpl* impl = t.impl();
  if (impl->trace_id == id_) {
    impl->value = v;
    return;
  }
  value_of(t);  // lifted, so that the graph has the tensor's value before the write
  lifted_[impl] = v;
  size_t index = 0;
  while (index < param_tensors_.size() && param_tensors_[index].impl() != impl) ++index;
  // An example input the function captured itself (add_input mapped it): later reads see the
  // new value; the caller's tensor is not written (a traced input is a value, not a buffer).
  if (index == param_tensors_.size()) return;
  for (auto& [i, last] : writes_)
    if (i == index) {
      last = v;
      return;
    }
  writes_.emplace_back(index, v);
}

std::vector<Tensor> TraceContext::tracing_kernel(Op op, std::span<const Tensor> inputs, const Attrs& attrs) {
  TraceContext* ctx = current();
  if (!ctx) {
    for (const Tensor& t : inputs)
      if (t.is_traced())
        fail("{}: tensor {} was traced by a trace that has ended; traced tensors only live inside kiln::trace",
             op_name(op), t.str());
  }
  KILN_INTERNAL_ASSERT(ctx, "the Tracing key is only dispatched with a traced input or an active trace");
  std::vector<Value> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs) values.push_back(ctx->value_of(t));

  // Name the node first so that an error can say which node failed to type-check.
  std::string name = ctx->graph_.fresh_name(std::string(op_short_name(op)));
  Node* node = nullptr;
  try {
    node = ctx->graph_.add_node(op, values, attrs, name);
  } catch (const Error& e) {
    std::string shapes = shapes_str(values);
    std::string msg = e.what();
    std::string prefix = fmt::format("{}({}): ", op_name(op), shapes);
    if (msg.starts_with(prefix)) msg = msg.substr(prefix.size());  // infer_meta's own prefix
    fail("{}({}) at node %{}: {}", op_name(op), shapes, name, msg);
  }
  std::vector<Tensor> out;
  for (int i = 0; i < node->num_results(); ++i) {
    auto impl = std::make_shared<TensorImpl>();
    impl->meta = node->meta(i);
    impl->value = node->result(i);
    impl->trace_id = ctx->id_;
    ctx->traced_.push_back(impl);
    out.emplace_back(std::move(impl));
  }
  return out;
}

}  // namespace kiln
