// kiln::compile (frontend/compile.h): the cache of guarded entries, tracing with graph breaks,
// and the AOTAutograd split when gradients are asked for.
#include "frontend/compile.h"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "backend/compile.h"
#include "backend/debug_dump.h"
#include "frontend/aot.h"
#include "frontend/autocast.h"
#include "frontend/compile_graph.h"
#include "frontend/compiled_backward.h"
#include "frontend/device.h"
#include "frontend/guards.h"
#include "frontend/trace_context.h"
#include "ir/error.h"
#include "ir/log.h"
#include "ir/printer.h"
#include "passes/autograd/partition.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string location_str(const std::source_location* where) {
  if (!where) return "an unknown location (bool() of a tensor; t.is_nonzero() or t.item() name theirs)";
  return fmt::format("{}:{} ({})", where->file_name(), where->line(), where->function_name());
}

}  // namespace

// ---- the cache

namespace {

// One specialization of a compiled function.
struct CacheEntry {
  int number = 0;  // the compile count when it was made, for logs
  EntryGuards guards;  // the inputs', and the grad mode and autocast scope the trace ran in
  std::vector<TensorGuard> captured_guards;  // the tensors the function captured (whole-graph entries)
  // The function breaks its graph: each call runs it again, its graphs looked up by content.
  bool breaks = false;
  // A whole-graph entry: the compiled graph, its captured tensors (graph inputs after the
  // function's), and for gradients the compiled backward.
  std::vector<Tensor> captured;
  std::shared_ptr<const backend::Executable> forward;
  std::shared_ptr<const backend::Executable> backward;
  std::vector<int> leaves;  // graph input indices whose gradients the backward returns
  std::vector<int> tangent_for_output;
  std::vector<TensorMeta> tangent_metas;
  int num_outputs = 0;
  // The captured tensors the function writes in place (Tensor::copy_: a BatchNorm's running
  // statistics in training mode), as indices into `captured`: the graph returns their new values
  // after the function's results, and each call writes them back.
  std::vector<size_t> written;
};

// The new value of a tensor the function wrote in place, into the tensor (on its own device):
// its storage becomes the value's, as a compiled training step writes a module's buffers.
void write_back(const Tensor& target, const Tensor& value) {
  Tensor v = value.device() == target.device() ? value : value.to(target.device());
  target.impl()->set_storage_from(*v.impl());
}

std::vector<TensorGuard> guards_of(const std::vector<Tensor>& ts, const std::vector<std::string>& names) {
  std::vector<TensorGuard> gs;
  for (size_t i = 0; i < ts.size(); ++i) gs.push_back(guard_of(ts[i], names[i]));
  return gs;
}

std::vector<std::string> input_labels(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(fmt::format("input {}", i));
  return out;
}

std::vector<Tensor> moved_to(const std::vector<Tensor>& ts, Device device) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.device() == device ? t : t.to(device));
  return out;
}

}  // namespace

struct CompiledFunctionState {
  TraceFn fn;
  CompileOptions options;
  CompileStats stats;
  std::vector<std::unique_ptr<CacheEntry>> entries;  // oldest first
  GuardedCache cache{"", "", 1, true};               // made in compile() from the options
  bool eager = false;                                // past the cache size limit
  bool warned_no_grad_through_breaks = false;
  // Graphs between breaks, by content (their text and the device), shared by every entry.
  std::unordered_map<std::string, std::shared_ptr<const backend::Executable>> segments;
  // Calls of one compiled function run one at a time; recursive, since an eager call (past the
  // limit) may call the function again.
  std::recursive_mutex mu;

  Device device_for(const std::vector<Tensor>& inputs) const {
    if (options.device) return *options.device;
    return inputs.empty() ? Device::cpu() : inputs.front().device();
  }

  std::shared_ptr<const backend::Executable> compile_graph(const Graph& g, Device device, backend::DebugDump& debug,
                                                           const std::string& stage) {
    return compile_one_graph(g, device, options, debug, stage, stats);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_entry(CacheEntry& e, const std::vector<Tensor>& inputs, Device device);
  std::vector<Tensor> traced_call(const std::vector<Tensor>& inputs, Device device, CacheEntry* building);
};

// ---- tracing a call, with graph breaks

namespace {

// One traced call of the function: the graphs between its breaks, each compiled (or found
// among those compiled before) and run when the trace reaches a break or the function's end.
class BreakingTrace {
 public:
  BreakingTrace(CompiledFunctionState& s, Device device) : s_(s), device_(device) {}

  // Starts the first graph; returns the traced stand-ins of the function's inputs.
  std::vector<Tensor> start(const std::vector<Tensor>& inputs) {
    inputs_ = inputs;
    std::vector<Tensor> traced;
    TraceContext& ctx = new_graph();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      if (!t.defined()) fail("{}: input {} is undefined", s_.options.name, i);
      if (t.is_traced()) fail("{}: input {} is a traced tensor", s_.options.name, i);
      std::string name = t.name().empty() ? "x" + std::to_string(i) : sanitize_value_name(t.name());
      traced.push_back(ctx.add_input(t, name));
    }
    traced_inputs_ = traced;
    return traced;
  }

  TraceContext& current() { return *graphs_.back(); }
  int breaks() const { return breaks_; }
  // The tensors the current graph writes in place: their last values become outputs after the
  // graph's own (in writes() order), which whoever runs the graph writes back.
  static std::vector<size_t> add_write_outputs(TraceContext& ctx) {
    std::vector<size_t> written;
    if (ctx.writes().empty()) return written;
    std::vector<Value> outs = ctx.graph().outputs();
    for (const auto& [index, value] : ctx.writes()) {
      written.push_back(index);
      outs.push_back(value);
    }
    ctx.graph().set_outputs(std::move(outs));
    return written;
  }
  // The graph inputs' values for the current graph: the function's inputs (first graph only),
  // then the tensors lifted into it.
  std::vector<Tensor> graph_input_values() {
    std::vector<Tensor> values = graphs_.size() == 1 ? inputs_ : std::vector<Tensor>{};
    std::vector<Tensor> lifted = current().take_parameter_tensors();
    values.insert(values.end(), lifted.begin(), lifted.end());
    return values;
  }

  // The end of the function: its results from the last graph.
  std::vector<Tensor> finish(const std::vector<Tensor>& results) {
    TraceContext& ctx = current();
    std::vector<Value> outs;
    for (const Tensor& t : results) outs.push_back(ctx.value_of(t));
    ctx.graph().set_outputs(outs);
    return run_current_graph();
  }

 private:
  TraceContext& new_graph() {
    std::string name = s_.options.name + (graphs_.empty() ? "" : fmt::format("_{}", graphs_.size()));
    graphs_.push_back(std::make_unique<TraceContext>(name));
    TraceContext& ctx = *graphs_.back();
    ctx.set_break_handler([this](const Tensor& t, const std::source_location* where, std::string_view what) {
      on_break(t, where, what);
    });
    return ctx;
  }

  std::vector<Tensor> run_current_graph() {
    std::vector<Tensor> targets;  // before graph_input_values() takes the lifted tensors
    for (size_t index : add_write_outputs(current())) targets.push_back(current().parameter_tensors().at(index));
    Graph& g = current().graph();
    std::string key = fmt::format("{}\n{}", device_.str(), print_graph(g));
    auto it = s_.segments.find(key);
    if (it == s_.segments.end()) {
      backend::DebugDump debug = backend::DebugDump::open(backend::DebugDump::root_from(s_.options.debug_dir), g.name(), s_.options.debug_svg);
      debug.graph("traced", g);
      if (log_enabled("graph")) log_line("graph", print_graph(g));
      it = s_.segments.emplace(key, s_.compile_graph(g, device_, debug, "graph")).first;
      debug.finish();
      if (debug.active()) s_.stats.debug_folders.push_back(debug.folder().string());
    }
    std::vector<Tensor> results = run(*it->second, moved_to(graph_input_values(), device_));
    const size_t own = results.size() - targets.size();
    for (size_t w = 0; w < targets.size(); ++w) write_back(targets[w], results[own + w]);
    results.resize(own);
    return results;
  }

  // Whether a gradient was asked for: an input or a captured tensor requires one.
  bool wants_gradients(TraceContext& ctx) const {
    for (const Tensor& in : inputs_)
      if (in.requires_grad()) return true;
    for (const auto& impl : ctx.live_traced_tensors())
      if (impl->requires_grad) return true;
    for (const Tensor& p : ctx.parameter_tensors())
      if (p.requires_grad()) return true;
    return false;
  }

  // Runs the graph so far, makes every traced tensor the function still holds concrete, and
  // goes on tracing in a new graph.
  void on_break(const Tensor& t, const std::source_location* where, std::string_view what) {
    if (s_.options.fullgraph)
      fail("{}: graph break at {}: {} reads a traced value, and fullgraph=true asks for one graph", s_.options.name,
           location_str(where), what);
    ++breaks_;
    ++s_.stats.graph_breaks;
    TraceContext& ctx = current();
    if (log_enabled("graph_breaks"))
      log_line("graph_breaks", fmt::format("{}: graph break at {}: {} of %{} ends graph '{}' ({} nodes)",
                                           s_.options.name, location_str(where), what, t.impl()->value.name(),
                                           ctx.graph().name(), ctx.graph().num_nodes()));
    if (breaks_ == 1 && grad_enabled() && !s_.warned_no_grad_through_breaks && wants_gradients(ctx)) {
      s_.warned_no_grad_through_breaks = true;
      fmt::print(stderr,
                 "kiln: warning: '{}' breaks its graph at {}: its results carry no backward (kiln computes gradients "
                 "of whole graphs only); compile the function without reading tensor values to train through it\n",
                 s_.options.name, location_str(where));
    }
    std::vector<std::shared_ptr<TensorImpl>> live = ctx.live_traced_tensors();
    std::vector<std::shared_ptr<TensorImpl>> computed;  // live node results, in output order
    std::vector<Value> outs;
    for (auto& impl : live) {
      if (impl->value.node->is_input()) continue;
      outs.push_back(impl->value);
      computed.push_back(impl);
    }
    // The traced inputs of the first graph stand for the function's inputs: they become those.
    std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> as_inputs;
    if (graphs_.size() == 1)
      for (size_t i = 0; i < traced_inputs_.size(); ++i) as_inputs.emplace_back(traced_inputs_[i].impl_ptr(), inputs_[i]);
    std::vector<Tensor> results;
    if (!outs.empty() || !ctx.writes().empty()) {  // (a graph that only writes a buffer runs too)
      ctx.graph().set_outputs(outs);
      results = run_current_graph();
    }
    for (size_t i = 0; i < computed.size(); ++i) make_concrete(*computed[i], results[i]);
    for (auto& [impl, value] : as_inputs) make_concrete(*impl, value);
    TraceContext::switch_current(new_graph());
  }

  // A traced tensor becomes the concrete tensor `value` (same storage), in place, so that the
  // function's own handles see it.
  void make_concrete(TensorImpl& impl, const Tensor& value) {
    if (impl.trace_id == 0) return;
    impl.set_storage_from(*value.impl());
    impl.value = Value{};
    impl.trace_id = 0;
  }

  CompiledFunctionState& s_;
  Device device_;
  std::vector<Tensor> inputs_, traced_inputs_;
  std::deque<std::unique_ptr<TraceContext>> graphs_;
  int breaks_ = 0;
};

}  // namespace

// Traces the function on `inputs`. Without a break, and when `building`, the whole graph is
// compiled into *building (with its backward when gradients are asked for) and run from there;
// with breaks, each graph ran as the trace reached its end.
std::vector<Tensor> CompiledFunctionState::traced_call(const std::vector<Tensor>& inputs, Device device,
                                                       CacheEntry* building) {
  auto t0 = std::chrono::steady_clock::now();
  BreakingTrace bt(*this, device);
  std::vector<Tensor> results;
  std::vector<Tensor> traced_results;
  {
    std::vector<Tensor> traced = bt.start(inputs);
    ActiveTrace active(bt.current());
    traced_results = fn(traced);
    if (traced_results.empty()) fail("{}: the compiled function returned no tensors", options.name);
    if (bt.breaks() > 0 || !building) {
      results = bt.finish(traced_results);
      if (building) building->breaks = true;
      return results;
    }
    // One graph: finished below, outside the trace.
    std::vector<Value> outs;
    for (const Tensor& t : traced_results) outs.push_back(bt.current().value_of(t));
    bt.current().graph().set_outputs(outs);
    building->written = BreakingTrace::add_write_outputs(bt.current());
  }
  double trace_ms = ms_since(t0);
  TraceContext& ctx = bt.current();
  Graph& g = ctx.graph();
  CacheEntry& e = *building;
  e.captured = ctx.take_parameter_tensors();
  std::vector<std::string> captured_labels;
  for (const Tensor& c : e.captured)
    captured_labels.push_back(c.name().empty() ? fmt::format("captured tensor {}", captured_labels.size())
                                               : fmt::format("parameter '{}'", c.name()));
  e.captured_guards = guards_of(e.captured, captured_labels);
  e.num_outputs = static_cast<int>(traced_results.size());

  backend::DebugDump debug = backend::DebugDump::open(backend::DebugDump::root_from(options.debug_dir), g.name(), options.debug_svg);
  debug.time("trace", trace_ms);
  debug.graph("traced", g);
  if (log_enabled("graph")) log_line("graph", fmt::format("{} (compile {}):\n{}", options.name, e.number, print_graph(g)));

  // The leaves: floating graph inputs whose tensors require a gradient.
  std::vector<std::string> wrt;
  if (e.guards.state.grad_mode) {
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Tensor& t = i < inputs.size() ? inputs[i] : e.captured[i - inputs.size()];
      if (t.impl()->grad_fn)
        fail("{}: input {} was returned by another compiled call that computes gradients; kiln does not chain "
             "compiled calls under autograd: compile the whole computation as one function, or detach it under "
             "NoGradGuard",
             options.name, i);
      if (t.requires_grad() && is_floating(t.dtype())) {
        e.leaves.push_back(static_cast<int>(i));
        wrt.push_back(g.inputs()[i]->name());
      }
    }
  }
  if (wrt.empty()) {
    e.forward = compile_graph(g, device, debug, "graph");
  } else {
    AotGraphs aot = aot_split(g, wrt, options.partitioner, debug, options.name);
    e.tangent_for_output = std::move(aot.tangent_for_output);
    e.tangent_metas = std::move(aot.tangent_metas);
    e.forward = compile_graph(aot.forward, device, debug, "forward");
    e.backward = compile_graph(aot.backward, device, debug, "backward");
  }
  debug.time("total", ms_since(t0));
  debug.finish();
  if (debug.active()) stats.debug_folders.push_back(debug.folder().string());
  return run_entry(e, inputs, device);
}

std::vector<Tensor> CompiledFunctionState::run_entry(CacheEntry& e, const std::vector<Tensor>& inputs, Device device) {
  std::vector<Tensor> feed = moved_to(inputs, device);
  std::vector<Tensor> captured = moved_to(e.captured, device);
  feed.insert(feed.end(), captured.begin(), captured.end());
  std::vector<Tensor> outs = run(*e.forward, feed);
  // The written tensors' new values follow the function's results (and precede what the
  // backward saved).
  const size_t own = static_cast<size_t>(e.num_outputs), written_end = own + e.written.size();
  for (size_t w = 0; w < e.written.size(); ++w) write_back(e.captured[e.written[w]], outs[own + w]);
  if (!e.backward) {
    outs.resize(own);
    return outs;
  }
  auto bw = std::make_shared<CompiledBackward>();
  bw->name = options.name;
  bw->graph = e.backward;
  bw->saved.assign(outs.begin() + static_cast<std::ptrdiff_t>(written_end), outs.end());
  bw->tangent_for_output = e.tangent_for_output;
  bw->tangent_metas = e.tangent_metas;
  for (int i : e.leaves) bw->leaves.push_back(static_cast<size_t>(i) < inputs.size() ? inputs[i] : e.captured[i - inputs.size()]);
  bw->device = device;
  outs.resize(static_cast<size_t>(e.num_outputs));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (bw->tangent_for_output[i] < 0) continue;
    // A result may be an input handed back: the grad_fn goes on a handle of the call's own.
    for (const Tensor& f : feed)
      if (outs[i].impl() == f.impl()) {
        outs[i] = Tensor(std::make_shared<TensorImpl>(*f.impl()));
        outs[i].impl()->requires_grad = false;
        outs[i].impl()->grad.reset();
      }
    outs[i].impl()->grad_fn = bw;
    outs[i].impl()->grad_fn_output = static_cast<int>(i);
  }
  return outs;
}

std::vector<Tensor> CompiledFunctionState::call(const std::vector<Tensor>& inputs) {
  // Inside another trace (a compiled function called by a traced one), it is traced through,
  // as Dynamo inlines a compiled function called from one it is compiling.
  if (is_tracing()) return fn(inputs);
  std::lock_guard lock(mu);
  ++stats.calls;
  if (eager) {
    ++stats.eager_calls;
    return fn(inputs);
  }
  const Device device = device_for(inputs);
  const TraceState state = TraceState::current();
  std::vector<const EntryGuards*> guards;
  for (const auto& e : entries) guards.push_back(&e->guards);
  // A function that breaks its graph is traced again at every call; a whole-graph entry also
  // holds only while the tensors it captured keep their guards.
  const int hit = cache.find(guards, inputs, state, [&](size_t k) {
    const CacheEntry& e = *entries[k];
    return e.breaks || !first_guard_failure(e.captured_guards, e.captured);
  });
  if (hit >= 0) {
    CacheEntry& e = *entries[static_cast<size_t>(hit)];
    if (e.breaks) return traced_call(inputs, device, nullptr);
    ++stats.cache_hits;
    return run_entry(e, inputs, device);
  }
  if (!entries.empty() &&
      cache.miss(guards, inputs, state, stats, [&](size_t k) { return first_guard_failure(entries[k]->captured_guards, entries[k]->captured); })) {
    eager = true;
    ++stats.eager_calls;
    return fn(inputs);
  }
  auto e = std::make_unique<CacheEntry>();
  e->number = static_cast<int>(entries.size()) + 1;
  e->guards = EntryGuards{guards_of(inputs, input_labels(inputs.size())), state};
  CacheEntry& entry = *entries.emplace_back(std::move(e));
  try {
    return traced_call(inputs, device, &entry);
  } catch (...) {
    entries.pop_back();  // a failed compile leaves no entry behind: the next call tries again
    throw;
  }
}

// ---- the public face

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) const { return s_->call(inputs); }

std::vector<Tensor> CompiledFunction::operator()(std::initializer_list<Tensor> inputs) const {
  return s_->call(std::vector<Tensor>(inputs));
}

Tensor CompiledFunction::operator()(const Tensor& input) const {
  std::vector<Tensor> out = s_->call({input});
  if (out.size() != 1)
    fail("{}: called as f(x), the form that returns one tensor, but the function returned {}: call it as f({{x}}) (or "
         "f(std::vector<Tensor>{{x}})) to get all of them",
         s_->options.name, out.size());
  return out[0];
}

const CompileStats& CompiledFunction::stats() const { return s_->stats; }

CompiledFunction compile(TraceFn fn, CompileOptions options) {
  if (!fn) fail("kiln::compile: the function is empty");
  if (options.cache_size_limit < 1) fail("kiln::compile: cache_size_limit must be at least 1, got {}", options.cache_size_limit);
  autograd::parse_partition_kind(options.partitioner);  // a bad name fails here, not at the first call
  auto s = std::make_shared<CompiledFunctionState>();
  s->fn = std::move(fn);
  s->cache = GuardedCache(fmt::format("'{}'", options.name), "runs eagerly", options.cache_size_limit, /*checks_grad_mode=*/true);
  s->options = std::move(options);
  return CompiledFunction(std::move(s));
}

CompiledFunction compile(TraceFn1 fn, CompileOptions options) {
  if (!fn) fail("kiln::compile: the function is empty");
  return compile(TraceFn([fn = std::move(fn)](const std::vector<Tensor>& in) {
                   if (in.size() != 1) fail("a one-input compiled function was called with {} tensors", in.size());
                   return std::vector<Tensor>{fn(in[0])};
                 }),
                 std::move(options));
}

CompiledFunction compile(ScalarFn fn, CompileOptions options) {
  if (!fn) fail("kiln::compile: the function is empty");
  return compile(TraceFn([fn = std::move(fn)](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }),
                 std::move(options));
}

}  // namespace kiln
