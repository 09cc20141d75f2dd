// Tensors on devices (Tensor::to, Module::to, the CUDA dispatch key, kiln::run, the Trainer on
// a GPU). Without a GPU the errors are checked; with one, every result against the CPU.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/device_kernel.h"
#include "frontend/kiln.h"
#include "runtime/cpu/jit.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#include "runtime/cuda/device_tensor.h"
#include "runtime/cuda/stream.h"
#endif

namespace kiln {
namespace {

using kiln::testing::error_of;
using kiln::testing::has;
using kiln::testing::tensors_close;

TEST(Device, CpuTensorsStayWhereTheyAre) {
  Tensor x = randn({3, 4}, 1);
  EXPECT_FALSE(x.is_cuda());
  EXPECT_EQ(x.device(), Device::cpu());
  Tensor same = x.to(Device::cpu());
  EXPECT_EQ(same.impl(), x.impl()) << "to() the tensor's own device is the tensor itself, as in PyTorch";
  EXPECT_EQ(x.host_data().to_doubles(), x.data().to_doubles());
}

TEST(Device, TracedTensorsCannotMove) {
  std::string msg;
  trace(
      [&](const Tensor& t) {
        msg = error_of([&] { (void)t.cuda(); });
        return t;
      },
      randn({2}, 1));
  EXPECT_TRUE(has(msg, "before tracing")) << msg;
}

TEST(Device, RunOnTheCpuTakesAndGivesTensors) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no JIT in this build";
  nn::MLP mlp(16, 32, 4);
  Tensor x = randn({8, 16}, 1);
  TracedGraph tg = trace([&](const Tensor& t) { return mlp(t); }, x, "mlp");
  backend::CompiledGraph c = backend::compile(tg.graph);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : tg.parameter_tensors) inputs.push_back(p);
  std::vector<Tensor> out = run(c.executable, inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(tensors_close(out[0].data(), mlp(x).data(), 1e-5, 1e-5));
  std::string msg = error_of([&] { (void)run(c.executable, {x}); });
  EXPECT_TRUE(has(msg, "input")) << msg;
}

#if !KILN_HAVE_CUDA

TEST(Device, BuildWithoutCudaSaysSo) {
  std::string msg = error_of([] { (void)randn({2}, 1).cuda(); });
  EXPECT_TRUE(has(msg, "without the CUDA path")) << msg;
}

#else

bool gpu(std::string* why) { return backend::cuda_device_present(why); }

#define KILN_REQUIRE_GPU()                                                    \
  do {                                                                        \
    std::string why_;                                                         \
    if (!gpu(&why_)) GTEST_SKIP() << "no CUDA device to run on: " << why_;     \
  } while (0)

TEST(Device, NoGpuIsAClearError) {
  std::string why;
  if (gpu(&why)) GTEST_SKIP() << "a GPU is present: the error of its absence cannot be seen here";
  std::string msg = error_of([] { (void)randn({2}, 1).cuda(); });
  EXPECT_TRUE(has(msg, "no CUDA device is present")) << msg;
  nn::Linear lin(4, 3);
  msg = error_of([&] { lin.cuda(); });
  EXPECT_TRUE(has(msg, "no CUDA device is present")) << msg;
  EXPECT_EQ(lin.weight.device(), Device::cpu()) << "a failed move leaves the module where it was";
}

TEST(Device, RoundTripKeepsEveryValue) {
  KILN_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool}) {
    HostTensor h = random_tensor(TensorMeta(dt, {7, 33}), 3);
    Tensor x(h);
    Tensor d = x.cuda();
    EXPECT_TRUE(d.is_cuda());
    EXPECT_EQ(d.device(), Device::cuda(0));
    EXPECT_EQ(d.meta().shape, (Shape{7, 33}));
    EXPECT_TRUE(tensors_close(d.cpu().data(), h, 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(tensors_close(d.host_data(), h, 0, 0)) << dtype_name(dt);
  }
  Tensor empty = Tensor(HostTensor::empty(TensorMeta(DType::F32, {0, 5}))).cuda();
  EXPECT_EQ(empty.cpu().numel(), 0);
  // A strided host view moves as its values.
  Tensor t = randn({4, 6}, 2).t();
  EXPECT_TRUE(tensors_close(t.cuda().cpu().data(), t.data().contiguous(), 0, 0));
}

TEST(Device, DataOfADeviceTensorAsksForACopy) {
  KILN_REQUIRE_GPU();
  Tensor d = randn({3}, 1).cuda();
  std::string msg = error_of([&] { (void)d.data(); });
  EXPECT_TRUE(has(msg, "cuda:0") && has(msg, ".cpu()")) << msg;
  EXPECT_NEAR(randn({1}, 4).cuda().item(), randn({1}, 4).item(), 0);
}

TEST(Device, EagerOpsOnTheGpuMatchTheCpu) {
  KILN_REQUIRE_GPU();
  Tensor a = randn({33, 17}, 1), b = randn({17}, 2), w = randn({17, 9}, 3);
  Tensor da = a.cuda(), db = b.cuda(), dw = w.cuda();
  auto close = [](const Tensor& got, const Tensor& want) {
    EXPECT_TRUE(got.is_cuda());
    return tensors_close(got.cpu().data(), want.data(), 1e-5, 1e-5);
  };
  EXPECT_TRUE(close(da + db, a + b));                      // broadcasting
  EXPECT_TRUE(close(da.softmax(-1), a.softmax(-1)));       // a row reduction
  EXPECT_TRUE(close(da.sum({0}), a.sum({0})));             // a column reduction
  EXPECT_TRUE(close(da.matmul(dw), a.matmul(w)));          // cuBLASLt
  EXPECT_TRUE(close(da.t().contiguous(), a.t().contiguous()));  // a view, then a copy
  EXPECT_TRUE(close(gelu(da) * 2.0, gelu(a) * 2.0));       // a Python-style scalar
  Tensor ids = tensor_of_ints({0, 8, 3}, {3});
  EXPECT_TRUE(close(embedding(ids.cuda(), dw.t().contiguous()), embedding(ids, w.t().contiguous())));
  // A 0-d CPU tensor joins a GPU op (as PyTorch allows CPU scalars).
  EXPECT_TRUE(close(da * scalar_tensor(3.0), a * scalar_tensor(3.0)));
  // Each signature compiles once.
  int before = device_kernel_compiles();
  (void)(da + db);
  EXPECT_EQ(device_kernel_compiles(), before);
}

TEST(Device, OneDevicePerOp) {
  KILN_REQUIRE_GPU();
  Tensor a = randn({4, 4}, 1).cuda(), b = randn({4, 4}, 2);
  std::string msg = error_of([&] { (void)(a + b); });
  EXPECT_TRUE(has(msg, "one device") && has(msg, "cpu") && has(msg, "cuda:0")) << msg;
  msg = error_of([&] { (void)a.matmul(randn({5, 2}, 3).cuda()); });
  EXPECT_TRUE(has(msg, "matmul")) << msg;
}

TEST(Device, ModuleMovesItsParametersInPlace) {
  KILN_REQUIRE_GPU();
  nn::MLP mlp(8, 16, 4);
  Tensor x = randn({5, 8}, 7);
  Tensor held = mlp.fc->weight;  // a handle taken before the move sees it, as in PyTorch
  HostTensor want = mlp(x).data();
  mlp.cuda();
  EXPECT_TRUE(held.is_cuda());
  for (const Tensor& p : mlp.parameters()) EXPECT_TRUE(p.is_cuda());
  EXPECT_TRUE(tensors_close(mlp(x.cuda()).cpu().data(), want, 1e-5, 1e-5));
  mlp.cpu();
  EXPECT_FALSE(held.is_cuda());
  EXPECT_TRUE(tensors_close(mlp(x).data(), want, 1e-5, 1e-5));
}

TEST(Device, CompiledGraphRunsOnDeviceTensorsWithNoHostCopies) {
  KILN_REQUIRE_GPU();
  nn::MLP mlp(64, 128, 4);
  Tensor x = randn({256, 64}, 1);
  TracedGraph tg = trace([&](const Tensor& t) { return mlp(t); }, x, "mlp");
  HostTensor want = interpret(tg.graph, tg.graph_inputs({x.data()})).at(0);
  mlp.cuda();
  backend::CompileOptions o;
  o.device = Device::cuda();
  backend::CompiledGraph c = backend::compile(tg.graph, o);
  std::vector<Tensor> inputs{x.cuda()};
  for (const Tensor& p : tg.parameter_tensors) inputs.push_back(p);  // the module's own, now on the GPU
  (void)run(c.executable, inputs);  // the first run loads the CUBINs
  auto before = runtime::cuda::transfer_stats();
  std::vector<Tensor> out = run(c.executable, inputs);
  auto after = runtime::cuda::transfer_stats();
  EXPECT_EQ(after.host_to_device_bytes, before.host_to_device_bytes) << "no input crosses to the device";
  EXPECT_LE(after.device_to_host_bytes - before.device_to_host_bytes, 1024) << "only the error record comes back";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_cuda());
  EXPECT_TRUE(tensors_close(out[0].cpu().data(), want, 1e-4, 1e-4));
  std::string msg = error_of([&] { (void)run(c.executable, {x}); });
  EXPECT_TRUE(has(msg, "input 0") && has(msg, "cpu")) << msg;
}

TEST(Device, TrainerOnTheGpuMatchesTheCpuAndKeepsEverythingThere) {
  KILN_REQUIRE_GPU();
  auto make = [] { return std::make_shared<nn::MiniGPT>(nn::MiniGPTConfig{}, 0); };
  auto cpu_model = make(), gpu_model = make();
  Tensor tokens = randint(0, 600, {4, 32}, 1), targets = randint(0, 600, {4, 32}, 2);
  auto loss_of = [](nn::MiniGPT& m) {
    return [&m](const std::vector<Tensor>& b) { return m.loss(b[0], b[1]); };
  };
  Trainer on_cpu(*cpu_model, loss_of(*cpu_model), {tokens, targets}, AdamWConfig{.lr = 3e-3});
  gpu_model->cuda();
  Tensor dt = tokens.cuda(), dy = targets.cuda();
  Trainer on_gpu(*gpu_model, loss_of(*gpu_model), {dt, dy}, AdamWConfig{.lr = 3e-3});
  EXPECT_EQ(on_gpu.device(), Device::cuda(0));
  std::vector<double> cpu_losses, gpu_losses;
  for (int i = 0; i < 4; ++i) {
    cpu_losses.push_back(on_cpu.step({tokens, targets}));
    auto before = runtime::cuda::transfer_stats();
    gpu_losses.push_back(on_gpu.step({dt, dy}));
    auto after = runtime::cuda::transfer_stats();
    // The step number over (and, on the first run, the graph's constants), the loss and the
    // kernels' error records back: a few KB, nothing of the parameters' size (about 400 KB).
    EXPECT_LE(after.host_to_device_bytes - before.host_to_device_bytes, i == 0 ? 4096 : 64) << "step " << i;
    EXPECT_LE(after.device_to_host_bytes - before.device_to_host_bytes, 4096) << "step " << i;
  }
  int64_t param_bytes = 0;
  for (const Tensor& p : gpu_model->parameters()) param_bytes += p.meta().nbytes();
  EXPECT_GT(param_bytes, 100 * 4096);
  for (size_t i = 0; i < cpu_losses.size(); ++i) EXPECT_NEAR(gpu_losses[i], cpu_losses[i], 1e-4 * std::abs(cpu_losses[i]));
  EXPECT_LT(gpu_losses.back(), gpu_losses.front());
  for (const Tensor& p : gpu_model->parameters()) EXPECT_TRUE(p.is_cuda());
  TrainState s = on_gpu.state(), c = on_cpu.state();
  EXPECT_EQ(s.step, 4);
  ASSERT_EQ(s.params.size(), c.params.size());
  for (size_t i = 0; i < s.params.size(); ++i) EXPECT_TRUE(tensors_close(s.params[i], c.params[i], 1e-4, 1e-3)) << i;
  std::string msg = error_of([&] { (void)on_gpu.step({tokens, targets}); });
  EXPECT_TRUE(has(msg, "batch tensor 0") && has(msg, ".cuda()")) << msg;
}

#endif

}  // namespace
}  // namespace kiln
