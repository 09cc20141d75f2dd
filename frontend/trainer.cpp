#include "frontend/trainer.h"

#include "ir/error.h"

namespace kiln {

namespace {

CompiledTrainStep make_step(nn::Module& module, const ScalarFn& loss_fn, const std::vector<Tensor>& example_batch,
                            const OptimizerConfig& optimizer, Executor executor, const std::optional<DataParallelConfig>& data_parallel) {
  if (data_parallel && data_parallel->shard_parameters)
    fail("Trainer: FSDP shards the parameters, and a module keeps them whole: use make_train_step with "
         "DataParallelConfig::shard_parameters (TrainStep::shard, parameter_gather)");
  auto params = module.named_parameters();
  const Device device = params.empty() ? Device::cpu() : params.front().second.device();
  if (device.kind != Device::Kind::CPU && executor)
    fail("Trainer: the parameters are on {}; an Executor runs host tensors. Leave it out: the step is compiled "
         "for {}",
         device.str(), device.str());
  if (device.kind == Device::Kind::CPU && !executor && data_parallel && data_parallel->world_size > 1)
    fail("Trainer: data-parallel training on the CPU runs compiled: pass compiled_executor()");
  CompileOptions options;
  options.name = "Trainer";
  options.data_parallel = data_parallel;
  return compile_trainer_step(module, loss_fn, optimizer, std::move(options), example_batch, std::move(executor));
}

}  // namespace

Trainer::Trainer(nn::Module& module, const ScalarFn& loss_fn, const std::vector<Tensor>& example_batch,
                 const OptimizerConfig& optimizer, Executor executor, const std::optional<DataParallelConfig>& data_parallel)
    : step_(make_step(module, loss_fn, example_batch, optimizer, std::move(executor), data_parallel)) {}

double Trainer::step(const std::vector<Tensor>& batch) {
  const Device& device = step_.device();
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i].defined() && !batch[i].is_traced() && batch[i].device() != device)
      fail("Trainer: batch tensor {} ({}) is on {}, the parameters on {}: move it with .to({}){}", i, batch[i].str(),
           batch[i].device().str(), device.str(), device.str(), device.kind == Device::Kind::CUDA ? " (or .cuda())" : "");
  return step_(batch);
}

}  // namespace kiln
