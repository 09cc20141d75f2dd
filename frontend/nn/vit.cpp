#include "frontend/nn/vit.h"

#include <string>

#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

ViTMlp::ViTMlp(int64_t hidden_dim, int64_t mlp_dim, uint64_t seed) {
  fc1 = register_module("0", std::make_shared<Linear>(hidden_dim, mlp_dim, true, derive_seed(seed, "0")));
  fc2 = register_module("3", std::make_shared<Linear>(mlp_dim, hidden_dim, true, derive_seed(seed, "3")));
}

Tensor ViTMlp::forward(const Tensor& x) const { return (*fc2)(gelu((*fc1)(x))); }

ViTEncoderBlock::ViTEncoderBlock(int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, uint64_t seed) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(hidden_dim, 1e-6));
  self_attention = register_module("self_attention", std::make_shared<MultiheadAttention>(hidden_dim, num_heads, true, derive_seed(seed, "attn")));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(hidden_dim, 1e-6));
  mlp = register_module("mlp", std::make_shared<ViTMlp>(hidden_dim, mlp_dim, derive_seed(seed, "mlp")));
}

Tensor ViTEncoderBlock::forward(const Tensor& x) const {
  Tensor h = (*ln_1)(x);
  Tensor y = x + self_attention->forward(h, h, h);
  return y + mlp->forward((*ln_2)(y));
}

void ViTLayers::add(std::shared_ptr<ViTEncoderBlock> block) {
  blocks.push_back(register_module("encoder_layer_" + std::to_string(blocks.size()), std::move(block)));
}

ViTEncoder::ViTEncoder(int64_t seq_length, int64_t num_layers, int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, uint64_t seed) {
  pos_embedding = register_parameter("pos_embedding", init::normal({1, seq_length, hidden_dim}, 0.0, 0.02, derive_seed(seed, "pos")));
  layers = register_module("layers", std::make_shared<ViTLayers>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->add(std::make_shared<ViTEncoderBlock>(num_heads, hidden_dim, mlp_dim, derive_seed(seed, "layer" + std::to_string(i))));
  ln = register_module("ln", std::make_shared<LayerNorm>(hidden_dim, 1e-6));
}

Tensor ViTEncoder::forward(const Tensor& x) const {
  Tensor h = x + pos_embedding;
  for (const auto& b : layers->blocks) h = b->forward(h);
  return (*ln)(h);
}

ViTHeads::ViTHeads(int64_t hidden_dim, int64_t num_classes, uint64_t seed) {
  head = register_module("head", std::make_shared<Linear>(hidden_dim, num_classes, true, derive_seed(seed, "head")));
}

VisionTransformer::VisionTransformer(int64_t image_size_, int64_t patch_size_, int64_t num_layers, int64_t num_heads, int64_t hidden_dim_,
                                     int64_t mlp_dim, int64_t num_classes, uint64_t seed)
    : image_size(image_size_), patch_size(patch_size_), hidden_dim(hidden_dim_) {
  if (image_size <= 0 || patch_size <= 0 || image_size % patch_size != 0)
    fail("VisionTransformer: image_size {} must be a positive multiple of patch_size {}", image_size, patch_size);
  if (hidden_dim <= 0 || num_heads <= 0 || hidden_dim % num_heads != 0)
    fail("VisionTransformer: hidden_dim {} must be a positive multiple of num_heads {}", hidden_dim, num_heads);
  class_token = register_parameter("class_token", init::constant({1, 1, hidden_dim}, 0.0));
  conv_proj = register_module("conv_proj", std::make_shared<Conv2d>(3, hidden_dim, IntList{patch_size}, IntList{patch_size}, IntList{0},
                                                                    IntList{1}, 1, true, derive_seed(seed, "conv_proj")));
  const int64_t patches = (image_size / patch_size) * (image_size / patch_size);
  encoder = register_module("encoder", std::make_shared<ViTEncoder>(patches + 1, num_layers, num_heads, hidden_dim, mlp_dim, derive_seed(seed, "encoder")));
  heads = register_module("heads", std::make_shared<ViTHeads>(hidden_dim, num_classes, derive_seed(seed, "heads")));
}

Tensor VisionTransformer::forward(const Tensor& x) const {
  if (x.dim() != 4 || x.size(1) != 3 || x.size(2) != image_size || x.size(3) != image_size)
    fail("VisionTransformer: expected input [N, 3, {}, {}], got {}", image_size, image_size, x.str());
  const int64_t n = x.size(0), side = image_size / patch_size;
  // [N, hidden, side, side] -> [N, side*side, hidden]: the patches as a sequence.
  Tensor patches = (*conv_proj)(x).reshape({n, hidden_dim, side * side}).permute({0, 2, 1});
  Tensor h = cat({class_token.expand({n, 1, hidden_dim}), patches}, 1);
  h = encoder->forward(h);
  return (*heads->head)(slice(h, 1, 0, 1).reshape({n, hidden_dim}));
}

std::shared_ptr<VisionTransformer> vit_b_16(int64_t num_classes, uint64_t seed) {
  return std::make_shared<VisionTransformer>(224, 16, 12, 12, 768, 3072, num_classes, seed);
}

}  // namespace kiln::nn
