// kiln demo [--out DIR] [--seed N]: the end-to-end tour. Builds the default MiniGPT, traces
// its forward pass on a batch of token ids, prints the graph, runs the default pass
// pipeline writing each stage as .kir (00_traced.kir, 01_<pass>.kir, ...), draws the
// optimized graph, runs it on the reference interpreter, checks it against the traced graph,
// and prints the next-token distribution's top entries for each sequence.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>

#include "backend/compile.h"
#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#include "runtime/cuda/stream.h"
#endif
#include "frontend/nn/minigpt.h"
#include "frontend/device.h"
#include "frontend/optim.h"
#include "runtime/cpu/jit.h"
#include "frontend/trace.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kBatch = 2, kSeqLen = 16, kTopK = 5;

// Runs the pipeline one pass at a time so that each stage lands in its own numbered file,
// and merges the per-pass reports into one.
PassReport run_stages(Graph& g, const fs::path& out) {
  PassReport merged;
  merged.rounds = 1;
  const auto& pipeline = default_pipeline();
  for (size_t i = 0; i < pipeline.size(); ++i) {
    PassReport r = run_pipeline(g, {pipeline[i]});
    merged.runs.insert(merged.runs.end(), r.runs.begin(), r.runs.end());
    write_text((out / fmt::format("{:02}_{}.kir", i + 1, pipeline[i])).string(), print_graph(g));
  }
  merged.reached_fixpoint = !merged.changed();
  return merged;
}

void draw(const Graph& g, const fs::path& out, const std::string& stem) {
  write_graph_image(g, (out / (stem + ".dot")).string());
  if (!find_dot_program()) {
    fmt::print("Graphviz is not installed: wrote {}.dot only (apt-get install graphviz for the SVG)\n", stem);
    return;
  }
  write_graph_image(g, (out / (stem + ".svg")).string());
  fmt::print("drew {}\n", (out / (stem + ".svg")).string());
}

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
  return m;
}

// Softmax over the last position's logits of each sequence, and its top entries.
void print_top_tokens(const HostTensor& logits) {
  const int64_t B = logits.shape()[0], T = logits.shape()[1], V = logits.shape()[2];
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = (b * T + (T - 1)) * V;
    std::vector<double> p(V);
    double mx = -INFINITY;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits.get(base + v));
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += p[v] = std::exp(logits.get(base + v) - mx);
    for (double& x : p) x /= sum;
    std::vector<int64_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + kTopK, ids.end(), [&](int64_t x, int64_t y) { return p[x] > p[y]; });
    std::string line;
    for (int64_t k = 0; k < kTopK; ++k) line += fmt::format("{}{:>4} ({:.4f})", k ? "  " : "", ids[k], p[ids[k]]);
    fmt::print("  sequence {}: {}\n", b, line);
  }
}

double ms_of(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Compiles the forward graph for the CPU, writing every backend stage to out/cpu/, and
// checks the compiled logits against the interpreter's.
void compile_for_cpu(const Graph& g, const std::vector<HostTensor>& inputs, const HostTensor& expected,
                     const fs::path& out) {
  backend::CpuCompileOptions opts;
  opts.dump_dir = (out / "cpu").string();
  backend::CompiledGraph compiled = backend::compile_cpu(g, opts);
  fmt::print("== compiled for the CPU (decompose, fuse, C++, clang + ORC JIT; stages in {})\n{}", opts.dump_dir,
             compiled.report.str());
  HostTensor logits;
  double compiled_ms = ms_of([&] { logits = compiled.run(inputs).at(0); });
  double interpreted_ms = ms_of([&] { interpret(g, inputs); });
  fmt::print("  max |compiled - interpreter| = {:.3g}; one run: {:.2f} ms compiled, {:.1f} ms interpreted\n",
             max_abs_diff(logits, expected), compiled_ms, interpreted_ms);
}

// Compiles the forward graph for CUDA (NVRTC: no GPU needed), writing the stages, the CUDA C,
// PTX and CUBINs to out/cuda/; runs and checks it where there is a GPU.
void compile_for_cuda(const Graph& g, const std::vector<HostTensor>& inputs, const HostTensor& expected, const fs::path& out) {
#if KILN_HAVE_CUDA
  backend::CompileOptions opts;
  opts.device = Device::cuda(0);
  opts.dump_dir = (out / "cuda").string();
  backend::CompiledGraph compiled = backend::compile(g, opts);
  fmt::print("== compiled for CUDA (the same driver; CUDA C through NVRTC, matmuls through cuBLASLt; stages in {})\n{}",
             opts.dump_dir, compiled.report.str());
  std::string why;
  if (!backend::cuda_device_present(&why)) {
    fmt::print("  not run: {}\n", why);
    return;
  }
  compiled.run(inputs);  // the first run loads the CUBINs
  HostTensor logits;
  double ms = ms_of([&] { logits = compiled.run(inputs).at(0); });
  fmt::print("  max |cuda - interpreter| = {:.3g}; one run: {:.2f} ms with host copies\n", max_abs_diff(logits, expected), ms);
#else
  (void)g, (void)inputs, (void)expected, (void)out;
  fmt::print("== CUDA: this build has no CUDA backend (no CUDA toolkit was found when it was built)\n");
#endif
}

// The same training on the GPU, as a PyTorch user writes it: the model moves once
// (model.cuda()), the batch is put on the device, and a Trainer compiles the step for the GPU
// and keeps the parameters and AdamW's state there between steps.
void train_on_the_gpu(const nn::MiniGPTConfig& cfg, uint64_t seed, const HostTensor& ids, const HostTensor& next) {
#if KILN_HAVE_CUDA
  std::string why;
  if (!backend::cuda_device_present(&why)) {
    fmt::print("== training on the GPU: skipped ({})\n", why);
    return;
  }
  nn::MiniGPT model(cfg, seed);
  model.cuda();
  Tensor tokens = Tensor(ids).cuda(), targets = Tensor(next).cuda();
  std::vector<double> losses;
  double compile_ms = 0;
  std::optional<Trainer> trainer;
  compile_ms = ms_of([&] {
    trainer.emplace(model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); },
                    std::vector<Tensor>{tokens, targets}, AdamWConfig{.lr = 3e-3});
  });
  auto before = runtime::cuda::transfer_stats();
  double ms = ms_of([&] {
    for (int i = 0; i < 8; ++i) losses.push_back(trainer->step({tokens, targets}));
  });
  auto after = runtime::cuda::transfer_stats();
  std::string line;
  for (double l : losses) line += fmt::format("{}{:.4f}", line.empty() ? "" : " ", l);
  fmt::print("== training on the GPU (model.cuda(); the step compiled for {}, parameters and AdamW state on the device)\n",
             trainer->device().str());
  fmt::print("  loss per step: {}  ({:.0f} ms to trace and compile, {:.1f} ms for {} steps)\n", line, compile_ms, ms,
             losses.size());
  fmt::print("  host<->device per step: {} B over, {} B back (the step number, the loss, the kernels' error records)\n",
             (after.host_to_device_bytes - before.host_to_device_bytes) / 8,
             (after.device_to_host_bytes - before.device_to_host_bytes) / 8);
#else
  (void)cfg, (void)seed, (void)ids, (void)next;
#endif
}

// A training step (forward, backward, AdamW) is one graph; it runs compiled when the CPU
// backend is built, else on the interpreter.
void train_a_few_steps(const nn::MiniGPT& model, const HostTensor& ids, uint64_t seed, const fs::path& out) {
  HostTensor next = random_tensor(TensorMeta(DType::I64, ids.shape()), seed + 1, model.config().vocab_size);
  Tensor tokens(ids, "tokens"), targets(next, "targets");
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{model.loss(b[0], b[1])}; },
                           {tokens, targets}, "loss");
  TrainStep step = make_train_step(loss, AdamWConfig{.lr = 3e-3});
  write_text((out / "train_step.kir").string(), print_graph(step.graph));
  Executor executor;  // empty: the reference interpreter
  std::string how = "the reference interpreter (kiln was built without the CPU backend)";
  if (runtime::cpu::jit_available()) {
    executor = compiled_executor();
    how = "the compiled training step";
  }
  TrainState state = step.init(loss.parameters);
  fmt::print("== training on one batch with AdamW ({} nodes in one train-step graph, train_step.kir), on {}\n",
             step.graph.num_nodes(), how);
  std::vector<double> losses;
  double ms = ms_of([&] { losses = train(step, state, {ids, next}, 8, executor); });
  std::string line;
  for (double l : losses) line += fmt::format("{}{:.4f}", line.empty() ? "" : " ", l);
  fmt::print("  loss per step: {}  ({:.0f} ms for {} steps, compilation included)\n", line, ms, losses.size());
  train_on_the_gpu(model.config(), seed, ids, next);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  struct Opts {
    std::string out = "kiln-demo-out";
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("demo", "Trace a small GPT, optimize it, draw it, run it: every stage in --out");
  cmd->add_option("--out", o->out, "output folder")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the model's weights and the token ids")->capture_default_str();
  cmd->callback([o] {
    const fs::path out = o->out;
    make_dirs(o->out);

    nn::MiniGPTConfig cfg;
    nn::MiniGPT model(cfg, o->seed);
    fmt::print("== MiniGPT: vocab {}, d_model {}, {} heads, {} layers, context {} ({} parameters)\n", cfg.vocab_size,
               cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.context, model.num_parameters());

    // Token ids in [0, vocab): a batch of kBatch sequences of kSeqLen tokens.
    HostTensor ids = random_tensor(TensorMeta(DType::I64, {kBatch, kSeqLen}), o->seed, cfg.vocab_size);
    Tensor tokens(ids, "tokens");
    TracedGraph traced = trace([&](const Tensor& t) { return model.forward(t); }, tokens, "forward");
    fmt::print("== traced graph ({} nodes; the weights are its inputs after %tokens)\n{}\n", traced.graph.num_nodes(),
               print_graph(traced.graph));
    write_text((out / "00_traced.kir").string(), print_graph(traced.graph));

    Graph optimized = traced.graph.clone();
    PassReport report = run_stages(optimized, out);
    fmt::print("== passes ({} nodes -> {})\n{}\n", traced.graph.num_nodes(), optimized.num_nodes(),
               format_report(report));
    draw(optimized, out, "graph");

    std::vector<HostTensor> inputs = traced.graph_inputs({ids});
    HostTensor logits = interpret(optimized, inputs).at(0);
    HostTensor reference = interpret(traced.graph, inputs).at(0);
    fmt::print("== ran the optimized graph on the reference interpreter\n  logits: {}\n", summarize(logits));
    fmt::print("  max |optimized - traced| = {:.3g}\n", max_abs_diff(logits, reference));
    fmt::print("== next-token distribution at the last position (top {} token ids, probability)\n", kTopK);
    print_top_tokens(logits);
    if (runtime::cpu::jit_available()) compile_for_cpu(optimized, inputs, logits, out);
    else fmt::print("== the CPU backend is not built (no LLVM): skipping compilation\n");
    compile_for_cuda(optimized, inputs, logits, out);
    train_a_few_steps(model, ids, o->seed, out);
    fmt::print("== wrote the stages to {}/ (00_traced.kir ... , graph.dot{}, cpu/, cuda/, train_step.kir)\n", o->out,
               find_dot_program() ? ", graph.svg" : "");
  });
}

}  // namespace kiln::cli
