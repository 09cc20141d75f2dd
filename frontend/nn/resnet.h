#pragma once
// torchvision's ResNet (He et al.), with its module names, so that a torchvision state dict's
// keys are kiln's parameter and buffer paths ("layer2.0.downsample.1.running_mean"): a 7x7
// stride-2 convolution, BatchNorm, ReLU and a 3x3 stride-2 max pool; four layers of residual
// blocks (BasicBlock: two 3x3 convolutions; Bottleneck: 1x1, 3x3, 1x1 with 4x the width out),
// the first block of layers 2-4 at stride 2 with a 1x1 convolution and BatchNorm on the
// shortcut (`downsample`); a global average pool and a linear classifier. resnet18/34/50
// build torchvision's depths; `width` (64 in torchvision) scales every layer, for small tests.
// Initialization as torchvision's: convolutions N(0, 2 / fan_out), BatchNorm weight 1 and bias
// 0, the classifier as nn::Linear.
#include <memory>
#include <vector>

#include "frontend/nn/conv.h"
#include "frontend/nn/layers.h"
#include "frontend/nn/norms.h"

namespace kiln::nn {

// The shortcut of a block that changes the width or the stride: a 1x1 convolution ("0") and
// BatchNorm ("1"), as torchvision's nn.Sequential names them.
class Downsample : public Module {
 public:
  Downsample(int64_t in, int64_t out, int64_t stride, uint64_t seed);
  Tensor forward(const Tensor& x) const { return (*bn)((*conv)(x)); }
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<BatchNorm2d> bn;
};

class ResidualBlock : public Module {
 public:
  // planes: the block's inner width; its output has planes * expansion() channels.
  ResidualBlock(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, uint64_t seed);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  int64_t expansion() const { return bottleneck_ ? 4 : 1; }

  std::vector<std::shared_ptr<Conv2d>> convs;     // conv1, conv2 (, conv3)
  std::vector<std::shared_ptr<BatchNorm2d>> bns;  // bn1, bn2 (, bn3)
  std::shared_ptr<Downsample> downsample;         // null: the identity shortcut

 private:
  bool bottleneck_;
};

// The blocks of one layer, named "0", "1", ... (torchvision's nn.Sequential).
class ResNetLayer : public Module {
 public:
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::vector<std::shared_ptr<ResidualBlock>> blocks;
  void add(std::shared_ptr<ResidualBlock> block);
};

class ResNet : public Module {
 public:
  // blocks: per layer (resnet18: {2, 2, 2, 2}); input [N, 3, H, W], output [N, num_classes].
  ResNet(bool bottleneck, std::vector<int64_t> blocks, int64_t num_classes = 1000, int64_t width = 64, uint64_t seed = 0);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<MaxPool2d> maxpool;
  std::vector<std::shared_ptr<ResNetLayer>> layers;  // layer1 .. layer4
  std::shared_ptr<Linear> fc;
};

std::shared_ptr<ResNet> resnet18(int64_t num_classes = 1000, int64_t width = 64, uint64_t seed = 0);
std::shared_ptr<ResNet> resnet34(int64_t num_classes = 1000, int64_t width = 64, uint64_t seed = 0);
std::shared_ptr<ResNet> resnet50(int64_t num_classes = 1000, int64_t width = 64, uint64_t seed = 0);

}  // namespace kiln::nn
