#include "frontend/optim.h"
#include "frontend/ddp.h"
#include "frontend/fsdp.h"
#include "frontend/grad_scaler.h"
#include "frontend/update_rules.h"
#include "frontend/train_step_loss.h"

#include "frontend/device.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/log.h"
#include "ir/verifier.h"
#include "passes/autograd/joint.h"
#include "passes/dce.h"

namespace kiln {
namespace {

// A lifted tensor that is not trained (a captured constant) becomes a `constant` node.
Value constant_node(Builder& b, const HostTensor& t, const std::string& name) {
  Attrs a;
  a.set("size", IntList(t.shape().begin(), t.shape().end()));
  a.set("dtype", t.dtype());
  a.set("values", t.to_doubles());
  return b.op(Op::Constant, {}, a, name);
}

}  // namespace

TrainState TrainStep::init(const std::vector<HostTensor>& params) const {
  if (params.size() != static_cast<size_t>(num_params))
    fail("train step '{}' trains {} parameters, got {}", graph.name(), num_params, params.size());
  TrainState s;
  for (int i = 0; i < num_params; ++i) s.params.push_back(params[static_cast<size_t>(i)].clone());
  for (int i = 0; i < num_state; ++i) s.state.push_back(initial_state(static_cast<size_t>(i)));
  for (const HostTensor& b : buffer_values) s.buffers.push_back(b.clone());
  return s;
}

HostTensor TrainStep::initial_state(size_t i) const {
  const TensorMeta& m = graph.inputs().at(static_cast<size_t>(num_params) + i)->meta();
  const double fill = i < state_fill.size() ? state_fill[i] : 0.0;
  return HostTensor::from_doubles(m.dtype, m.shape, std::vector<double>(static_cast<size_t>(m.numel()), fill));
}

TrainStep make_train_step(const TracedGraph& loss, const OptimizerConfig& optimizer, const std::optional<GradScalerConfig>& scaler,
                          const std::optional<DataParallelConfig>& data_parallel) {
  check_config(optimizer);
  if (scaler) check_scaler(*scaler);
  if (data_parallel) check_data_parallel(*data_parallel);
  const bool sharded = data_parallel && data_parallel->shard_parameters;
  TracedGraph sharded_loss;  // FSDP: the loss reading gathered shards (frontend/fsdp.h)
  const Graph& g = loss.graph;
  if (loss.num_function_outputs() != 1 || g.outputs()[0].meta().rank() != 0 || !is_floating(g.outputs()[0].meta().dtype))
    fail("make_train_step: the loss graph '{}' must return one 0-d floating-point tensor", g.name());
  if (!loss.written.empty() && data_parallel && data_parallel->world_size > 1)
    fail("make_train_step: the loss '{}' writes buffers in place (BatchNorm's running statistics), and a data-parallel step "
         "would let each rank's buffers drift apart; call eval() on those modules, or train on one process",
         g.name());
  const size_t num_lifted = loss.parameters.size();
  const size_t num_batch = g.inputs().size() - num_lifted;

  // Trained: the floating parameters; other lifted tensors are constants of the step.
  std::vector<bool> trained(num_lifted);
  TrainStep ts;
  autograd::JointOptions options;
  options.seeded_outputs = 1;  // the loss; the buffers it writes are returned, not differentiated
  for (size_t i = 0; i < num_lifted; ++i) {
    const Node* in = g.inputs()[num_batch + i];
    // Parameters are the named tensors kiln::trace lifted, but a module's buffers (inputs of the
    // step, below); unnamed ones are captured constants.
    const std::string path = i < loss.parameter_paths.size() ? loss.parameter_paths[i] : "";
    const bool buffer = i < loss.parameter_tensors.size() && loss.parameter_tensors[i].defined() &&
                        loss.parameter_tensors[i].impl()->is_buffer;
    trained[i] = is_floating(in->meta().dtype) && !path.empty() && !buffer;
    if (std::find(loss.written.begin(), loss.written.end(), i) != loss.written.end() && (trained[i] || path.empty()))
      fail("make_train_step: the loss '{}' writes {} '{}' in place; a step writes back only a module's buffers "
           "(register_buffer), not {}",
           g.name(), trained[i] ? "parameter" : "captured tensor", trained[i] ? path : in->name(),
           trained[i] ? "the parameters it trains" : "tensors the module does not own");
    if (!trained[i]) continue;
    options.wrt.push_back(in->name());
    ts.param_names.push_back(in->name());
    ts.param_paths.push_back(path);
  }
  if (options.wrt.empty()) fail("make_train_step: the loss graph '{}' has no floating-point parameters (named tensors it reads)", g.name());
  if (sharded) {
    ts.shard_world = data_parallel->world_size;
    for (size_t i = 0; i < num_lifted; ++i)
      if (trained[i]) ts.whole_param_metas.push_back(g.inputs()[num_batch + i]->meta());
    sharded_loss = fsdp::shard_loss(loss, trained, data_parallel->world_size);
  }
  autograd::JointGraph joint = autograd::build_joint(sharded ? sharded_loss.graph : g, options);

  Graph& out = ts.graph;
  Builder b(out);
  ValueMap map;
  const auto& jin = joint.graph.inputs();
  std::vector<ParamUpdate> updates;
  for (size_t i = 0; i < num_lifted; ++i)
    if (trained[i]) {
      Value p = out.add_input(jin[num_batch + i]->name(), jin[num_batch + i]->meta());
      map[Value{jin[num_batch + i], 0}] = p;
      updates.push_back(ParamUpdate{p, {}, {}, {}, {}});
    }
  ts.num_params = static_cast<int>(updates.size());
  const std::vector<std::string> kinds = state_kinds(optimizer);
  for (auto& u : updates)
    for (const auto& k : kinds) {
      std::string name = out.fresh_name(u.param.name() + "_" + k);
      u.state.push_back(out.add_input(name, u.param.meta().contiguous()));
      ts.state_names.push_back(name);
    }
  ts.state_fill.assign(ts.state_names.size(), 0.0);
  // The grad scaler's state: its scale, the good steps since it last changed, the steps skipped.
  ScalerState scaler_in;
  if (scaler) {
    ts.scaler_state = static_cast<int>(ts.state_names.size());
    auto scaler_input = [&](const char* what, double fill) {
      std::string name = out.fresh_name(what);
      ts.state_names.push_back(name);
      ts.state_fill.push_back(fill);
      return out.add_input(name, TensorMeta(DType::F32, {}));
    };
    scaler_in.scale = scaler_input("grad_scaler_scale", scaler->init_scale);
    scaler_in.good_steps = scaler_input("grad_scaler_good_steps", 0.0);
    scaler_in.skipped_steps = scaler_input("grad_scaler_skipped_steps", 0.0);
  }
  ts.num_state = static_cast<int>(ts.state_names.size());
  for (size_t i = 0; i < num_batch; ++i) map[Value{jin[i], 0}] = out.add_input(jin[i]->name(), jin[i]->meta());
  ts.num_batch = static_cast<int>(num_batch);
  Var step = b.wrap(out.add_input(out.fresh_name("step"), TensorMeta(DType::F32, {})));

  std::vector<size_t> written_at(loss.written.size());  // each written tensor's index among the buffers
  // Named tensors that are not trained (a module's buffers: RoPE's tables, running statistics)
  // are inputs after `step`, read at every step as kiln::compile(fn) reads them; unnamed ones
  // (captured constants) are constant nodes.
  for (size_t i = 0; i < num_lifted; ++i) {
    if (trained[i]) continue;
    const Node* in = jin[num_batch + i];
    const std::string path = i < loss.parameter_paths.size() ? loss.parameter_paths[i] : "";
    if (path.empty()) {
      map[Value{const_cast<Node*>(in), 0}] = constant_node(b, loss.parameters[i], in->name());
      continue;
    }
    map[Value{const_cast<Node*>(in), 0}] = out.add_input(in->name(), in->meta());
    for (size_t w = 0; w < loss.written.size(); ++w)
      if (loss.written[w] == i) written_at[w] = ts.buffer_names.size();
    ts.buffer_names.push_back(in->name());
    ts.buffer_paths.push_back(path);
    ts.buffer_values.push_back(loss.parameters[i]);
  }
  for (int i = 0; i < joint.num_tangents; ++i) {
    const Node* t = jin[static_cast<size_t>(joint.num_primals + i)];
    // d loss / d loss: 1, or the grad scaler's scale (every gradient comes out scaled).
    map[Value{const_cast<Node*>(t), 0}] = scaler ? b.to(b.wrap(scaler_in.scale), t->meta().dtype).v : b.full(t->meta().shape, 1.0, t->meta().dtype).v;
  }
  KILN_INTERNAL_ASSERT(joint.num_tangents == 1, "a training step seeds the loss alone");
  for (const Node* n : joint.graph.nodes()) copy_node(out, *n, map);
  for (size_t k = 0; k < updates.size(); ++k)
    updates[k].grad = map.at(joint.graph.outputs()[static_cast<size_t>(joint.num_forward_outputs) + k]);
  if (sharded) {
    // The reduce_scatter of each gradient (all_gather's derivative) summed the ranks' parts:
    // the mean over the ranks, as DDP's all_reduce takes.
    b.set_name_prefix("fsdp_");
    for (auto& u : updates) u.grad = b.mul(b.wrap(u.grad), b.scalar(1.0 / static_cast<double>(data_parallel->world_size), u.grad.meta().dtype)).v;
    b.set_name_prefix("");
  } else if (data_parallel) {
    b.set_name_prefix("ddp_");
    all_reduce_gradients(b, *data_parallel, updates);
    b.set_name_prefix("");
  }
  Var found;  // bool[]: a gradient is inf or NaN (with a grad scaler)
  if (scaler) {
    b.set_name_prefix("grad_scaler_");
    found = unscale_and_check(b, scaler_in, updates);
    // AdamW's bias correction counts the steps taken, not the ones skipped (torch.optim's
    // step count does not advance on a skipped step).
    step = step - b.wrap(scaler_in.skipped_steps);
  }

  std::vector<Value> outputs{map.at(joint.graph.outputs()[0])};
  for (size_t k = 0; k < updates.size(); ++k) {
    auto& u = updates[k];
    b.set_name_prefix("");
    apply_update(b, optimizer, step, u);
    if (scaler) skip_if_found(b, found, u);
    if (!out.find("new_" + u.param.name())) out.rename(u.new_param, "new_" + u.param.name());
  }
  for (auto& u : updates) outputs.push_back(u.new_param);
  for (auto& u : updates)
    for (size_t s = 0; s < u.new_state.size(); ++s) {
      std::string want = "new_" + u.state[s].name();
      if (!out.find(want)) out.rename(u.new_state[s], want);
      outputs.push_back(u.new_state[s]);
    }
  if (scaler) {
    b.set_name_prefix("grad_scaler_");
    const std::vector<Value> next = next_scaler_state(b, *scaler, scaler_in, found);
    const Value in[] = {scaler_in.scale, scaler_in.good_steps, scaler_in.skipped_steps};
    for (size_t i = 0; i < next.size(); ++i) {
      if (!out.find("new_" + in[i].name())) out.rename(next[i], "new_" + in[i].name());
      outputs.push_back(next[i]);
    }
  }
  // The buffers the loss wrote, as its forward computed them.
  for (size_t w = 0; w < loss.written.size(); ++w) {
    Value v = map.at(joint.graph.outputs()[1 + w]);
    const std::string want = "new_" + ts.buffer_names[written_at[w]];
    if (!out.find(want) && v.node->op() != Op::Input) out.rename(v, want);
    outputs.push_back(v);
    ts.written_buffers.push_back(written_at[w]);
  }
  out.set_outputs(std::move(outputs));
  if (sharded) fsdp::gather_again_for_backward(out, out.outputs()[0]);
  run_dce(out);
  verify_or_throw(out, "make_train_step");
  return ts;
}

int64_t TrainStep::kept_bytes() const {
  int64_t bytes = 0;
  for (int i = 0; i < num_params + num_state; ++i) bytes += graph.inputs()[static_cast<size_t>(i)]->meta().nbytes();
  return bytes;
}

std::vector<HostTensor> TrainStep::shard(const std::vector<HostTensor>& whole, int64_t rank) const {
  if (shard_world == 0) fail("train step '{}' holds whole parameters (no DataParallelConfig::shard_parameters)", graph.name());
  if (whole.size() != whole_param_metas.size())
    fail("train step '{}' shards {} parameters, got {}", graph.name(), whole_param_metas.size(), whole.size());
  if (rank < 0 || rank >= shard_world) fail("rank {} is not a rank of the {} the parameters are sharded over", rank, shard_world);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].dtype() != whole_param_metas[i].dtype || whole[i].shape() != whole_param_metas[i].shape)
      fail("parameter {} (%{}): expected {}, got {}{}", i, param_names[i], whole_param_metas[i].str(), dtype_name(whole[i].dtype()),
           shape_str(whole[i].shape()));
    out.push_back(fsdp::shard_of(whole[i], shard_world, rank));
  }
  return out;
}

Graph parameter_gather(const TrainStep& ts) {
  if (ts.shard_world == 0) fail("parameter_gather: train step '{}' holds whole parameters", ts.graph.name());
  Graph g("parameter_gather");
  Builder b(g);
  std::vector<Value> outs;
  for (int i = 0; i < ts.num_params; ++i) {
    const Node* in = ts.graph.inputs()[static_cast<size_t>(i)];
    const TensorMeta& whole = ts.whole_param_metas[static_cast<size_t>(i)];
    Var part = b.wrap(g.add_input(in->name(), in->meta()));
    Var all = b.op(Op::AllGather, {part.v}, Attrs{{"world_size", ts.shard_world}, {"dim", int64_t(0)}});
    if (all.meta().numel() != whole.numel()) all = b.slice(all.v, 0, 0, whole.numel());
    outs.push_back(b.contiguous(b.reshape(all.v, whole.shape).v).v);
  }
  g.set_outputs(std::move(outs));
  return g;
}

Graph parameter_broadcast(const TrainStep& ts, int64_t world_size, int64_t src) {
  Graph g("parameter_broadcast");
  Builder b(g);
  std::vector<Value> outs;
  for (int i = 0; i < ts.num_params; ++i) {
    const Node* p = ts.graph.inputs()[static_cast<size_t>(i)];
    Value in = g.add_input(p->name(), p->meta().contiguous());
    outs.push_back(b.op(Op::Broadcast, {in}, Attrs{{"world_size", world_size}, {"src", src}}).v);
  }
  g.set_outputs(std::move(outs));
  verify_or_throw(g, "parameter_broadcast");
  return g;
}

double train_step(const TrainStep& ts, TrainState& state, const std::vector<HostTensor>& batch, const Executor& executor) {
  if (batch.size() != static_cast<size_t>(ts.num_batch))
    fail("train step '{}' takes {} batch tensors, got {}", ts.graph.name(), ts.num_batch, batch.size());
  if (state.params.size() != static_cast<size_t>(ts.num_params) || state.state.size() != static_cast<size_t>(ts.num_state))
    fail("train step '{}': the state holds {} parameters and {} state tensors, expected {} and {}", ts.graph.name(),
         state.params.size(), state.state.size(), ts.num_params, ts.num_state);
  std::vector<HostTensor> inputs = state.params;
  inputs.insert(inputs.end(), state.state.begin(), state.state.end());
  inputs.insert(inputs.end(), batch.begin(), batch.end());
  inputs.push_back(HostTensor::scalar(DType::F32, static_cast<double>(state.step + 1)));
  if (state.buffers.size() != ts.buffer_values.size()) state.buffers = ts.buffer_values;  // a state made without init()
  inputs.insert(inputs.end(), state.buffers.begin(), state.buffers.end());
  std::vector<HostTensor> outs = (executor ? executor : reference_executor())(ts.graph, inputs);
  const size_t state_end = static_cast<size_t>(1 + ts.num_params + ts.num_state);
  KILN_INTERNAL_ASSERT(outs.size() == state_end + ts.written_buffers.size(),
                       "a train step returns the loss, the new parameters, the new state and the buffers it wrote");
  state.params.assign(outs.begin() + 1, outs.begin() + 1 + ts.num_params);
  state.state.assign(outs.begin() + 1 + ts.num_params, outs.begin() + static_cast<std::ptrdiff_t>(state_end));
  for (size_t w = 0; w < ts.written_buffers.size(); ++w) state.buffers[ts.written_buffers[w]] = std::move(outs[state_end + w]);
  ++state.step;
  return outs[0].get(0);
}

std::vector<double> train(const TrainStep& ts, TrainState& state, const std::vector<HostTensor>& batch, int steps,
                          const Executor& executor) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(train_step(ts, state, batch, executor));
  return losses;
}

}  // namespace kiln
