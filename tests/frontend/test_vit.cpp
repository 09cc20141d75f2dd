// nn::VisionTransformer (frontend/nn/vit.h) against torchvision's VisionTransformer in PyTorch
// 1.13: the same parameter paths in the same order (a torchvision state dict loads by name), and
// the same logits for a small model whose parameters and input follow the formulas of
// tests/support/formula_tensors.h (tools/torch_check/vit_expected.py printed both).
#include <gtest/gtest.h>

#include "frontend/nn/vit.h"
#include "tests/support/formula_tensors.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

TEST(VisionTransformer, PathsAreTorchvisionsInItsOrder) {
  nn::VisionTransformer vit(32, 8, 2, 4, 16, 32, 5);
  std::vector<std::string> want{
      "class_token",
      "conv_proj.weight",
      "conv_proj.bias",
      "encoder.pos_embedding",
      "encoder.layers.encoder_layer_0.ln_1.weight",
      "encoder.layers.encoder_layer_0.ln_1.bias",
      "encoder.layers.encoder_layer_0.self_attention.in_proj_weight",
      "encoder.layers.encoder_layer_0.self_attention.in_proj_bias",
      "encoder.layers.encoder_layer_0.self_attention.out_proj.weight",
      "encoder.layers.encoder_layer_0.self_attention.out_proj.bias",
      "encoder.layers.encoder_layer_0.ln_2.weight",
      "encoder.layers.encoder_layer_0.ln_2.bias",
      "encoder.layers.encoder_layer_0.mlp.0.weight",
      "encoder.layers.encoder_layer_0.mlp.0.bias",
      "encoder.layers.encoder_layer_0.mlp.3.weight",
      "encoder.layers.encoder_layer_0.mlp.3.bias",
      "encoder.layers.encoder_layer_1.ln_1.weight",
      "encoder.layers.encoder_layer_1.ln_1.bias",
      "encoder.layers.encoder_layer_1.self_attention.in_proj_weight",
      "encoder.layers.encoder_layer_1.self_attention.in_proj_bias",
      "encoder.layers.encoder_layer_1.self_attention.out_proj.weight",
      "encoder.layers.encoder_layer_1.self_attention.out_proj.bias",
      "encoder.layers.encoder_layer_1.ln_2.weight",
      "encoder.layers.encoder_layer_1.ln_2.bias",
      "encoder.layers.encoder_layer_1.mlp.0.weight",
      "encoder.layers.encoder_layer_1.mlp.0.bias",
      "encoder.layers.encoder_layer_1.mlp.3.weight",
      "encoder.layers.encoder_layer_1.mlp.3.bias",
      "encoder.ln.weight",
      "encoder.ln.bias",
      "heads.head.weight",
      "heads.head.bias"};
  std::vector<std::string> got;
  for (auto& [path, t] : vit.named_parameters()) got.push_back(path);
  EXPECT_EQ(got, want);
  EXPECT_EQ(nn::vit_b_16()->num_parameters(), 86567656);  // torchvision's vit_b_16
}

TEST(VisionTransformer, LogitsMatchTorchvision) {
  nn::VisionTransformer vit(32, 8, 2, 4, 16, 32, 5);
  testing::set_formula_parameters(vit);
  testing::expect_values_near(vit(testing::formula_input({2, 3, 32, 32})), std::vector<double>{0.5541895324, 0.9575081299, -0.2189039988, -1.301700816, -0.6466792952, 0.5543762249, 0.9573780659, -0.2191434985, -1.301667991, -0.6464264684}, "logits", 1e-4);
}

TEST(VisionTransformer, ErrorsNameTheShape) {
  nn::VisionTransformer vit(32, 8, 2, 4, 16, 32, 5);
  EXPECT_TRUE(testing::has(testing::error_of([&] { vit(testing::formula_input({2, 3, 30, 30})); }),
                           "expected input [N, 3, 32, 32], got f32[2,3,30,30]"));
  EXPECT_TRUE(testing::has(testing::error_of([] { nn::VisionTransformer(30, 8, 1, 2, 16, 32); }),
                           "image_size 30 must be a positive multiple of patch_size 8"));
}

}  // namespace
}  // namespace kiln
