#include "frontend/nn/resnet.h"

#include <cmath>
#include <string>

#include "frontend/nn/init.h"
#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln::nn {

namespace {

// A bias-free convolution with torchvision's initialization (kaiming_normal_, fan_out, relu).
std::shared_ptr<Conv2d> kaiming_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, uint64_t seed) {
  auto c = std::make_shared<Conv2d>(in, out, IntList{kernel}, IntList{stride}, IntList{kernel / 2}, IntList{1}, 1, /*bias=*/false, seed);
  const double std_dev = std::sqrt(2.0 / static_cast<double>(out * kernel * kernel));
  c->weight.impl()->set_storage_from(*init::normal(c->weight.shape(), 0.0, std_dev, derive_seed(seed, "kaiming")).impl());
  return c;
}

}  // namespace

Downsample::Downsample(int64_t in, int64_t out, int64_t stride, uint64_t seed) {
  conv = register_module("0", kaiming_conv(in, out, 1, stride, derive_seed(seed, "0")));
  bn = register_module("1", std::make_shared<BatchNorm2d>(out));
}

ResidualBlock::ResidualBlock(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, uint64_t seed) : bottleneck_(bottleneck) {
  if (inplanes <= 0 || planes <= 0 || stride <= 0) fail("ResidualBlock({}, {}, stride {}): sizes must be positive", inplanes, planes, stride);
  const int64_t out = planes * expansion();
  // Bottleneck: 1x1 down to planes, 3x3 at the stride (torchvision's v1.5), 1x1 up to 4 planes.
  const std::vector<int64_t> kernels = bottleneck ? std::vector<int64_t>{1, 3, 1} : std::vector<int64_t>{3, 3};
  int64_t in = inplanes;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    const int64_t width = i + 1 == kernels.size() ? out : planes;
    const int64_t s = (bottleneck ? i == 1 : i == 0) ? stride : 1;
    convs.push_back(register_module("conv" + n, kaiming_conv(in, width, kernels[i], s, derive_seed(seed, "conv" + n))));
    bns.push_back(register_module("bn" + n, std::make_shared<BatchNorm2d>(width)));
    in = width;
  }
  if (stride != 1 || inplanes != out) downsample = register_module("downsample", std::make_shared<Downsample>(inplanes, out, stride, derive_seed(seed, "downsample")));
}

Tensor ResidualBlock::forward(const Tensor& x) const {
  Tensor h = x;
  for (size_t i = 0; i < convs.size(); ++i) {
    h = (*bns[i])((*convs[i])(h));
    if (i + 1 < convs.size()) h = relu(h);
  }
  return relu(h + (downsample ? downsample->forward(x) : x));
}

void ResNetLayer::add(std::shared_ptr<ResidualBlock> block) { blocks.push_back(register_module(std::to_string(blocks.size()), std::move(block))); }

Tensor ResNetLayer::forward(const Tensor& x) const {
  Tensor h = x;
  for (const auto& b : blocks) h = (*b)(h);
  return h;
}

ResNet::ResNet(bool bottleneck, std::vector<int64_t> blocks, int64_t num_classes, int64_t width, uint64_t seed) {
  if (blocks.size() != 4) fail("ResNet: four layers of blocks, got {}", blocks.size());
  if (width <= 0 || num_classes <= 0) fail("ResNet: width {} and num_classes {} must be positive", width, num_classes);
  conv1 = register_module("conv1", kaiming_conv(3, width, 7, 2, derive_seed(seed, "conv1")));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(width));
  maxpool = register_module("maxpool", std::make_shared<MaxPool2d>(IntList{3}, IntList{2}, IntList{1}));
  const int64_t expansion = bottleneck ? 4 : 1;
  int64_t inplanes = width;
  for (size_t l = 0; l < 4; ++l) {
    const std::string name = "layer" + std::to_string(l + 1);
    auto layer = std::make_shared<ResNetLayer>();
    const int64_t planes = width << l;
    for (int64_t b = 0; b < blocks[l]; ++b) {
      const int64_t stride = l > 0 && b == 0 ? 2 : 1;
      layer->add(std::make_shared<ResidualBlock>(bottleneck, inplanes, planes, stride, derive_seed(seed, name + "." + std::to_string(b))));
      inplanes = planes * expansion;
    }
    layers.push_back(register_module(name, layer));
  }
  fc = register_module("fc", std::make_shared<Linear>(inplanes, num_classes, true, derive_seed(seed, "fc")));
}

Tensor ResNet::forward(const Tensor& x) const {
  if (x.dim() != 4 || x.size(1) != 3) fail("ResNet: expected input [N, 3, H, W], got {}", x.str());
  Tensor h = (*maxpool)(relu((*bn1)((*conv1)(x))));
  for (const auto& layer : layers) h = (*layer)(h);
  h = adaptive_avg_pool(h, {1, 1});
  return (*fc)(h.reshape({h.size(0), h.size(1)}));
}

std::shared_ptr<ResNet> resnet18(int64_t num_classes, int64_t width, uint64_t seed) {
  return std::make_shared<ResNet>(false, std::vector<int64_t>{2, 2, 2, 2}, num_classes, width, seed);
}
std::shared_ptr<ResNet> resnet34(int64_t num_classes, int64_t width, uint64_t seed) {
  return std::make_shared<ResNet>(false, std::vector<int64_t>{3, 4, 6, 3}, num_classes, width, seed);
}
std::shared_ptr<ResNet> resnet50(int64_t num_classes, int64_t width, uint64_t seed) {
  return std::make_shared<ResNet>(true, std::vector<int64_t>{3, 4, 6, 3}, num_classes, width, seed);
}

}  // namespace kiln::nn
