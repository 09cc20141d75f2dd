#pragma once
// Trains a module's parameters: traces `loss_fn` once on the example batch (so that a mistake
// in it is an error here, not at the first step), and after each step the new parameter values
// are in the module's parameter tensors (which alias the module's own, as in PyTorch).
//
// A Trainer is a thin wrapper over kiln::compile(module, loss_fn, optimizer) (frontend/
// compile.h): the same step graph, guards (a batch of new shapes traces again), cache limit,
// logs and debug folders. What it adds is where the step runs:
// - on the CPU, through `executor` (the reference interpreter when empty; pass
//   compiled_executor() for speed);
// - on a GPU (after module.cuda()), compiled for that GPU, the optimizer state made there, and
//   every step on device memory: the batch must be on the GPU too (a batch elsewhere is an
//   error, not a copy per step), the new parameters replace the old in the module's tensors
//   without a copy, and only the step number (4 bytes) goes over and the loss (4 bytes) comes
//   back.
//
// With `data_parallel` (DDP, in a process group: frontend/distributed.h), every rank's module
// starts from rank 0's parameters (broadcast when the Trainer is made), each rank steps on its
// own batch, and the gradients are averaged over the ranks in buckets. On the CPU it needs a
// compiled executor (the interpreter runs one process). FSDP changes the parameters' shapes,
// which a module's tensors keep: it goes through make_train_step (shard_parameters).
#include <optional>
#include <vector>

#include "frontend/compile.h"

namespace kiln {

class Trainer {
 public:
  Trainer(nn::Module& module, const ScalarFn& loss_fn, const std::vector<Tensor>& example_batch,
          const OptimizerConfig& optimizer, Executor executor = {},
          const std::optional<DataParallelConfig>& data_parallel = std::nullopt);
  // One step on a batch; returns the loss before the update.
  double step(const std::vector<Tensor>& batch);

  // The step graph of the newest batch shapes.
  const TrainStep& train_step() const { return step_.train_step(); }
  // Parameters, optimizer state and the step count (host copies where they live on a GPU).
  TrainState state() const { return step_.state(); }
  const Device& device() const { return step_.device(); }
  const CompileStats& stats() const { return step_.stats(); }

 private:
  CompiledTrainStep step_;
};

}  // namespace kiln
