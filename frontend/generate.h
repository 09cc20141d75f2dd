#pragma once
// Text generation with a compiled language model: greedy or sampled next tokens, one compiled
// call per token.
//
//   nn::MiniGPT model(cfg, 0);
//   CompiledFunction logits = kiln::compile([&](const Tensor& t) { return model(t); });
//   std::vector<int64_t> ids = generate(logits, prompt_ids, {.max_new_tokens = 12, .stop_token = '\n'});
//
// The model is called on a window of exactly `context` tokens every time: the last tokens so
// far at the window's start and `pad_token` after them. With causal attention the padding
// cannot change the logits at the last real token, and one shape means one compile (a window
// that grew with the text would recompile at every length). Calls run under NoGradGuard.
#include <cstdint>
#include <optional>
#include <vector>

#include "frontend/compile.h"

namespace kiln {

struct GenerateOptions {
  int64_t context = 32;        // the model's window: tokens [1, context] in, logits [1, context, vocab] out
  int max_new_tokens = 32;
  std::optional<int64_t> stop_token;  // generation ends after this token (it is not returned)
  int64_t pad_token = 0;       // fills the window after the text
  double temperature = 0;      // 0: greedy (argmax); else sampling from softmax(logits / temperature)
  uint64_t seed = 0;           // for sampling
};

// The tokens generated after `prompt` (the prompt itself not included). The logits function
// must take i64 [1, context] on the device it was compiled for (inputs go there). kiln::Error
// for an empty prompt or logits of another shape.
std::vector<int64_t> generate(const CompiledFunction& logits_of, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options = {}, Device device = Device::cpu());

}  // namespace kiln
