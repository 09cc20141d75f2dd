// MiniGPT generation: a MiniGPT learns English and Spanish verb conjugations for a few hundred
// steps, then completes prompts, greedily and by sampling.
//
//   kiln::compile(model, loss_fn, AdamWConfig{})    the training step, one compiled graph
//   kiln::compile([&](const Tensor& t) { ... })      the forward, compiled once for [1, 32]
//   kiln::generate(logits_fn, prompt_ids, options)   one compiled call per new token
//
// minigpt_generate [STEPS]   (default 400; exits 1 if the loss did not fall below 2.5)
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "backend/cuda_backend.h"
#include "frontend/kiln.h"  // Tensor, nn, compile, generate, and the demo's corpus and tokenizer

using namespace kiln;

int main(int argc, char** argv) {
  // Line by line even into a pipe (ctest, a log): a run cut short still shows how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 400;
  data::Corpus corpus = data::conjugation_corpus(/*seed=*/0);
  data::Tokenizer tok = data::Tokenizer::train(corpus.train, 600);
  std::vector<int64_t> stream = data::encode_lines(tok, corpus.train);

  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  nn::MiniGPT model(nn::MiniGPTConfig{}, /*seed=*/0);  // vocab 600, d_model 64, context 32
  model.to(device);
  fmt::print("training on {}\n", device.str());
  CompiledTrainStep train_step = compile(
      model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); },
      AdamWConfig{.lr = 3e-3, .weight_decay = 0.0});
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    data::Batch b = data::sample_batch(stream, 16, 32, static_cast<uint64_t>(i));
    loss = train_step({tensor_of_ints(b.tokens, {16, 32}).to(device), tensor_of_ints(b.targets, {16, 32}).to(device)});
    if (i % 100 == 0) fmt::print("step {:4}  loss {:.3f}\n", i, loss);
  }
  fmt::print("step {:4}  loss {:.3f}\n", steps, loss);

  CompiledFunction logits = compile([&](const Tensor& tokens) { return model(tokens); });
  GenerateOptions greedy;
  greedy.context = 32;
  greedy.max_new_tokens = 12;
  greedy.stop_token = data::kNewlineToken;
  greedy.pad_token = data::kNewlineToken;
  GenerateOptions sampled = greedy;
  sampled.temperature = 0.8;
  for (const char* prompt : {"en past walk: she", "en future go: they", "es presente hablar: nosotros",
                             "es futuro comer: yo", "es pretérito vivir: ellos"}) {
    std::vector<int64_t> ids = tok.encode(std::string("\n") + prompt);  // a line starts after a newline
    fmt::print("{:<30} greedy:{:<14} sampled:{}\n", prompt, tok.decode(generate(logits, ids, greedy, device)),
               tok.decode(generate(logits, ids, sampled, device)));
  }
  if (!(loss < 2.5)) {
    fmt::print(stderr, "MiniGPT did not learn: the loss is {:.3f} after {} steps\n", loss, steps);
    return 1;
  }
  return 0;
}
