#pragma once
// Optimizers as graph ops: one graph per training step, the joint graph of the loss followed
// by the optimizer's pointwise update, so that the whole step compiles as one program.
//
//   train_step(params..., state..., batch..., step) -> (loss, new params..., new state...)
//
// `step` is a 0-d f32 input: the number of this step, counting from 1 (torch.optim's state
// "step" after its increment), used by SGD's first-step momentum and AdamW's bias correction.
// The update formulas are those of torch.optim.SGD and torch.optim.AdamW (maximize=False,
// amsgrad=False).
//
//   TracedGraph loss = trace([&](const std::vector<Tensor>& b) {
//     return std::vector<Tensor>{mean(square(mlp(b[0]) - b[1]))};
//   }, {x, y});
//   TrainStep ts = make_train_step(loss, AdamWConfig{.lr = 1e-2});
//   TrainState st = ts.init(loss.parameters);
//   std::vector<double> losses = train(ts, st, {x.data(), y.data()}, 20);
//
// or, for a module, the Trainer does the tracing and writes the parameters back:
//   Trainer trainer(mlp, [&](const std::vector<Tensor>& b) { return mean(square(mlp(b[0]) - b[1])); },
//                   {x, y}, AdamWConfig{.lr = 1e-2});
//   for (int i = 0; i < 20; ++i) trainer.step({x, y});
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/compile.h"
#include "frontend/autograd.h"
#include "frontend/nn/module.h"
#include "frontend/trace.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln {

struct SGDConfig {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

using OptimizerConfig = std::variant<SGDConfig, AdamWConfig>;

// Loss scaling for f16 training (torch.amp.GradScaler), inside the step graph, with no host
// synchronization: the loss's gradient starts at `scale` instead of 1 (so small f16 gradients
// do not flush to zero), the gradients are unscaled, one reduction over all of them finds an
// inf or NaN, and then the step is skipped (parameters and optimizer state unchanged, and
// AdamW's step count does not advance) and the scale multiplied by `backoff_factor`; after
// `growth_interval` good steps in a row it is multiplied by `growth_factor`. The scale, the
// count of good steps and the count of skipped steps are three more state tensors (f32[]).
// The factors are powers of two, so that scaling and unscaling are exact.
struct GradScalerConfig {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Data-parallel training (DDP's semantics, as graph ops): each of `world_size` ranks runs the
// step on its part of the batch, and the gradients are averaged over the ranks before the
// update, in buckets of about `bucket_bytes` (PyTorch's default 25 MiB), filled in the reverse
// order of the parameters (the order the backward makes their gradients), one all_reduce
// (mean) per bucket. `KILN_LOGS=ddp` prints the buckets. Such a step runs compiled in a
// process group (frontend/distributed.h), or on the reference interpreter's simulated group
// (interpret_group).
//
// shard_parameters: FSDP (ZeRO-3) instead. Each rank holds 1/world_size of every parameter
// (flattened, zero-padded to a multiple of world_size) and of its optimizer state; the step
// all-gathers each parameter before the forward uses it and again before the backward does
// (so that the whole parameter is freed in between), and reduce-scatters its gradient (the
// derivative of all_gather), averaged over the ranks. The step's parameter inputs are shards:
// TrainStep::shard makes them from the whole parameters, parameter_gather undoes it.
struct DataParallelConfig {
  int64_t world_size = 1;
  int64_t bucket_bytes = 25 << 20;
  bool shard_parameters = false;
};

// Parameters, optimizer state and the step count between steps.
struct TrainState {
  std::vector<HostTensor> params;
  std::vector<HostTensor> state;
  int64_t step = 0;  // steps taken so far
  // The step's buffers (TrainStep::buffer_values at init), updated by the steps that write
  // them (BatchNorm's running statistics).
  std::vector<HostTensor> buffers;
};

struct TrainStep {
  Graph graph{"train_step"};
  int num_params = 0;
  int num_state = 0;  // SGD with momentum: one buffer per parameter; AdamW: exp_avg and exp_avg_sq per parameter
  int num_batch = 0;
  // Graph inputs: the parameters, the state, the batch, the step count, then the buffers.
  std::vector<std::string> param_names;  // graph input names, as in the traced loss graph
  std::vector<std::string> param_paths;  // module paths ("fc.weight"), "" where unknown
  std::vector<std::string> state_names;  // "<param>_momentum_buffer", "<param>_exp_avg", "<param>_exp_avg_sq"
  std::vector<double> state_fill;        // each state tensor's first value: 0, but a grad scaler's scale
  // Named tensors the loss reads that are not trained (a module's buffers): inputs after the step
  // count, by graph input name and module path, with their values when the loss was traced
  // (train_step gives those; a compiled module step reads the module's buffers at each step).
  std::vector<std::string> buffer_names, buffer_paths;
  std::vector<HostTensor> buffer_values;
  // The buffers the loss writes in place (TracedGraph::written: BatchNorm's running statistics
  // in training), as indices into buffer_names: the graph's last outputs are their new values,
  // in this order, after the loss, the parameters, the state.
  std::vector<size_t> written_buffers;
  // With a grad scaler: the index in the state of its scale (the good-step count and the
  // skipped-step count follow); -1 without one.
  int scaler_state = -1;

  // FSDP (DataParallelConfig::shard_parameters): the ranks the parameters are sharded over,
  // and each whole parameter's meta; 0 and empty when the parameters are whole.
  int64_t shard_world = 0;
  std::vector<TensorMeta> whole_param_metas;

  // Parameters as given and the optimizer state's first values, step 0.
  TrainState init(const std::vector<HostTensor>& params) const;
  // What a rank keeps between steps: its parameters (shards with FSDP) and optimizer state.
  int64_t kept_bytes() const;
  // FSDP: rank `rank`'s shards of the whole parameters (the step's parameter inputs).
  std::vector<HostTensor> shard(const std::vector<HostTensor>& whole, int64_t rank) const;
  // State tensor i's first value (zeros; a grad scaler's scale).
  HostTensor initial_state(size_t i) const;
};

// The loss graph as kiln::trace returns it: the batch (its example inputs) first, then the
// lifted tensors, one 0-d floating output. Every named floating lifted tensor (a parameter) is
// trained, but a module's buffers (nn::Module::register_buffer), which are inputs of the step;
// unnamed ones (captured constants) become `constant` nodes of the step. Buffers the loss
// writes (TracedGraph::written) are outputs of the step, after the state. kiln::Error for no
// parameters, a non-scalar loss, a write to a parameter or a constant, or a bad config.
TrainStep make_train_step(const TracedGraph& loss, const OptimizerConfig& optimizer,
                          const std::optional<GradScalerConfig>& scaler = std::nullopt,
                          const std::optional<DataParallelConfig>& data_parallel = std::nullopt);

// DDP's start: a graph that takes a train step's parameters and returns rank `src`'s values of
// them on every rank (one broadcast per parameter), so that all ranks start equal.
Graph parameter_broadcast(const TrainStep& ts, int64_t world_size, int64_t src = 0);

// FSDP's way back: a graph that takes a sharded train step's parameter shards and returns the
// whole parameters on every rank (one all_gather each), to evaluate or save them.
Graph parameter_gather(const TrainStep& ts);

// Runs one step: feeds params, state, batch and step+1, keeps the new params and state.
// Returns the loss (of the parameters before the update).
double train_step(const TrainStep& ts, TrainState& state, const std::vector<HostTensor>& batch, const Executor& executor = {});
// Runs `steps` steps on the same batch; returns each step's loss.
std::vector<double> train(const TrainStep& ts, TrainState& state, const std::vector<HostTensor>& batch, int steps,
                          const Executor& executor = {});

// The Trainer (a module trained step by step) is in frontend/trainer.h.

}  // namespace kiln
