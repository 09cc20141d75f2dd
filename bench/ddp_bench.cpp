// kiln's side of the data-parallel scaling comparison (bench/ddp_scaling.sh, beside
// bench/torch_ddp_bench.py): one rank of `kiln launch -n N kiln_bench_ddp ...`. Every rank
// compiles the training step (AdamW) of the same model on its own batch (weak scaling: the
// batch per rank is fixed), with DDP (bucketed all-reduce, overlapped with the backward) or FSDP
// (sharded parameters), on its GPU (LOCAL_RANK) or the CPU, and times it: the median of `steps`
// runs after `warmup`, each run synchronized at its end, with the same inputs (as kiln_bench_cuda
// times a train step). Rank 0 prints one table row: the world size, ms per step, the whole
// group's samples per second, and the memory one step holds per rank.
//
//   kiln_bench_ddp [--model block|minigpt] [--fsdp] [--bf16] [--device cuda|cpu] [--steps N] [--warmup N] [--dump DIR]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "backend/compile.h"
#include "frontend/kiln.h"

using namespace kiln;

namespace {

struct Args {
  std::string model = "block";
  bool fsdp = false, bf16 = false;
  Device device = Device::cuda(0);
  int steps = 30, warmup = 5;
  std::string dump;  // rank 0's compile stages (kiln compile --dump's files)
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("{} needs a value", s);
      return argv[++i];
    };
    if (s == "--model") a.model = next();
    else if (s == "--fsdp") a.fsdp = true;
    else if (s == "--bf16") a.bf16 = true;
    else if (s == "--device") a.device = next() == "cpu" ? Device::cpu() : Device::cuda(0);
    else if (s == "--steps") a.steps = std::stoi(next());
    else if (s == "--warmup") a.warmup = std::stoi(next());
    else if (s == "--dump") a.dump = next();
    else fail("unknown argument {} (kiln_bench_ddp [--model block|minigpt] [--fsdp] [--bf16] [--device cuda|cpu] [--steps N] [--warmup N])", s);
  }
  if (a.model != "block" && a.model != "minigpt") fail("--model {}: block or minigpt", a.model);
  return a;
}

struct Model {
  TracedGraph loss;
  std::vector<HostTensor> batch;
  int64_t samples = 0;  // per rank and step
  std::string name;
};

// The models of kiln_bench_cuda's rows: the GPT-2 block (d 768, 12 heads) on [8, 1024, 768],
// mean(block(x)^2); MiniGPT (vocab 600, d 64, 4 heads, 2 layers, context 32) on 64 sequences.
Model build(const Args& a, int rank) {
  Model m;
  Autocast scope(a.bf16 ? std::optional<DType>(DType::BF16) : std::nullopt);
  if (a.model == "block") {
    auto block = std::make_shared<nn::Block>(768, 12, 1024, 0);
    Tensor x = randn({8, 1024, 768}, 1 + static_cast<uint64_t>(rank));
    m.loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square((*block)(b[0])))}; }, {x}, "gpt2_block_loss");
    m.batch = {x.data()};
    m.samples = 8;
    m.name = fmt::format("GPT-2 block train step{}, batch 8 x seq 1024 a rank", a.bf16 ? " bf16" : "");
  } else {
    nn::MiniGPT model(nn::MiniGPTConfig{}, 0);
    const int64_t T = model.config().context, V = model.config().vocab_size;
    Tensor tokens = randint(0, V, {64, T}, 1 + static_cast<uint64_t>(rank)), targets = randint(0, V, {64, T}, 100 + static_cast<uint64_t>(rank));
    m.loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{model.loss(b[0], b[1])}; }, {tokens, targets}, "minigpt_loss");
    m.batch = {tokens.data(), targets.data()};
    m.samples = 64;
    m.name = fmt::format("MiniGPT train step{}, batch 64 a rank", a.bf16 ? " bf16" : "");
  }
  return m;
}

int run(const Args& a) {
  dist::init_process_group();
  const int rank = dist::rank(), world = dist::world_size();
  Device device = a.device.kind == Device::Kind::CUDA ? Device::cuda(dist::local_rank()) : Device::cpu();
  Model m = build(a, rank);
  DataParallelConfig dp;
  dp.world_size = world;
  dp.shard_parameters = a.fsdp;
  TrainStep ts = make_train_step(m.loss, AdamWConfig{}, std::nullopt, dp);
  std::vector<HostTensor> whole;
  for (size_t i = 0; i < m.loss.parameters.size(); ++i)
    if (!m.loss.parameter_paths[i].empty() && is_floating(m.loss.parameters[i].dtype())) whole.push_back(m.loss.parameters[i]);
  TrainState st = ts.init(a.fsdp ? ts.shard(whole, rank) : whole);

  backend::CompileOptions o;
  o.device = device;
  if (rank == 0) o.dump_dir = a.dump;
  backend::CompiledGraph c = backend::compile(ts.graph, o);
  std::vector<Tensor> inputs;
  for (const HostTensor& p : st.params) inputs.push_back(Tensor(p).to(device));
  for (const HostTensor& s : st.state) inputs.push_back(Tensor(s).to(device));
  for (const HostTensor& b : m.batch) inputs.push_back(Tensor(b).to(device));
  inputs.push_back(Tensor(HostTensor::scalar(DType::F32, 1.0)).to(device));

  std::vector<double> ms;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out = kiln::run(c.executable, inputs);
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= a.warmup) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const int64_t kept = ts.kept_bytes();
  if (rank == 0)
    std::printf("| kiln | %s | %s | %d | %.3f | %.0f | %.1f MB | %.1f MB | %d |\n", m.name.c_str(), a.fsdp ? "FSDP" : "DDP", world, median,
                static_cast<double>(m.samples * world) / (median / 1000.0), static_cast<double>(kept) / 1e6,
                static_cast<double>(c.report.arena_bytes) / 1e6, c.report.collective_calls);
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
