// One rank of a data-parallel training run, started by `kiln launch -n N` (tests/dist/
// test_ddp.cpp): each rank trains an MLP on its part of a batch with DDP (parameters broadcast
// from rank 0, gradients averaged in buckets by compiled all_reduces), and checks after every
// step that its parameters equal those of one process training on the whole batch, which it
// computes itself. Exits 0 when they agree, 1 when not, and with kiln::Error's message on
// stderr when the group fails.
//
//   ddp_worker [--device cpu|cuda] [--steps N] [--fsdp | --trainer] [--fault die|hang|mismatch --fault-rank R --fault-step S]
//
// --trainer: the module-level API instead, a Trainer with a DataParallelConfig, whose module
// parameters are compared.
//
// --fsdp: the parameters and the optimizer state are sharded (DataParallelConfig::
// shard_parameters), each step gathers the whole parameters back to compare them, and rank 0
// prints the memory one step holds per rank, FSDP's against DDP's.
//
// The faults are for the tests of a group's failures: rank R dies (_exit(3)) or hangs before
// step S, or builds a model of another size, so that its graphs differ from the others'.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "backend/compile.h"
#include "frontend/kiln.h"
#include "ir/builder.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::max_rel_diff;
using kiln::testing::rows;

namespace {

struct Args {
  Device device = Device::cpu();
  int steps = 4;
  std::string fault;
  int fault_rank = 1, fault_step = 1;
  int64_t bucket_bytes = 600;  // two buckets of this model's gradients
  bool fsdp = false, trainer = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "--device") a.device = next() == "cuda" ? Device::cuda(0) : Device::cpu();
    else if (s == "--steps") a.steps = std::stoi(next());
    else if (s == "--fault") a.fault = next();
    else if (s == "--fault-rank") a.fault_rank = std::stoi(next());
    else if (s == "--fault-step") a.fault_step = std::stoi(next());
    else if (s == "--bucket-bytes") a.bucket_bytes = std::stoll(next());
    else if (s == "--fsdp") a.fsdp = true;
    else if (s == "--trainer") a.trainer = true;
    else throw std::runtime_error("unknown argument " + s);
  }
  return a;
}

TracedGraph mlp_loss(nn::MLP& model, const Tensor& x, const Tensor& y) {
  return trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square(model(b[0]) - b[1]))}; }, {x, y}, "loss");
}

// The Trainer's way: the module's own parameters train, rank 0's broadcast when it is made.
int run_trainer(const Args& a, const DataParallelConfig& dp, nn::MLP& model, const HostTensor& x, const HostTensor& y, const TrainStep& one,
                TrainState& single, const Executor& ex, const Device& device) {
  const int rank = dist::rank();
  const int64_t per_rank = x.shape()[0] / dist::world_size();
  SGDConfig sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  if (device.kind == Device::Kind::CUDA) model.to(device);
  Tensor xs(rows(x, rank * per_rank, per_rank)), ys(rows(y, rank * per_rank, per_rank));
  if (device.kind == Device::Kind::CUDA) xs = xs.to(device), ys = ys.to(device);
  auto loss_fn = [&](const std::vector<Tensor>& b) { return mean(square(model(b[0]) - b[1])); };
  Trainer trainer(model, loss_fn, {xs, ys}, sgd, device.kind == Device::Kind::CPU ? ex : Executor{}, dp);
  for (int s = 0; s < a.steps; ++s) {
    double loss = trainer.step({xs, ys});
    double want = train_step(one, single, {x, y}, ex);
    TrainState st = trainer.state();
    double worst = 0;
    for (size_t p = 0; p < st.params.size(); ++p) worst = std::max(worst, max_rel_diff(st.params[p], single.params[p]));
    std::printf("rank %d step %d: loss %.6f on its part (one process on the whole batch: %.6f), the module's parameters within "
                "%.2e of one process\n", rank, s, loss, want, worst);
    if (worst > 1e-5) return 1;
  }
  dist::destroy_process_group();
  return 0;
}

int run(const Args& a) {
  dist::init_process_group();
  const int rank = dist::rank(), world = dist::world_size();
  Device device = a.device;
  if (device.kind == Device::Kind::CUDA) device = Device::cuda(dist::local_rank());
  Executor ex = compiled_executor(device);
  const int64_t per_rank = 6, batch = per_rank * world;
  HostTensor x = randn({batch, 8}, 1).data(), y = randn({batch, 8}, 2).data();

  // The whole batch in one process, from rank 0's initial weights (nn::MLP's seed 4).
  nn::MLP whole_model(8, 16, /*seed=*/4);
  TracedGraph whole = mlp_loss(whole_model, Tensor(x), Tensor(y));
  SGDConfig sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  TrainStep one = make_train_step(whole, sgd);
  TrainState single = one.init(whole.parameters);

  // This rank's part, from weights of its own (seed 4 + rank) that the broadcast replaces.
  const bool odd = a.fault == "mismatch" && rank == a.fault_rank;
  nn::MLP model(8, odd ? 17 : 16, /*seed=*/4 + static_cast<uint64_t>(rank));
  TracedGraph part = mlp_loss(model, Tensor(rows(x, rank * per_rank, per_rank)), Tensor(rows(y, rank * per_rank, per_rank)));
  DataParallelConfig dp;
  dp.world_size = world;
  dp.bucket_bytes = a.bucket_bytes;
  dp.shard_parameters = a.fsdp;
  if (a.trainer) return run_trainer(a, dp, model, x, y, one, single, ex, device);
  TrainStep ddp = make_train_step(part, sgd, std::nullopt, dp);
  // Rank 0's weights everywhere: broadcast whole (a step of whole parameters names them), then
  // FSDP keeps this rank's shards.
  std::optional<TrainStep> whole_steps;
  if (a.fsdp) whole_steps.emplace(make_train_step(part, sgd));
  const TrainStep& whole_step = a.fsdp ? *whole_steps : ddp;
  TrainState start = whole_step.init(part.parameters);
  dist::broadcast_parameters(whole_step, start, ex);
  for (int p = 0; p < ddp.num_params; ++p)
    if (max_rel_diff(start.params[static_cast<size_t>(p)], single.params[static_cast<size_t>(p)]) != 0) {
      std::cerr << "rank " << rank << ": after the broadcast, " << ddp.param_names[static_cast<size_t>(p)] << " is not rank 0's\n";
      return 1;
    }
  TrainState state = a.fsdp ? ddp.init(ddp.shard(start.params, rank)) : start;
  Graph gather = a.fsdp ? parameter_gather(ddp) : Graph("unused");
  if (a.fsdp && rank == 0) {
    // What one step holds per rank: its parameters and optimizer state (inputs, kept between
    // steps) and the intermediates of its planned arena, FSDP's against DDP's.
    DataParallelConfig plain = dp;
    plain.shard_parameters = false;
    TrainStep ddp_step = make_train_step(part, sgd, std::nullopt, plain);
    for (const TrainStep* t : {&ddp_step, &ddp}) {
      backend::CompileOptions o;
      o.device = device;
      backend::CompiledGraph c = backend::compile(t->graph, o);
      const int64_t kept = t->kept_bytes();
      std::printf("memory per rank, %s: parameters and optimizer state %lld B, intermediates %lld B (arena), %d collectives\n",
                  t == &ddp ? "FSDP" : "DDP ", static_cast<long long>(kept), static_cast<long long>(c.report.arena_bytes),
                  c.report.collective_calls);
    }
  }

  Graph loss_mean("loss_mean");
  {
    Builder b(loss_mean);
    Value l = loss_mean.add_input("loss", TensorMeta(DType::F32, {}));
    loss_mean.set_outputs({b.op(Op::AllReduce, {l}, Attrs{{"world_size", int64_t(world)}, {"op", std::string("mean")}}).v});
  }
  const std::vector<HostTensor> mine = {rows(x, rank * per_rank, per_rank), rows(y, rank * per_rank, per_rank)};
  for (int s = 0; s < a.steps; ++s) {
    if (rank == a.fault_rank && s == a.fault_step) {
      if (a.fault == "die") {
        std::cerr << "rank " << rank << ": dying before step " << s << " (--fault die)\n";
        std::_Exit(3);
      }
      if (a.fault == "hang") {
        std::cerr << "rank " << rank << ": hanging before step " << s << " (--fault hang)\n";
        std::this_thread::sleep_for(std::chrono::hours(1));
      }
    }
    double loss = train_step(ddp, state, mine, ex);
    double want = train_step(one, single, {x, y}, ex);
    // The mean of the ranks' losses is the whole batch's (equal parts): one more all_reduce.
    const std::vector<HostTensor> mine_loss{HostTensor::scalar(DType::F32, loss)};
    const double mean_loss = ex(loss_mean, mine_loss)[0].get(0);
    if (std::abs(mean_loss - want) > 1e-5 * std::abs(want)) {
      std::fprintf(stderr, "rank %d step %d: the ranks' mean loss %.7f differs from one process's %.7f\n", rank, s, mean_loss, want);
      return 1;
    }
    const std::vector<HostTensor> params = a.fsdp ? ex(gather, state.params) : state.params;
    double worst = 0;
    for (int p = 0; p < ddp.num_params; ++p)
      worst = std::max(worst, max_rel_diff(params[static_cast<size_t>(p)], single.params[static_cast<size_t>(p)]));
    std::printf("rank %d step %d: loss %.6f on its part, %.6f the ranks' mean (one process on the whole batch: %.6f), parameters "
                "within %.2e of one process\n", rank, s, loss, mean_loss, want, worst);
    if (worst > 1e-5) {
      std::fprintf(stderr, "rank %d step %d: the parameters differ from one process's by %.3e (over 1e-5)\n", rank, s, worst);
      return 1;
    }
  }
  dist::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
