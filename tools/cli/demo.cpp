// kiln demo [--out DIR] [--seed N] [--steps N] [--device auto|cpu|cuda]: the whole stack
// learning something real. A MiniGPT (vocab 600, d_model 64) learns English and Spanish verb
// conjugations that the repository generates (frontend/data/corpus.h), tokenized by a byte-level
// BPE of 600 entries (frontend/data/tokenizer.h):
//   - the training step (forward, loss, backward, AdamW) is one graph, compiled by
//     kiln::compile(model, loss_fn, optimizer); the held-out loss and the generation are
//     kiln::compile'd functions too, under NoGradGuard;
//   - it prints the held-out loss before and after, a progress bar, the completions of
//     conjugations the model never saw, and the debug folder where every compiled graph's
//     stages are (traced, decomposed, fused, kernel IR, sources, SVGs, report.json).
// It runs on the GPU when one is present, else on the CPU.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "backend/cuda_backend.h"
#include "frontend/compile.h"
#include "frontend/data/corpus.h"
#include "frontend/data/tokenizer.h"
#include "frontend/generate.h"
#include "frontend/nn/minigpt.h"
#include "frontend/ops.h"
#include "ir/error.h"
#include "runtime/cpu/jit.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kBatch = 32, kSeq = 32;  // 1024 tokens a step; kSeq is MiniGPT's context
constexpr int kEvalBatches = 8;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Device pick_device(const std::string& want) {
  if (want == "cpu") return Device::cpu();
  std::string why;
  bool gpu = backend::cuda_device_present(&why);
  if (want == "cuda" && !gpu) fail("--device cuda: {}", why);
  return gpu ? Device::cuda(0) : Device::cpu();
}

std::pair<Tensor, Tensor> batch_tensors(const data::Batch& b, Device device) {
  return {tensor_of_ints(b.tokens, {b.batch, b.seq_len}).to(device), tensor_of_ints(b.targets, {b.batch, b.seq_len}).to(device)};
}

// One line that redraws itself on a terminal; elsewhere (a log, CI) a line every tenth.
class ProgressBar {
 public:
  explicit ProgressBar(int total) : total_(total), tty_(isatty(STDOUT_FILENO)) {}
  void update(int step, double loss, double tokens_per_s) {
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * static_cast<int64_t>(step) / total_);
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '-');
    std::string line = fmt::format("  [{}] step {:4}/{}  loss {:.3f}  {:.0f} tokens/s", bar, step, total_, loss, tokens_per_s);
    if (tty_) {
      fmt::print("\r{}", line);
      if (step == total_) fmt::print("\n");
      std::fflush(stdout);
    } else if (step == total_ || step % std::max(1, total_ / 10) == 0) {
      fmt::print("{}\n", line);
    }
  }

 private:
  int total_;
  bool tty_;
};

// Mean loss over fixed batches of a stream (the same batches before and after training).
double mean_loss(const CompiledFunction& loss, const std::vector<int64_t>& stream, Device device, uint64_t seed) {
  NoGradGuard no_grad;
  double sum = 0;
  for (int i = 0; i < kEvalBatches; ++i) {
    auto [x, y] = batch_tensors(data::sample_batch(stream, kBatch, kSeq, seed + static_cast<uint64_t>(i)), device);
    sum += loss(std::vector<Tensor>{x, y})[0].item();
  }
  return sum / kEvalBatches;
}

// Greedy completion of `prompt` up to the end of the line ('\n' before the prompt, as in the
// training stream, where every line follows a newline).
std::string complete(const CompiledFunction& logits_of, const data::Tokenizer& tok, const std::string& prompt,
                     Device device) {
  GenerateOptions g;
  g.context = kSeq;
  g.max_new_tokens = 12;
  g.stop_token = data::kNewlineToken;
  g.pad_token = data::kNewlineToken;
  return tok.decode(generate(logits_of, tok.encode("\n" + prompt), g, device));
}

// The held-out lines' prompts ("es futuro comer: yo") and answers (" comeré").
struct Probe {
  std::string prompt, answer;
};
std::vector<Probe> probes_of(const std::vector<std::string>& lines) {
  std::vector<Probe> out;
  for (const std::string& l : lines) {
    size_t colon = l.find(':');
    size_t space = l.find(' ', colon + 2);  // "key: person answer": the person ends the prompt
    if (colon == std::string::npos || space == std::string::npos) continue;
    out.push_back({l.substr(0, space), l.substr(space)});
  }
  return out;
}

void run_demo(const std::string& out_dir, uint64_t seed, int steps, const std::string& device_name) {
  auto t_start = Clock::now();
  const Device device = pick_device(device_name);
  if (device.kind == Device::Kind::CPU && !runtime::cpu::jit_available())
    fail("the demo compiles for the CPU, and this kiln was built without its CPU backend (LLVM): install "
         "llvm-14-dev and libclang-14-dev and build again, or run it on a machine with a GPU");
  const fs::path debug_dir = fs::absolute(fs::path(out_dir) / "debug");
  fs::remove_all(debug_dir);  // the folders are numbered from 000 on each run

  data::Corpus corpus = data::conjugation_corpus(seed);
  auto t0 = Clock::now();
  data::Tokenizer tok = data::Tokenizer::train(corpus.train, 600);
  std::vector<int64_t> train_stream = data::encode_lines(tok, corpus.train);
  std::vector<int64_t> heldout_stream = data::encode_lines(tok, corpus.heldout);
  size_t train_bytes = 0;
  for (const std::string& l : corpus.train) train_bytes += l.size() + 1;
  fmt::print("== the corpus: {} lines of English and Spanish verb conjugations, {} more held out (whole verb+tense "
             "combinations the model never sees)\n",
             corpus.train.size(), corpus.heldout.size());
  for (size_t i = 0; i < 3 && i < corpus.train.size(); ++i) fmt::print("     {}\n", corpus.train[i]);
  fmt::print("== tokenizer: byte-level BPE with {} entries, learned in {:.0f} ms: {} tokens for {} bytes ({:.1f} bytes "
             "a token)\n",
             tok.vocab_size(), 1e3 * seconds_since(t0), train_stream.size(), train_bytes,
             static_cast<double>(train_bytes) / static_cast<double>(train_stream.size()));

  nn::MiniGPTConfig cfg;
  nn::MiniGPT model(cfg, seed);
  fmt::print("== MiniGPT: vocab {}, d_model {}, {} heads, {} layers, context {}: {} parameters, on {}\n", cfg.vocab_size,
             cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.context, model.num_parameters(), device.str());

  CompileOptions options;
  options.device = device;
  options.debug_dir = debug_dir.string();
  options.debug_svg = true;  // the demo's folder is for looking at: fusion groups drawn in fused.svg
  options.name = "train_step";
  CompiledTrainStep train_step = compile(
      model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); }, AdamWConfig{.lr = 3e-3, .weight_decay = 0.0},
      options);
  options.name = "eval_loss";
  CompiledFunction eval_loss =
      compile([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{model.loss(b[0], b[1])}; }, options);
  options.name = "logits";
  CompiledFunction logits_of = compile([&](const Tensor& t) { return model(t); }, options);

  std::vector<Probe> probes = probes_of(corpus.heldout);
  const double heldout_before = mean_loss(eval_loss, heldout_stream, device, 1000);
  fmt::print("   held-out loss before training: {:.3f} (a uniform guess over 600 tokens: {:.3f})\n", heldout_before,
             std::log(600.0));

  fmt::print("== training: {} steps of {} sequences x {} tokens, AdamW; the step is one compiled graph\n", steps, kBatch, kSeq);
  ProgressBar bar(steps);
  double loss = 0, compile_s = 0;
  auto t_train = Clock::now();
  for (int i = 1; i <= steps; ++i) {
    auto [x, y] = batch_tensors(data::sample_batch(train_stream, kBatch, kSeq, seed * 1000003 + static_cast<uint64_t>(i)), device);
    auto t_step = Clock::now();
    loss = train_step({x, y});
    if (i == 1) compile_s = seconds_since(t_step);  // the first step traces and compiles
    double run_s = std::max(1e-9, seconds_since(t_train) - compile_s);
    bar.update(i, loss, static_cast<double>(kBatch * kSeq * (i - 1)) / run_s);
  }
  const double train_s = seconds_since(t_train);
  const double heldout_after = mean_loss(eval_loss, heldout_stream, device, 1000);
  const double train_after = mean_loss(eval_loss, train_stream, device, 2000);
  fmt::print("   {:.1f} s: {:.1f} s to trace and compile the step, {:.1f} ms a step after it\n", train_s, compile_s,
             1e3 * (train_s - compile_s) / std::max(1, steps - 1));
  fmt::print("   held-out loss: {:.3f} -> {:.3f}   (training text: {:.3f})\n", heldout_before, heldout_after, train_after);

  fmt::print("== completions of held-out conjugations (greedy; the model never saw these verb+tense pairs)\n");
  int right = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    std::string got = complete(logits_of, tok, probes[i].prompt, device);
    bool ok = got == probes[i].answer;
    right += ok;
    if (i < 10)
      fmt::print("   {:<34} ->{:<14} {}\n", probes[i].prompt + ":", got,
                 ok ? "right" : fmt::format("(expected{})", probes[i].answer));
  }
  fmt::print("   {} of {} held-out conjugations completed exactly\n", right, probes.size());

  fmt::print("== debug folder: {}\n", debug_dir.string());
  std::vector<std::pair<std::string, std::string>> folders;  // (folder, what), listed in their numbered order
  for (const std::string& f : train_step.stats().debug_folders) folders.emplace_back(f, "the training step");
  for (const std::string& f : eval_loss.stats().debug_folders) folders.emplace_back(f, "the loss, without gradients");
  for (const std::string& f : logits_of.stats().debug_folders) folders.emplace_back(f, "the logits for generation");
  std::sort(folders.begin(), folders.end());
  for (const auto& [f, what] : folders) fmt::print("   {}/  {}\n", fs::path(f).filename().string(), what);
  fmt::print("   each: 00_traced.kir, the compile folder (passes/, decomposed.kir, fused.kir, fused.svg, kernels.txt, "
             "kernels.{}), report.json\n",
             device.kind == Device::Kind::CPU ? "cpp" : "cu");
  fmt::print("== done in {:.1f} s\n", seconds_since(t_start));
  if (!(heldout_after < heldout_before - 1.0))
    fail("the held-out loss did not fall clearly ({:.3f} -> {:.3f})", heldout_before, heldout_after);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  struct Opts {
    std::string out = "kiln-demo-out";
    uint64_t seed = 0;
    int steps = 1000;
    std::string device = "auto";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("demo", "Train a MiniGPT on verb conjugations with kiln::compile: losses, samples, "
                                         "and every compiled graph's stages in --out/debug");
  cmd->add_option("--out", o->out, "output folder (the debug folder is its debug/)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights, the held-out split and the batches")->capture_default_str();
  cmd->add_option("--steps", o->steps, "training steps")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--device", o->device, "auto (the GPU when there is one), cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->callback([o] { run_demo(o->out, o->seed, o->steps, o->device); });
}

}  // namespace kiln::cli
