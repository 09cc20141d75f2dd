#pragma once
// torchvision's VisionTransformer (Dosovitskiy et al.), with its module names, so that a
// torchvision state dict's keys are kiln's parameter paths ("encoder.layers.encoder_layer_0.
// self_attention.in_proj_weight", "encoder.layers.encoder_layer_0.mlp.3.bias"): a patch_size x
// patch_size stride-patch_size convolution to hidden_dim (`conv_proj`), a learned class token
// before the patches, learned position embeddings (`encoder.pos_embedding`), num_layers pre-norm
// encoder blocks (LayerNorm eps 1e-6, nn::MultiheadAttention, an MLP of Linear-GELU-Linear), a
// final LayerNorm, and a linear head on the class token (`heads.head`). Dropout is 0 (as
// torchvision's default). vit_b_16 builds ViT-B/16.
#include <memory>
#include <vector>

#include "frontend/nn/attention.h"
#include "frontend/nn/conv.h"
#include "frontend/nn/layers.h"

namespace kiln::nn {

// torchvision's MLPBlock: Linear ("0"), GELU, Dropout, Linear ("3"), Dropout.
class ViTMlp : public Module {
 public:
  ViTMlp(int64_t hidden_dim, int64_t mlp_dim, uint64_t seed);
  Tensor forward(const Tensor& x) const;
  std::shared_ptr<Linear> fc1, fc2;
};

class ViTEncoderBlock : public Module {
 public:
  ViTEncoderBlock(int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, uint64_t seed);
  Tensor forward(const Tensor& x) const;  // x [N, S, hidden_dim]
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<MultiheadAttention> self_attention;
  std::shared_ptr<ViTMlp> mlp;
};

// The blocks, named encoder_layer_0, encoder_layer_1, ... (torchvision's OrderedDict).
class ViTLayers : public Module {
 public:
  void add(std::shared_ptr<ViTEncoderBlock> block);
  std::vector<std::shared_ptr<ViTEncoderBlock>> blocks;
};

class ViTEncoder : public Module {
 public:
  ViTEncoder(int64_t seq_length, int64_t num_layers, int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, uint64_t seed);
  Tensor forward(const Tensor& x) const;  // x [N, seq_length, hidden_dim]
  Tensor pos_embedding;                   // [1, seq_length, hidden_dim]
  std::shared_ptr<ViTLayers> layers;
  std::shared_ptr<LayerNorm> ln;
};

// The classifier head, one Linear named "head" (torchvision's `heads`).
class ViTHeads : public Module {
 public:
  ViTHeads(int64_t hidden_dim, int64_t num_classes, uint64_t seed);
  std::shared_ptr<Linear> head;
};

class VisionTransformer : public Module {
 public:
  VisionTransformer(int64_t image_size, int64_t patch_size, int64_t num_layers, int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim,
                    int64_t num_classes = 1000, uint64_t seed = 0);
  // x [N, 3, image_size, image_size] -> [N, num_classes].
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t image_size, patch_size, hidden_dim;
  Tensor class_token;  // [1, 1, hidden_dim]
  std::shared_ptr<Conv2d> conv_proj;
  std::shared_ptr<ViTEncoder> encoder;
  std::shared_ptr<ViTHeads> heads;
};

// ViT-B/16: 224x224 images, 16x16 patches, 12 layers of 12 heads, width 768, MLP 3072.
std::shared_ptr<VisionTransformer> vit_b_16(int64_t num_classes = 1000, uint64_t seed = 0);

}  // namespace kiln::nn
