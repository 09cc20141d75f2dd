// torchvision's ResNet as nn::ResNet (frontend/nn/resnet.h): its parameter and buffer paths are
// torchvision's state-dict keys, and a ResNet-18 trained two AdamW steps through a compiled
// training step (BatchNorm's running statistics written back) matches torchvision's ResNet-18
// in PyTorch 1.13 step for step (tools/torch_check/batch_norm_expected.py; formulas of
// tests/support/formula_tensors.h), on the CPU and on the GPU where there is one.
#include <gtest/gtest.h>

#include <set>

#include "backend/cuda_backend.h"
#include "frontend/compile.h"
#include "frontend/nn/resnet.h"
#include "frontend/ops.h"
#include "runtime/cpu/jit.h"
#include "tests/support/formula_tensors.h"

namespace kiln {
namespace {

using testing::expect_values_near;
using testing::formula_input;

TEST(ResNet, PathsAreTorchvisionsStateDictKeys) {
  auto r18 = nn::resnet18(10);
  auto params = r18->named_parameters();
  EXPECT_EQ(params.size(), 62u);  // torchvision's resnet18: 62 parameters
  EXPECT_EQ(r18->num_parameters(), 11181642);  // and 11,181,642 values (10 classes)
  EXPECT_EQ(params.front().first, "conv1.weight");
  EXPECT_EQ(params.back().first, "fc.bias");
  std::set<std::string> buffers;
  for (auto& [path, t] : r18->named_buffers()) buffers.insert(path);
  EXPECT_EQ(buffers.size(), 60u);  // 20 BatchNorms: running mean, variance, count
  EXPECT_TRUE(buffers.count("layer2.0.downsample.1.running_var"));
  EXPECT_TRUE(buffers.count("layer4.1.bn2.num_batches_tracked"));
  auto r50 = nn::resnet50(1000);
  EXPECT_EQ(r50->num_parameters(), 25557032);  // torchvision's resnet50
  EXPECT_EQ(r50->named_parameters().size(), 161u);
  EXPECT_EQ((*nn::resnet18(10, 8))(formula_input({2, 3, 32, 32})).shape(), (Shape{2, 10}));
}

void train_two_steps_and_check(const Device& device) {
  auto r = nn::resnet18(10);
  testing::set_formula_parameters(*r);
  r->to(device);
  AdamWConfig adamw;
  adamw.lr = 1e-3;
  const Tensor targets = tensor_of_ints({3, 7}, {2}).to(device);
  CompiledTrainStep step = compile(*r, [&](const std::vector<Tensor>& b) { return cross_entropy((*r)(b[0]), b[1]); }, adamw);
  std::vector<double> losses;
  for (int s = 0; s < 2; ++s) losses.push_back(step({(formula_input({2, 3, 32, 32}) * (1.0 + 0.5 * s)).to(device), targets}));
  const std::string on = " on " + device.str();
  expect_values_near(tensor(losses, {2}), std::vector<double>{20.41836234, 21.04856996}, "losses" + on, 1e-4);
  auto buffer = [&](const std::string& path) {
    for (auto& [p, t] : r->named_buffers())
      if (p == path) return t;
    return Tensor();
  };
  expect_values_near(slice(buffer("layer4.1.bn2.running_mean"), 0, 0, 8), std::vector<double>{0.36563863, -0.7859145639, 0.7132352859, -0.1934008842, -0.4520966996, 0.8103308978, -0.6610479724, 0.09302818851},
                     "layer4.1.bn2.running_mean" + on, 1e-4);
  expect_values_near(slice(buffer("layer2.0.downsample.1.running_var"), 0, 0, 8), std::vector<double>{0.8616276047, 0.8388107021, 0.8163733535, 0.8430792043, 0.8610198044, 0.8327897925, 0.8178471498, 0.8480426701},
                     "layer2.0.downsample.1.running_var" + on, 1e-4);
  expect_values_near(*r->fc->bias, std::vector<double>{-0.208712238, -0.3001538132, -0.2513415062, -0.08131119214, 0.1213056963, 0.2697889966, 0.2908227354, 0.1770391437, -0.02308318429, -0.2103834883}, "fc.bias" + on, 1e-4);
  expect_values_near(slice(r->layers[0]->blocks[0]->convs[0]->weight.reshape({-1}), 0, 0, 9), std::vector<double>{-0.2046385601, -0.299819107, -0.2513813216, -0.08213306539, 0.1197852756, 0.2678306138, 0.2926663588, 0.1737998176, -0.02422508419},
                     "layer1.0.conv1.weight" + on, 1e-4);
  r->eval();
  expect_values_near((*r)(formula_input({2, 3, 32, 32}).to(device)), std::vector<double>{-2424.195787, -2015.38089, -1584.883192, 3571.323425, 1358.77826, 1601.051652, 1637.209221, 2763.453391, 1377.136271, 1096.603045, -2447.8429, -2034.98687, -1600.240776, 3606.286084, 1372.200744, 1616.859061, 1653.379928, 2790.603251, 1390.754474, 1107.458371}, "eval logits" + on, 1e-4);
}

TEST(ResNet, Resnet18TrainsAsTorchvisionsOnTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  train_two_steps_and_check(Device::cpu());
}

TEST(ResNet, Resnet18TrainsAsTorchvisionsOnTheGpu) {
  if (!backend::cuda_device_present()) GTEST_SKIP() << "no GPU here";
  train_two_steps_and_check(Device::cuda());
}

}  // namespace
}  // namespace kiln
