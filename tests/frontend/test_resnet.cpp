// torchvision's ResNet as nn::ResNet (frontend/nn/resnet.h): its parameter and buffer paths are
// torchvision's state-dict keys, and a ResNet-18 trained three SGD steps through a compiled
// training step (BatchNorm's running statistics written back) matches torchvision's ResNet-18
// in PyTorch 1.13 step for step (tools/torch_check/batch_norm_expected.py; formulas of
// tests/support/formula_tensors.h; batch 4 at 64x64, where float32 follows float64), on the CPU
// and on the GPU where there is one.
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

void train_three_steps_and_check(const Device& device) {
  auto r = nn::resnet18(10);
  testing::set_formula_parameters(*r, 0.2);  // as the script: about torchvision's scale
  r->to(device);
  // SGD with momentum (the script says why not AdamW).
  SGDConfig sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  const Tensor targets = tensor_of_ints({3, 7, 1, 0}, {4}).to(device);
  CompiledTrainStep step = compile(*r, [&](const std::vector<Tensor>& b) { return cross_entropy((*r)(b[0]), b[1]); }, sgd);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(step({(formula_input({4, 3, 64, 64}) * (1.0 + 0.5 * s)).to(device), targets}));
  const std::string on = " on " + device.str();
  expect_values_near(tensor(losses, {3}), std::vector<double>{2.152169698, 2.130663516, 2.094246014}, "losses" + on, 1e-4);
  auto buffer = [&](const std::string& path) {
    for (auto& [p, t] : r->named_buffers())
      if (p == path) return t;
    return Tensor();
  };
  expect_values_near(slice(buffer("layer4.1.bn2.running_mean"), 0, 0, 8), std::vector<double>{0.01768294531, -0.03680813182, 0.03277154465, -0.008115162472, -0.02164680327, 0.03778855986, -0.03015347, 0.003545079122},
                     "layer4.1.bn2.running_mean" + on, 1e-4);
  expect_values_near(slice(buffer("layer2.0.downsample.1.running_var"), 0, 0, 8), std::vector<double>{0.7291282729, 0.7290509707, 0.729045415, 0.7291235489, 0.7291189596, 0.7290416971, 0.7290566367, 0.7291316127},
                     "layer2.0.downsample.1.running_var" + on, 1e-4);
  expect_values_near(*r->fc->bias, std::vector<double>{-0.02285647458, -0.03034333673, -0.08208055281, 0.02519366589, 0.0002500937293, 0.03199416769, 0.03764833246, 0.08476528795, -0.02432320148, -0.06291328656}, "fc.bias" + on, 1e-4);
  expect_values_near(slice(r->layers[0]->blocks[0]->convs[0]->weight.reshape({-1}), 0, 0, 9), std::vector<double>{-0.04126549367, -0.05961976271, -0.04993326541, -0.01676412051, 0.02429075375, 0.05392004374, 0.05819353954, 0.03509660273, -0.004508647255},
                     "layer1.0.conv1.weight" + on, 1e-4);
  r->eval();
  expect_values_near((*r)(formula_input({4, 3, 64, 64}).to(device)), std::vector<double>{0.1600571206, -0.04245159803, -0.4097097699, -0.3665951455, -0.6659589325, -0.7498276301, -0.8115884114, -0.6591636391, -0.8487734534, -0.7975608534, 0.1600571206, -0.04245159804, -0.4097097699, -0.3665951455, -0.6659589325, -0.7498276301, -0.8115884114, -0.6591636391, -0.8487734534, -0.7975608534, 0.1600571202, -0.04245159836, -0.4097097702, -0.3665951458, -0.6659589328, -0.7498276303, -0.8115884115, -0.6591636391, -0.8487734534, -0.7975608533, 0.160057121, -0.04245159761, -0.4097097695, -0.3665951452, -0.6659589324, -0.7498276301, -0.8115884115, -0.6591636393, -0.8487734538, -0.7975608538}, "eval logits" + on, 1e-4);
}

TEST(ResNet, Resnet18TrainsAsTorchvisionsOnTheCpu) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  train_three_steps_and_check(Device::cpu());
}

TEST(ResNet, Resnet18TrainsAsTorchvisionsOnTheGpu) {
  if (!backend::cuda_device_present()) GTEST_SKIP() << "no GPU here";
  train_three_steps_and_check(Device::cuda());
}

}  // namespace
}  // namespace kiln
