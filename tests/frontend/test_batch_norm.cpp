// BatchNorm (frontend/batch_norm.cpp, nn::BatchNorm1d/2d/3d) and the in-place writes it makes
// (Tensor::copy_): against PyTorch 1.13 (tools/torch_check/batch_norm_expected.py printed the
// expected values in float64, parameters and inputs set by the formulas of test_nn_modules.cpp),
// its derivative against finite differences, the running statistics written back by a
// compiled training step (a small ResNet-style network trained three AdamW steps, step for
// step against PyTorch), and the errors of the paths that cannot write a tensor back.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda_backend.h"
#include "frontend/batch_norm.h"
#include "frontend/compile.h"
#include "frontend/nn/conv.h"
#include "frontend/nn/layers.h"
#include "frontend/nn/norms.h"
#include "frontend/ops.h"
#include "frontend/optim.h"
#include "frontend/trace.h"
#include "runtime/cpu/jit.h"
#include "tests/support/formula_tensors.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"

namespace kiln {
namespace {

using kiln::testing::has;

// The formulas of tests/support/formula_tensors.h.
void set_parameters(nn::Module& m) { testing::set_formula_parameters(m); }
Tensor input(const Shape& shape, DType dtype = DType::F32) { return testing::formula_input(shape, dtype); }
void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what, double tol = 2e-5) {
  testing::expect_values_near(got, want, what, tol);
}

TEST(BatchNorm, TrainingEvalAndRunningStatisticsMatchPyTorch) {
  nn::BatchNorm2d bn(3, 1e-5, /*momentum=*/0.2);
  set_parameters(bn);
  Tensor x = input({2, 3, 4, 5});
  expect_close(bn(x), std::vector<double>{0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.3963170992, 0.2928771063, 0.186125895, 0.09051174113, 0.01897557179, -0.01880052808, -0.01770374057, 0.02211748927, 0.09527354479, 0.1918630971, 0.2988132033, 0.4016486684, 0.4864511945, 0.5417431576, 0.5600410498, 0.5388683373, 0.4810906474, 0.3945279194, 0.2908960124, 0.1842210188, -0.1219480254, -0.2199026849, -0.2710823522, -0.2685600994, -0.2126773018, -0.1109974336, 0.02271761177, 0.1703701304, 0.3119760464, 0.4283696635, 0.5037976515, 0.5280511862, 0.4978476654, 0.417274994, 0.297238305, 0.1539840012, 0.006900880568, -0.1241040465, -0.2212998778, -0.2715316133, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.1976322925, 0.3047365944, 0.4069245519, 0.4903655044, 0.5437661104, 0.5598988484, 0.5365802279, 0.4769663149, 0.3891255728, 0.284946834, 0.1785302021, 0.08427866889, 0.01494873735, -0.02007611158, -0.01605542888, 0.02646660489, 0.1017348319, 0.1995620508, 0.3067078065, 0.4086704234, 0.4337283919, 0.5065362101, 0.5277989239, 0.4946387247, 0.41154369, 0.2897603428, 0.1457714879, -0.0009346587236, -0.1305021083, -0.2253945143, -0.2727686348, -0.2662126049, -0.2066137524, -0.1020385024, 0.03335937555, 0.1812544139, 0.321629713, 0.4354861346, 0.5074137462, 0.5276774831}, "bn2d train");
  bn(x * 2.0 + 0.25);
  expect_close(*bn.running_mean, std::vector<double>{0.05193293717, 0.05420215735, 0.05175275258}, "running_mean");
  expect_close(*bn.running_var, std::vector<double>{0.7716989841, 0.7480769393, 0.7728258079}, "running_var");
  EXPECT_EQ(bn.num_batches_tracked->to_ints(), std::vector<int64_t>{2});
  bn.eval();
  EXPECT_FALSE(bn.is_training());
  expect_close(bn(x), std::vector<double>{0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.3096742442, 0.2700495943, 0.2291565195, 0.1925297056, 0.16512642, 0.150655569, 0.1510757142, 0.1663299911, 0.1943538047, 0.2313542635, 0.2723235288, 0.3117166028, 0.3442018177, 0.3653824522, 0.3723918066, 0.3642811978, 0.3421483586, 0.3089888649, 0.2692906987, 0.2284268205, 0.007342100244, -0.03358448418, -0.05496793839, -0.05391411216, -0.03056563593, 0.01191738356, 0.06778506894, 0.1294759911, 0.188640573, 0.2372711663, 0.268785848, 0.2789192541, 0.2662998753, 0.2326356856, 0.182482975, 0.1226296777, 0.06117665655, 0.00644128981, -0.03416824745, -0.05515564488, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2890674556, 0.2335642631, 0.274592596, 0.31373763, 0.3457012684, 0.3661573826, 0.3723373337, 0.3634046941, 0.3405684548, 0.3069193937, 0.2670117532, 0.2262468453, 0.1901420091, 0.1635838648, 0.1501669325, 0.1517071312, 0.1679960022, 0.1968289232, 0.2343034936, 0.2753477061, 0.3144064191, 0.2395101047, 0.2699300493, 0.2788138559, 0.264959143, 0.2302410808, 0.1793585963, 0.119198395, 0.05790287803, 0.003768105955, -0.03587903375, -0.05567248671, -0.05293330192, -0.02803221521, 0.01566052817, 0.07223132036, 0.13402357, 0.1926739861, 0.2402445098, 0.270296694, 0.2787631166}, "bn2d eval");
  expect_close(*bn.running_mean, std::vector<double>{0.05193293717, 0.05420215735, 0.05175275258}, "eval leaves the running mean");

  nn::BatchNorm1d b1(4);
  set_parameters(b1);
  expect_close(b1(input({5, 4})), std::vector<double>{0.2890674556, 0.4736833732, 0.3758827022, 0.05634524414, 0.2890674556, 0.1617580683, -0.1737404999, -0.4355815973, 0.2890674556, -0.02073934254, -0.2734109571, -0.3397346723, 0.2890674556, 0.2580912889, 0.2581376805, 0.1695733619, 0.2890674556, 0.4911527524, 0.4542008946, 0.1660860105}, "bn1d [N,C]");
  expect_close(b1(input({3, 4, 2})), std::vector<double>{0.2890674556, 0.2890674556, 0.4132742921, 0.3315728065, 0.2041577324, -0.2372440137, -0.2581063927, -0.366911914, 0.2890674556, 0.2890674556, -0.02791666748, 0.04132218178, -0.2293416495, 0.2123340525, 0.2065042044, 0.3351886847, 0.2890674556, 0.2890674556, 0.4664910114, 0.4119917439, 0.623401325, 0.1959763376, -0.1161584819, -0.2604900841}, "bn1d [N,C,L]");
  expect_close(*b1.running_var, std::vector<double>{0.8511273179, 0.8402418937, 0.8264800396, 0.8334753852}, "bn1d running_var");
}

// momentum=None: the running statistics are the cumulative average of the batches' (the factor
// 1 / num_batches_tracked), as PyTorch's; traced, the factor is computed in the graph from the
// buffer, not read on the host, so a compiled step follows it.
TEST(BatchNorm, MomentumNoneIsACumulativeAverage) {
  nn::BatchNorm2d bn(3, 1e-5, std::nullopt);
  for (int step = 0; step < 3; ++step) bn(input({2, 3, 4, 5}) * (1.0 + step) + 0.1 * step);
  expect_close(*bn.running_mean, std::vector<double>{0.1069033471, 0.1150077048, 0.1062598306}, "running_mean");
  expect_close(*bn.running_var, std::vector<double>{0.640203395, 0.5253740106, 0.6456810109}, "running_var");
  EXPECT_EQ(bn.num_batches_tracked->to_ints(), std::vector<int64_t>{3});
  nn::BatchNorm2d traced(3, 1e-5, std::nullopt);
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{traced(in[0])}; }, {input({2, 3, 4, 5})}, "bn");
  EXPECT_TRUE(has(print_graph(tg.graph), "reciprocal(")) << print_graph(tg.graph);
  EXPECT_TRUE(has(testing::error_of([&] {
                    batch_norm(input({2, 3}), *bn.running_mean, *bn.running_var, std::nullopt, std::nullopt, true, input({1}), 1e-5);
                  }),
                  "a momentum tensor is 0-d"));
}

// The same cumulative average through a compiled training step: the factor follows the count
// from step to step without a recompile (the running statistics do not depend on the parameters,
// so PyTorch's eager values above are the answer).
TEST(BatchNorm, MomentumNoneInACompiledTrainingStep) {
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  if (device == Device::cpu() && !runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build and no GPU";
  nn::BatchNorm2d bn(3, 1e-5, std::nullopt);
  bn.to(device);
  AdamWConfig adamw;
  CompiledTrainStep step = compile(bn, [&](const std::vector<Tensor>& b) { return mean(square(bn(b[0]))); }, adamw);
  for (int s = 0; s < 3; ++s) step({(input({2, 3, 4, 5}) * (1.0 + s) + 0.1 * s).to(device)});
  EXPECT_EQ(step.stats().compiles, 1);
  expect_close(*bn.running_mean, std::vector<double>{0.1069033471, 0.1150077048, 0.1062598306}, "compiled running_mean");
  expect_close(*bn.running_var, std::vector<double>{0.640203395, 0.5253740106, 0.6456810109}, "compiled running_var");
  EXPECT_EQ(bn.num_batches_tracked->to_ints(), std::vector<int64_t>{3});
}

TEST(BatchNorm, ErrorsNameWhatIsWrong) {
  nn::BatchNorm2d bn(3);
  EXPECT_TRUE(has(testing::error_of([&] { bn(input({2, 3, 4})); }), "BatchNorm2d(3): expected 4D input [N, 3, ...], got f32[2,3,4]"));
  EXPECT_TRUE(has(testing::error_of([&] { bn(input({2, 5, 4, 4})); }), "expected 4D input [N, 3, ...]"));
  EXPECT_TRUE(has(testing::error_of([&] { bn(input({1, 3, 1, 1})); }), "training needs more than 1 value per channel"));
  bn.eval();
  EXPECT_EQ(bn(input({1, 3, 1, 1})).shape(), (Shape{1, 3, 1, 1})) << "one value per channel is fine in eval";
  nn::BatchNorm3d b3(2, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(b3.named_parameters().empty());
  EXPECT_TRUE(b3.named_buffers().empty());
  b3.eval();  // no running statistics: the batch's, in eval too
  Tensor y = b3(input({2, 2, 2, 2, 3}));
  EXPECT_NEAR(y.mean().item(), 0.0, 1e-6);
  EXPECT_TRUE(has(testing::error_of([&] { batch_norm(input({4, 3}), std::nullopt, std::nullopt); }), "the running statistics are needed"));
}

// batch_norm's derivative (of its ops) against central differences in float64, training.
TEST(BatchNorm, GradcheckInFloat64) {
  Tensor x = input({3, 2, 4}, DType::F64), w = input({2}, DType::F64) + 1.0, b = input({2}, DType::F64);
  TracedGraph tg = trace(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{batch_norm(in[0], std::nullopt, std::nullopt, in[1], in[2], /*training=*/true).tanh()};
      },
      std::vector<Tensor>{x, w, b}, "bn");
  EXPECT_TRUE(testing::gradcheck_graph(tg.graph, {x.data(), w.data(), b.data()}));
}

TEST(CopyInPlace, EagerWritesBroadcastAndCasts) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3}), held = a;
  a.copy_(tensor({7, 8, 9}, {3}, DType::F64));
  EXPECT_EQ(held.to_doubles(), (std::vector<double>{7, 8, 9, 7, 8, 9})) << "every holder sees the write";
  EXPECT_EQ(held.dtype(), DType::F32);
  EXPECT_THROW(a.copy_(tensor({1, 2}, {2})), Error);
}

// A traced write of a concrete tensor: later reads see it, and the graph returns it after the
// function's outputs (TracedGraph::written); writing a traced tensor rebinds it.
TEST(CopyInPlace, TracedWritesAreGraphOutputs) {
  Tensor buf = tensor({1, 2}, {2}, DType::F32);
  buf.set_name("buf");
  TracedGraph tg = trace(
      [&](const Tensor& x) {
        Tensor y = x * 2.0;
        buf.copy_(buf + x);  // reads the old value, writes the new
        y.copy_(y + buf);    // a traced tensor: rebinds (reads the new buf)
        buf.copy_(buf * 3.0);
        return y;
      },
      tensor({10, 20}, {2}), "writes");
  ASSERT_EQ(tg.written, std::vector<size_t>{0});
  ASSERT_EQ(tg.num_function_outputs(), 1u);
  ASSERT_EQ(tg.graph.outputs().size(), 2u);
  std::vector<HostTensor> out = interpret(tg.graph, tg.graph_inputs({tensor({10, 20}, {2}).data()}));
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{31, 62}));  // 2x + (buf + x)
  EXPECT_EQ(out[1].to_doubles(), (std::vector<double>{33, 66}));  // 3 (buf + x)
  EXPECT_EQ(buf.to_doubles(), (std::vector<double>{1, 2})) << "a trace does not write the tensor itself";

  // The example input captured by the function itself: a write rebinds it, returns nothing.
  Tensor x = tensor({1, 2}, {2});
  TracedGraph in_place = trace(
      [&](const Tensor&) {
        x.copy_(x * 2.0);
        return x + 1.0;
      },
      x, "writes_its_input");
  EXPECT_TRUE(in_place.written.empty());
  EXPECT_EQ(interpret(in_place.graph, in_place.graph_inputs({x.data()}))[0].to_doubles(), (std::vector<double>{3, 5}));
  EXPECT_TRUE(has(testing::error_of([] { Tensor().copy_(tensor({1}, {1})); }), "copy_: the destination is an undefined tensor"));
}

// ResNet-style: conv, BatchNorm2d, ReLU, a residual block, adaptive average pool, linear.
class SmallResNet : public nn::Module {
 public:
  // track_running_stats = false: the same network (the same parameters, in the same order) with
  // no buffers, whose gradients kiln::value_and_grad computes.
  explicit SmallResNet(bool track_running_stats = true) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(3, 4, IntList{3}, IntList{1}, IntList{1}, IntList{1}, 1, false));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, true, track_running_stats));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(4, 4, IntList{3}, IntList{1}, IntList{1}, IntList{1}, 1, false));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, true, track_running_stats));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 5));
  }
  Tensor operator()(const Tensor& x) const {
    Tensor h = relu((*bn1)((*conv1)(x)));
    h = relu((*bn2)((*conv2)(h)) + h);
    return (*fc)(adaptive_avg_pool(h, {1, 1}).reshape({x.size(0), 4}));
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Linear> fc;
};

void expect_trained_like_pytorch(const SmallResNet& net, const std::vector<double>& losses, const std::string& how) {
  expect_close(tensor(losses, {3}), std::vector<double>{1.682422647, 1.665475686, 1.65013771}, how + ": losses", 1e-4);
  expect_close(*net.bn1->running_mean, std::vector<double>{-0.01087252725, -0.01123575393, -0.01225380196, -0.01253682714}, how + ": bn1.running_mean", 1e-4);
  expect_close(*net.bn2->running_var, std::vector<double>{0.761335963, 0.7622128019, 0.7626907984, 0.7632992992}, how + ": bn2.running_var", 1e-4);
  EXPECT_EQ(net.bn1->num_batches_tracked->to_ints(), std::vector<int64_t>{3}) << how;
  expect_close(net.conv1->weight, std::vector<double>{-0.02874757921, 0.1647409303, 0.2660140242, 0.2881854197, 0.1291858057, -0.07614530841, -0.2912892229, -0.3245186687, -0.2191191192, -0.02402617283, 0.1678000176, 0.2665478594, 0.2792441377, 0.09987796624, -0.1383769474, -0.2935886902, -0.3231419486, -0.2151592982, -0.01954022076, 0.1707750216, 0.2675130539, 0.2237929982, 0.06087202183, -0.1444597269, -0.2361580905, -0.2625813212, -0.1520214408, -0.01408988867, 0.1754132727, 0.2682906431, 0.2805334911, 0.1151845853, -0.09107384728, -0.2983670433, -0.3213243273, -0.2071363746, -0.009127967401, 0.1785965344, 0.2685035811, 0.2711482479, 0.05196414223, -0.1537114534, -0.3003621346, -0.3188660731, -0.189322258, -0.004244638857, 0.1817702932, 0.2702606558, 0.2152674841, 0.04638908842, -0.1583599654, -0.2428316362, -0.2589286491, -0.1391580722, 0.03020606547, 0.2153277666, 0.2991774545, 0.2423193108, 0.07149460885, -0.1329551247, -0.2748739857, -0.2875153161, -0.1649337009, 0.03521881109, 0.2188073659, 0.2994873975, 0.2393138265, 0.06658722349, -0.1374563912, -0.2768521173, -0.2860399667, -0.1606987503, 0.0402215994, 0.2222251024, 0.2997126673, 0.2362406817, 0.06166101212, -0.141918795, -0.2787519752, -0.2844837459, -0.1564183657, 0.04521301597, 0.2255800098, 0.2998532002, 0.2331007452, 0.05671736749, -0.1463410744, -0.2805730224, -0.2828470939, -0.1520937575, 0.05019164958, 0.2288711396, 0.2999089564, 0.2298949048, 0.05175768732, -0.1507219793, -0.2823147439, -0.2811304732, -0.1477261482, 0.05515609265, 0.2320975613, 0.2998799202, 0.2266240669, 0.04678337384, -0.1550602709, -0.2839766474, -0.2793343694, -0.1433167727}, how + ": conv1.weight", 1e-4);
  expect_close(*net.bn2->bias, std::vector<double>{0.03473290637, 0.2081524892, 0.2697171977, 0.1905366701}, how + ": bn2.bias", 1e-4);
  expect_close(net.fc->weight, std::vector<double>{0.2707465799, 0.2106396746, 0.03771518331, -0.1663881033, -0.2469746666, -0.2563104788, -0.131086014, 0.06976207815, 0.192195819, 0.269826057, 0.2064871566, 0.03201902994, -0.1118724492, -0.248829371, -0.254675133, -0.1267740774, 0.01505356527, 0.2549850974, 0.3296828465, 0.263080619}, how + ": fc.weight", 1e-4);
}

Tensor batch_of(int step) { return input({4, 3, 6, 6}) * (1.0 + 0.5 * step); }
const Tensor& targets() {
  static const Tensor t = tensor_of_ints({0, 3, 1, 4}, {4});
  return t;
}

// Three AdamW steps of kiln::compile(module, loss_fn, optimizer), the step compiled for the
// CPU, and for the GPU where there is one (the module moved there): the running statistics
// come back from the step into the module's buffers.
void train_three_steps_and_check(const Device& device) {
  SmallResNet net;
  set_parameters(net);
  net.to(device);
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  CompiledTrainStep step = compile(net, [&](const std::vector<Tensor>& b) { return cross_entropy(net(b[0]), b[1]); }, adamw);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(step({batch_of(s).to(device), targets().to(device)}));
  EXPECT_EQ(step.stats().compiles, 1);
  EXPECT_EQ(net.bn1->running_mean->device(), device) << "the written buffers stay where the module is";
  expect_trained_like_pytorch(net, losses, "compiled step on " + device.str());
  EXPECT_EQ(step.train_step().written_buffers.size(), 6u) << "two BatchNorms' running mean, variance and count";
  net.eval();
  expect_close(net(input({4, 3, 6, 6}).to(device)), std::vector<double>{0.1491678751, -0.2122541544, -0.1296499369, -0.4378135923, 0.04694765831, 0.1478291229, -0.2116204203, -0.1295178956, -0.4386829019, 0.04885399222, 0.1583592193, -0.2210407846, -0.1223526208, -0.4426826994, 0.04922566226, 0.1444733177, -0.2080174759, -0.1329118781, -0.4359424388, 0.04666299055}, "eval logits after training", 1e-4);
}

TEST(BatchNorm, CompiledTrainingStepMatchesPyTorchStepForStep) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build";
  train_three_steps_and_check(Device::cpu());
}

TEST(BatchNorm, CompiledTrainingStepOnTheGpuMatchesPyTorch) {
  if (!backend::cuda_device_present()) GTEST_SKIP() << "no GPU here";
  train_three_steps_and_check(Device::cuda());
}

// The same through make_train_step and train_step on the reference interpreter: the state
// carries the buffers.
TEST(BatchNorm, TrainStepOnTheInterpreterCarriesTheBuffers) {
  SmallResNet net;
  set_parameters(net);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy(net(b[0]), b[1])}; },
                           {batch_of(0), targets()}, "resnet_loss");
  EXPECT_EQ(loss.written.size(), 6u);
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  TrainStep ts = make_train_step(loss, adamw);
  std::vector<HostTensor> params;
  for (const std::string& path : ts.param_paths)
    for (auto& [p, t] : net.named_parameters())
      if (p == path) params.push_back(t.data());
  TrainState state = ts.init(params);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(train_step(ts, state, {batch_of(s).data(), targets().data()}));
  expect_close(tensor(losses, {3}), std::vector<double>{1.682422647, 1.665475686, 1.65013771}, "interpreter: losses", 1e-4);
  for (size_t i = 0; i < ts.buffer_paths.size(); ++i)
    if (ts.buffer_paths[i] == "bn1.running_mean")
      expect_close(Tensor(state.buffers[i]), std::vector<double>{-0.01087252725, -0.01123575393, -0.01225380196, -0.01253682714}, "interpreter: bn1.running_mean", 1e-4);
  EXPECT_TRUE(has(print_graph(ts.graph), "new_bn1_running_mean")) << "the written buffers are named outputs";
}

// kiln::compile(fn) of a module in training writes its buffers back at every call, as eager
// code does: one graph (with and without gradients), and a function that breaks its graph.
TEST(BatchNorm, CompiledFunctionWritesTheRunningStatisticsBack) {
  // kiln::compile(fn) runs where its inputs are: the GPU where there is one, else the CPU's JIT.
  const Device device = backend::cuda_device_present() ? Device::cuda() : Device::cpu();
  if (device == Device::cpu() && !runtime::cpu::jit_available()) GTEST_SKIP() << "no CPU JIT in this build and no GPU";
  SmallResNet eager, net;
  testing::set_formula_parameters(eager, 0.5);
  testing::set_formula_parameters(net, 0.5);
  eager.to(device);
  net.to(device);
  auto expect_same_statistics = [&](const std::string& when) {
    expect_close(*net.bn1->running_mean, eager.bn1->running_mean->to_doubles(), when + ": bn1.running_mean", 1e-5);
    expect_close(*net.bn2->running_var, eager.bn2->running_var->to_doubles(), when + ": bn2.running_var", 1e-5);
    EXPECT_EQ(net.bn1->num_batches_tracked->to_ints(), eager.bn1->num_batches_tracked->to_ints()) << when;
  };
  // One graph, no gradients: three calls, one compile.
  auto fn = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{net(in[0])}; });
  for (int s = 0; s < 3; ++s) {
    NoGradGuard no_grad;
    Tensor x = batch_of(s).to(device);
    expect_close(fn({x})[0], eager(x).to_doubles(), fmt::format("call {}: output", s), 1e-5);
    expect_same_statistics(fmt::format("call {}", s));
  }
  EXPECT_EQ(net.bn1->num_batches_tracked->to_ints(), std::vector<int64_t>{3});
  EXPECT_EQ(fn.stats().compiles, 1);
  EXPECT_EQ(fn.stats().cache_hits, 2);
  // One graph with its backward: the loss's gradients as kiln::value_and_grad's of the same
  // network without buffers, the statistics written as eager code writes them.
  SmallResNet untracked(false);  // on the host: value_and_grad runs the interpreter
  testing::set_formula_parameters(untracked, 0.5);
  auto loss_of = [](const SmallResNet& m) { return [&m](const std::vector<Tensor>& b) { return mean(square(m(b[0]))); }; };
  auto loss_fn = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(net)(in)}; });
  for (int s = 0; s < 2; ++s) {
    net.zero_grad();
    Tensor x = batch_of(s).to(device);
    loss_fn({x})[0].backward();
    {
      NoGradGuard no_grad;
      eager(x);
    }
    ModuleGrads want = value_and_grad(untracked, loss_of(untracked), {batch_of(s)});
    expect_close(net.conv1->weight.grad(), want["conv1.weight"].to_doubles(), fmt::format("step {}: conv1.weight's gradient", s), 1e-4);
    expect_close(net.bn2->weight->grad(), want["bn2.weight"].to_doubles(), fmt::format("step {}: bn2.weight's gradient", s), 1e-4);
    expect_same_statistics(fmt::format("step {}", s));
  }
  // A function that breaks its graph (an item() between the two blocks): each graph writes what it wrote.
  auto broken = compile([&](const std::vector<Tensor>& in) {
    Tensor h = relu((*net.bn1)((*net.conv1)(in[0])));
    const double scale = h.amax().item() > 0 ? 1.0 : 2.0;
    return std::vector<Tensor>{relu((*net.bn2)((*net.conv2)(h)) + h) * scale};
  });
  for (int s = 0; s < 2; ++s) {
    NoGradGuard no_grad;
    Tensor x = batch_of(s).to(device);
    Tensor got = broken({x})[0];
    Tensor h = relu((*eager.bn1)((*eager.conv1)(x)));
    expect_close(got, (relu((*eager.bn2)((*eager.conv2)(h)) + h) * (h.amax().item() > 0 ? 1.0 : 2.0)).to_doubles(),
                 fmt::format("broken call {}", s), 1e-5);
    expect_same_statistics(fmt::format("broken call {}", s));
  }
  EXPECT_GE(broken.stats().graph_breaks, 2);
}

TEST(BatchNorm, ALossThatWritesAParameterMakesNoStep) {
  nn::Linear lin(3, 2);
  TracedGraph loss = trace(
      [&](const std::vector<Tensor>& b) {
        Tensor w = lin.weight;
        w.copy_(w * 0.5);
        return std::vector<Tensor>{lin(b[0]).sum()};
      },
      {input({2, 3})}, "writes_a_parameter");
  try {
    make_train_step(loss, AdamWConfig{});
    ADD_FAILURE() << "a loss that writes its parameter made a step";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "writes parameter 'weight'")) << e.what();
  }
}

}  // namespace
}  // namespace kiln
