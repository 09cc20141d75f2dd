// kiln::compile(module, loss_fn, optimizer) (frontend/compile.h): a training step -- forward,
// loss, backward and the optimizer's update -- compiled as one graph (make_train_step), guarded
// on the batch as kiln::compile is, with the parameters and the optimizer's state updated in
// place on their device.
#include <fmt/format.h>

#include <chrono>
#include <map>

#include "frontend/compile.h"
#include "frontend/compile_graph.h"
#include "backend/debug_dump.h"
#include "frontend/train_step_loss.h"
#include "frontend/device.h"
#include "frontend/autocast.h"
#include "frontend/guards.h"
#include "ir/error.h"
#include "ir/log.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"

namespace kiln {

namespace {
struct TrainEntry {
  EntryGuards guards;  // the batch's, and the Autocast scope the loss was traced in (its casts are in the step)
  TrainStep step;
  std::shared_ptr<const backend::Executable> compiled;  // null: run on the reference interpreter (eager)
  std::vector<Tensor> params;                           // the module's tensors, in the step's order
  std::vector<Tensor> buffers;                          // the module's buffers the loss reads (aliases: read at each step)
};
}  // namespace

struct CompiledTrainStepState {
  nn::Module* module = nullptr;
  ScalarFn loss_fn;
  OptimizerConfig optimizer;
  CompileOptions options;
  Device device;
  CompileStats stats;
  std::vector<TrainEntry> entries;
  GuardedCache cache{"", "", 1, false};  // made in compile() from the options
  // Optimizer state by its name in the step graph ("fc_weight_exp_avg"), on `device`: shared by
  // every specialization, so that a recompile for a new batch shape keeps the moments.
  std::map<std::string, Tensor> opt_state;
  int64_t steps = 0;
  bool eager = false;  // past the cache size limit
  // The Trainer on the CPU: step graphs are not compiled here but run through this executor
  // (the reference interpreter when empty).
  bool host_graphs = false;
  Executor host_executor;
  std::string who;  // in messages: "kiln::compile(module, loss_fn, optimizer) 'name'", "Trainer"

  TrainEntry& entry_for(const std::vector<Tensor>& batch);
  TrainEntry make_entry(const std::vector<Tensor>& batch, bool compile_it);
  double run(TrainEntry& e, const std::vector<Tensor>& batch);
  std::vector<Tensor> run_graph(const TrainEntry& e, const Graph& g, const std::vector<Tensor>& inputs);
  void broadcast_parameters(const TrainEntry& e);
};

TrainEntry CompiledTrainStepState::make_entry(const std::vector<Tensor>& batch, bool compile_it) {
  auto t0 = std::chrono::steady_clock::now();
  TrainEntry e;
  for (size_t i = 0; i < batch.size(); ++i) e.guards.tensors.push_back(guard_of(batch[i], fmt::format("batch {}", i)));
  e.guards.state = TraceState::current();
  TracedGraph loss = trace_training_loss(loss_fn, batch, options.name + "_loss", who);
  e.step = make_train_step(loss, optimizer, options.grad_scaler, options.data_parallel);
  e.step.graph.set_name(options.name);
  e.params = module_parameters_for(*module, loss, e.step.param_paths, who);
  for (const std::string& path : e.step.buffer_paths)
    for (size_t i = 0; i < loss.parameter_paths.size(); ++i)
      if (loss.parameter_paths[i] == path) {
        e.buffers.push_back(loss.parameter_tensors.at(i));
        break;
      }
  KILN_INTERNAL_ASSERT(e.buffers.size() == e.step.buffer_paths.size(), "every buffer of the step is a tensor the loss read");
  if (log_enabled("graph")) log_line("graph", fmt::format("{}:\n{}", options.name, print_graph(e.step.graph)));
  if (!compile_it || host_graphs) return e;
  backend::DebugDump debug = backend::DebugDump::open(backend::DebugDump::root_from(options.debug_dir), options.name, options.debug_svg);
  debug.time("trace", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  debug.graph("traced", loss.graph);
  debug.graph("train_step", e.step.graph);
  e.compiled = compile_one_graph(e.step.graph, device, options, debug, "train_step", stats);
  debug.finish();
  if (debug.active()) stats.debug_folders.push_back(debug.folder().string());
  return e;
}

TrainEntry& CompiledTrainStepState::entry_for(const std::vector<Tensor>& batch) {
  const TraceState state = TraceState::current();
  std::vector<const EntryGuards*> guards;
  for (const TrainEntry& e : entries) guards.push_back(&e.guards);
  if (int hit = cache.find(guards, batch, state); hit >= 0) return entries[static_cast<size_t>(hit)];
  // Past the size limit, new entries run on the reference interpreter (a step cannot run eagerly).
  if (!entries.empty() && cache.miss(guards, batch, state, stats)) eager = true;
  TrainEntry& e = entries.emplace_back(make_entry(batch, !eager));
  // Zero moments and momentum buffers (a grad scaler's scale), made once where the parameters
  // live, when the first step graph that names them is made (for a Trainer: when it is made).
  for (size_t i = 0; i < e.step.state_names.size(); ++i)
    if (!opt_state.count(e.step.state_names[i])) opt_state.emplace(e.step.state_names[i], Tensor(e.step.initial_state(i)).to(device));
  if (entries.size() == 1 && options.data_parallel && options.data_parallel->world_size > 1) broadcast_parameters(e);
  return e;
}

double CompiledTrainStepState::run(TrainEntry& e, const std::vector<Tensor>& batch) {
  const TrainStep& ts = e.step;
  std::vector<Tensor> inputs = e.params;
  for (const std::string& name : ts.state_names) inputs.push_back(opt_state.at(name));
  for (const Tensor& b : batch) inputs.push_back(b.device() == device ? b : b.to(device));
  inputs.push_back(Tensor(HostTensor::scalar(DType::F32, static_cast<double>(steps + 1))).to(device));
  for (const Tensor& b : e.buffers) inputs.push_back(b.device() == device ? b : b.to(device));
  if (!e.compiled && !host_graphs) ++stats.eager_calls;
  std::vector<Tensor> outs = run_graph(e, ts.graph, inputs);
  const size_t state_end = 1 + ts.state_names.size() + e.params.size();
  KILN_INTERNAL_ASSERT(outs.size() == state_end + ts.written_buffers.size(),
                       "a train step returns the loss, the new parameters, the new state and the buffers it wrote");
  // The new values replace the old in the module's own tensors: no copy.
  for (size_t i = 0; i < e.params.size(); ++i) e.params[i].impl()->set_storage_from(*outs[1 + i].impl());
  for (size_t i = 0; i < ts.state_names.size(); ++i) opt_state[ts.state_names[i]] = outs[1 + e.params.size() + i];
  for (size_t w = 0; w < ts.written_buffers.size(); ++w) e.buffers[ts.written_buffers[w]].impl()->set_storage_from(*outs[state_end + w].impl());
  ++steps;
  return outs[0].item();
}

// The entry's step graph (or another graph over its parameters, such as DDP's broadcast):
// compiled where the entry is, else through the host executor or the reference interpreter.
std::vector<Tensor> CompiledTrainStepState::run_graph(const TrainEntry& e, const Graph& g, const std::vector<Tensor>& inputs) {
  if (e.compiled && &g == &e.step.graph) return kiln::run(*e.compiled, inputs);
  if (e.compiled) {
    backend::CompileOptions o;
    o.device = device;
    o.origin = options.name;
    o.run = options.run;
    o.autotune = options.autotune;
    return kiln::run(backend::compile(g, o).executable, inputs);
  }
  std::vector<HostTensor> host;
  for (const Tensor& t : inputs) host.push_back(t.host_data());
  std::vector<Tensor> outs;
  for (HostTensor& h : (host_executor ? host_executor : reference_executor())(g, host)) outs.push_back(Tensor(std::move(h)).to(device));
  return outs;
}

// DDP's start: rank 0's parameters on every rank, written into the module's own tensors.
void CompiledTrainStepState::broadcast_parameters(const TrainEntry& e) {
  std::vector<Tensor> same = run_graph(e, parameter_broadcast(e.step, options.data_parallel->world_size), e.params);
  for (size_t i = 0; i < e.params.size(); ++i) e.params[i].impl()->set_storage_from(*same[i].impl());
}

double CompiledTrainStep::operator()(const std::vector<Tensor>& batch) const {
  CompiledTrainStepState& s = *s_;
  ++s.stats.calls;
  for (size_t i = 0; i < batch.size(); ++i)
    if (!batch[i].defined() || batch[i].is_traced()) fail("{}: batch tensor {} must be a concrete tensor", s.options.name, i);
  size_t before = s.entries.size();
  TrainEntry& e = s.entry_for(batch);
  if (s.entries.size() == before && e.compiled) ++s.stats.cache_hits;
  return s.run(e, batch);
}

const CompileStats& CompiledTrainStep::stats() const { return s_->stats; }

std::optional<GradScalerState> CompiledTrainStep::grad_scaler() const {
  if (s_->entries.empty() || s_->entries.back().step.scaler_state < 0) return std::nullopt;
  const TrainStep& ts = s_->entries.back().step;
  auto value = [&](int k) {
    auto it = s_->opt_state.find(ts.state_names[static_cast<size_t>(ts.scaler_state + k)]);
    return it == s_->opt_state.end() ? ts.state_fill[static_cast<size_t>(ts.scaler_state + k)] : it->second.item();
  };
  return GradScalerState{value(0), static_cast<int64_t>(value(2))};
}
int64_t CompiledTrainStep::steps() const { return s_->steps; }

const TrainStep& CompiledTrainStep::train_step() const {
  if (s_->entries.empty()) fail("{}: no step has run yet, so there is no step graph", s_->who);
  return s_->entries.back().step;
}

const Device& CompiledTrainStep::device() const { return s_->device; }

TrainState CompiledTrainStep::state() const {
  TrainState out;
  out.step = s_->steps;
  if (s_->entries.empty()) return out;
  const TrainEntry& e = s_->entries.back();
  for (const Tensor& p : e.params) out.params.push_back(p.host_data());
  for (const std::string& name : e.step.state_names) {
    auto it = s_->opt_state.find(name);
    out.state.push_back(it == s_->opt_state.end() ? e.step.initial_state(out.state.size()) : it->second.host_data());
  }
  return out;
}

namespace {

std::shared_ptr<CompiledTrainStepState> make_state(nn::Module& module, ScalarFn loss_fn, OptimizerConfig optimizer, CompileOptions options,
                                                   std::string who) {
  if (!loss_fn) fail("{}: the loss function is empty", who);
  if (options.cache_size_limit < 1) fail("{}: cache_size_limit must be at least 1, got {}", who, options.cache_size_limit);
  if (options.data_parallel && options.data_parallel->shard_parameters)
    fail("{}: FSDP shards the parameters, and a module keeps them whole: use make_train_step with "
         "DataParallelConfig::shard_parameters (TrainStep::shard, parameter_gather)",
         who);
  auto s = std::make_shared<CompiledTrainStepState>();
  auto params = module.named_parameters();
  if (params.empty()) fail("{}: the module has no parameters to train", who);
  // The device option moves the module there once, in place (module.to(device)), as a
  // PyTorch user does before building the optimizer.
  if (options.device) module.to(*options.device);
  s->device = params.front().second.device();
  for (const auto& [path, p] : params)
    if (p.device() != s->device)
      fail("{}: parameter '{}' is on {} and '{}' on {}: move the module with module.to(device) or pass "
           "the device option",
           who, path, p.device().str(), params.front().first, s->device.str());
  s->module = &module;
  s->loss_fn = std::move(loss_fn);
  s->optimizer = std::move(optimizer);
  // A training step always differentiates: grad mode is not part of its guards.
  s->cache = GuardedCache(fmt::format("training step '{}'", options.name), "runs on the reference interpreter",
                          options.cache_size_limit, /*checks_grad_mode=*/false);
  s->options = std::move(options);
  s->who = std::move(who);
  return s;
}

}  // namespace

CompiledTrainStep compile(nn::Module& module, ScalarFn loss_fn, OptimizerConfig optimizer, CompileOptions options) {
  if (options.name == "fn") options.name = "train_step";
  std::string who = fmt::format("kiln::compile(module, loss_fn, optimizer) '{}'", options.name);
  return CompiledTrainStep(make_state(module, std::move(loss_fn), std::move(optimizer), std::move(options), std::move(who)));
}

CompiledTrainStep compile_trainer_step(nn::Module& module, ScalarFn loss_fn, OptimizerConfig optimizer, CompileOptions options,
                                       const std::vector<Tensor>& example_batch, Executor host_executor) {
  auto s = make_state(module, std::move(loss_fn), std::move(optimizer), std::move(options), "Trainer");
  s->host_graphs = s->device.kind == Device::Kind::CPU;
  s->host_executor = std::move(host_executor);
  s->entry_for(example_batch);
  return CompiledTrainStep(std::move(s));
}

}  // namespace kiln
