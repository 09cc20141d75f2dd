#include "frontend/nn/minigpt.h"

#include <string>

#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

MiniGPT::MiniGPT(const MiniGPTConfig& c, uint64_t seed) : config_(c) {
  if (c.vocab_size <= 0 || c.d_model <= 0 || c.n_layers < 0 || c.context <= 0)
    fail("MiniGPT: vocab_size, d_model and context must be positive and n_layers non-negative");
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(c.vocab_size, c.d_model, derive_seed(seed, "tok_emb")));
  pos_emb = register_module("pos_emb", std::make_shared<Embedding>(c.context, c.d_model, derive_seed(seed, "pos_emb")));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    std::string name = "blocks." + std::to_string(i);
    blocks.push_back(
        register_module(name, std::make_shared<Block>(c.d_model, c.n_heads, c.context, derive_seed(seed, name))));
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.d_model));
  lm_head = register_module("lm_head",
                            std::make_shared<Linear>(c.d_model, c.vocab_size, false, derive_seed(seed, "lm_head")));
}

Tensor MiniGPT::forward(const Tensor& tokens) const {
  if (tokens.dim() != 2) fail("MiniGPT expects tokens of shape [B, T], got {}", shape_str(tokens.shape()));
  const int64_t T = tokens.size(1);
  if (T > config_.context) fail("MiniGPT: sequence length {} exceeds the context length {}", T, config_.context);
  // Separate statements: C++ leaves the order of an operator's operands open, and the graph's
  // node order (and its parameters' input order) should not depend on the compiler.
  Tensor tok = tok_emb->forward(tokens);        // [B,T,C]
  Tensor pos = pos_emb->forward(arange(T));     // [T,C]
  Tensor x = tok + pos;
  for (const auto& block : blocks) x = block->forward(x);
  return lm_head->forward(ln_f->forward(x));
}

Tensor MiniGPT::loss(const Tensor& tokens, const Tensor& targets) const {
  Tensor logits = forward(tokens);
  const int64_t N = tokens.size(0) * tokens.size(1), V = config_.vocab_size;
  return cross_entropy(logits.reshape({N, V}), targets.reshape({N}));
}

}  // namespace kiln::nn
