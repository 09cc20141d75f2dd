// A small Llama-style language model -- token embedding, two LlamaBlocks (RMSNorm, rotary
// position embeddings, grouped-query attention with 4 query heads sharing 2 key/value heads,
// SwiGLU), a final RMSNorm and a linear head -- learns a sequence rule, trained with
// kiln::compile as one compiled graph per step (forward, loss, backward, AdamW).
//
// Each sequence starts at a random token and goes on by next = (3 * token + 1) mod 32, so that
// the model must read the previous token to predict the next one. The RoPE tables are module
// buffers: inputs of the compiled step, not constants folded into it.
//
// Checks, exiting 1 if any fails: the compiled forward equals the eager one, the step compiled
// once for 200 steps, and the loss fell below a tenth of its start.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/cuda_backend.h"
#include "frontend/kiln.h"

using namespace kiln;

constexpr int64_t kVocab = 32, kContext = 16, kModel = 64, kHeads = 4, kKvHeads = 2, kHidden = 128;

class TinyLlama : public nn::Module {
 public:
  explicit TinyLlama(uint64_t seed) {
    embed = register_module("embed", std::make_shared<nn::Embedding>(kVocab, kModel, nn::derive_seed(seed, "embed")));
    for (int i = 0; i < 2; ++i)
      blocks.push_back(register_module(fmt::format("block{}", i), std::make_shared<nn::LlamaBlock>(
                                                                        kModel, kHeads, kKvHeads, kHidden, kContext, 1e-6,
                                                                        nn::derive_seed(seed, fmt::format("block{}", i)))));
    norm = register_module("norm", std::make_shared<nn::RMSNorm>(kModel, 1e-6));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kVocab, false, nn::derive_seed(seed, "head")));
  }
  // tokens [B, T] (i64) -> logits [B, T, vocab]
  Tensor operator()(const Tensor& tokens) const {
    Tensor x = (*embed)(tokens) * 0.1;
    for (const auto& b : blocks) x = (*b)(x);
    return (*head)((*norm)(x));
  }

  std::shared_ptr<nn::Embedding> embed;
  std::vector<std::shared_ptr<nn::LlamaBlock>> blocks;
  std::shared_ptr<nn::RMSNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

// `batch` sequences of kContext + 1 tokens: inputs are the first kContext, targets the last.
std::pair<Tensor, Tensor> make_batch(int64_t batch, uint64_t seed, Device device) {
  std::vector<int64_t> in, out;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t b = 0; b < batch; ++b) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int64_t t = static_cast<int64_t>((s >> 33) % kVocab);
    for (int64_t i = 0; i <= kContext; ++i) {
      if (i < kContext) in.push_back(t);
      if (i > 0) out.push_back(t);
      t = (3 * t + 1) % kVocab;
    }
  }
  return {tensor_of_ints(in, {batch, kContext}).to(device), tensor_of_ints(out, {batch, kContext}).to(device)};
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  TinyLlama model(/*seed=*/0);
  model.to(device);
  fmt::print("TinyLlama: {} parameters, buffers {}\n", model.num_parameters(), model.named_buffers().size());

  auto loss_of = [&](const Tensor& tokens, const Tensor& targets) {
    return cross_entropy(model(tokens).reshape({-1, kVocab}), targets.reshape({-1}));
  };
  // The compiled forward against eager (op by op) on one batch, before training.
  auto [probe, probe_targets] = make_batch(4, 99, device);
  double worst = 0;
  {
    NoGradGuard no_grad;
    CompiledFunction forward = compile([&](const Tensor& t) { return model(t); });
    std::vector<double> compiled = forward(probe).to_doubles(), eager = model(probe).to_doubles();
    for (size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::abs(compiled[i] - eager[i]));
  }
  fmt::print("compiled forward vs eager: largest difference {:.2e}\n", worst);

  CompiledTrainStep step = compile(
      model, [&](const std::vector<Tensor>& b) { return loss_of(b[0], b[1]); }, AdamWConfig{.lr = 3e-3, .weight_decay = 0.0});
  double first = 0, last = 0;
  for (int i = 0; i < 200; ++i) {
    auto [tokens, targets] = make_batch(16, static_cast<uint64_t>(i), device);
    last = step({tokens, targets});
    if (i == 0) first = last;
    if (i % 40 == 0 || i == 199) fmt::print("step {:3}  loss {:.4f}\n", i, last);
  }
  const int64_t step_inputs_from_buffers = static_cast<int64_t>(step.train_step().buffer_names.size());
  fmt::print("on {}: loss {:.4f} -> {:.4f}; training step: {} compile for 200 steps; RoPE tables read as {} step inputs\n",
             device.str(), first, last, step.stats().compiles, step_inputs_from_buffers);
  bool ok = true;
  if (worst > 1e-4) ok = false, fmt::print(stderr, "the compiled forward differs from eager by {:.2e}\n", worst);
  if (step.stats().compiles != 1) ok = false, fmt::print(stderr, "the step compiled {} times\n", step.stats().compiles);
  if (!(last < 0.1 * first)) ok = false, fmt::print(stderr, "the model did not learn: loss {:.4f} -> {:.4f}\n", first, last);
  return ok ? 0 : 1;
}
