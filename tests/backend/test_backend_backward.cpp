// Backward graphs on the CPU backend: joint graphs (build_joint) of composite-op losses and of
// the nn models, the forward/backward pair from both partitioners, whole training-step graphs
// (SGD momentum, AdamW) and views/broadcasting under differentiation, each compiled with
// compile_cpu and compared with the reference interpreter on random non-zero inputs.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>

#include "frontend/kiln.h"
#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendBackward : public DeviceTest {};
KILN_DEVICE_TESTS(BackendBackward);

using autograd::JointGraph;
using autograd::Partition;
using autograd::PartitionKind;

// The tolerances of backend_check.h, for outputs that come from a different graph than the
// one interpreted (a partition's forward/backward against the joint graph).
void expect_close(const HostTensor& got, const HostTensor& want, double slack, const std::string& what) {
  double tol = 0;
  switch (want.dtype()) {
    case DType::F32: tol = 1e-5 * slack; break;
    case DType::F64: tol = 1e-9 * slack; break;
    case DType::F16: tol = 1e-2 * slack; break;
    case DType::BF16: tol = 2e-2 * slack; break;
    default: break;
  }
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_TRUE(tensors_close(got, want, tol, tol)) << what;
}

// The loss sum(op(x...) * c) of one composite op: `c` (random, same type as the op's result)
// keeps the gradient from being uniform (the gradient of sum(softmax(x)) is zero).
Graph op_loss(Op op, const std::vector<TensorMeta>& ins, const Attrs& attrs = {}) {
  Graph g(fmt::format("{}_loss", op_name(op)));
  Builder b(g);
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), ins[i]));
  Var y = b.op(op, vs, attrs, "y");
  Var c = b.wrap(g.add_input("c", y.meta()));
  g.set_outputs({b.sum(b.mul(y, c))});
  return g;
}

// Joint graph inputs: the primals (integer ones in [0, int_bound)), then a random tangent for
// each differentiable output.
std::vector<HostTensor> joint_inputs(const JointGraph& j, std::vector<HostTensor> primals, uint64_t seed) {
  for (size_t i = primals.size(); i < j.graph.inputs().size(); ++i)
    primals.push_back(random_tensor(j.graph.inputs()[i]->meta(), seed + 101 * i));
  return primals;
}

void expect_joint_matches(const Graph& forward, int64_t int_bound, double slack, uint64_t seed = 1) {
  SCOPED_TRACE(forward.name());
  JointGraph j = autograd::build_joint(forward);
  ASSERT_GT(j.graph.outputs().size(), static_cast<size_t>(j.num_forward_outputs)) << "no gradients";
  std::vector<HostTensor> primals = inputs_for(forward, seed, int_bound);
  expect_matches_reference(j.graph, joint_inputs(j, primals, seed), slack);
}

TEST_P(BackendBackward, SoftmaxAndLogSoftmaxLosses) {
  KILN_REQUIRE_JIT();
  expect_joint_matches(op_loss(Op::Softmax, {F({7, 33})}, {{"dim", int64_t(-1)}}), 4, 10);
  expect_joint_matches(op_loss(Op::Softmax, {F({33, 7})}, {{"dim", int64_t(0)}}), 4, 10);
  expect_joint_matches(op_loss(Op::Softmax, {F({1, 1023})}, {{"dim", int64_t(1)}}), 4, 10);
  expect_joint_matches(op_loss(Op::LogSoftmax, {F({3, 1023})}, {{"dim", int64_t(1)}}), 4, 10);
  expect_joint_matches(op_loss(Op::LogSoftmax, {F({7, 1, 33})}, {{"dim", int64_t(0)}}), 4, 10);
}

TEST_P(BackendBackward, LayerNormLosses) {
  KILN_REQUIRE_JIT();
  expect_joint_matches(op_loss(Op::LayerNorm, {F({7, 33}), F({33}), F({33})}, {{"normalized_shape", IntList{33}}}), 4, 50);
  expect_joint_matches(op_loss(Op::LayerNorm, {F({2, 3, 4, 5})}, {{"normalized_shape", IntList{4, 5}}}), 4, 50);
  expect_joint_matches(op_loss(Op::LayerNorm, {F({1, 1023}), F({1023}), F({1023})}, {{"normalized_shape", IntList{1023}}}),
                       4, 50);
}

TEST_P(BackendBackward, CrossEntropyLosses) {
  KILN_REQUIRE_JIT();
  // Targets in [0, 11): ignore_index 2 is hit by some of the 33 rows.
  expect_joint_matches(op_loss(Op::CrossEntropy, {F({33, 11}), I({33})}, {{"ignore_index", int64_t(2)}}), 11, 10);
  expect_joint_matches(op_loss(Op::CrossEntropy, {F({7, 11}), I({7})},
                               {{"reduction", std::string("sum")}, {"label_smoothing", 0.1}}),
                       11, 10);
  expect_joint_matches(op_loss(Op::CrossEntropy, {F({33, 7}), I({33})},
                               {{"ignore_index", int64_t(3)}, {"label_smoothing", 0.2}}),
                       7, 10);
  expect_joint_matches(op_loss(Op::CrossEntropy, {F({7, 5}), I({7})},
                               {{"reduction", std::string("none")}, {"ignore_index", int64_t(0)}}),
                       5, 10);
}

TEST_P(BackendBackward, EmbeddingWithRepeatedIndices) {
  KILN_REQUIRE_JIT();
  // 15 indices into 10 rows, and 33 into 3: rows repeat, so their gradients must add up.
  expect_joint_matches(op_loss(Op::Embedding, {F({10, 8}), I({3, 5})}), 10, 4);
  expect_joint_matches(op_loss(Op::Embedding, {F({3, 7}), I({33})}), 3, 4);
}

TEST_P(BackendBackward, LinearAddmmDropoutLosses) {
  KILN_REQUIRE_JIT();
  expect_joint_matches(op_loss(Op::Linear, {F({7, 33}), F({5, 33}), F({5})}), 4, 10);
  expect_joint_matches(op_loss(Op::Linear, {F({2, 7, 33}), F({1, 33})}), 4, 10);
  expect_joint_matches(op_loss(Op::Addmm, {F({5}), F({7, 33}), F({33, 5})}, {{"beta", 0.5}, {"alpha", 2.0}}), 4, 10);
  expect_joint_matches(op_loss(Op::Addmm, {F({7, 1}), F({7, 1}), F({1, 33})}), 4, 10);
  expect_joint_matches(op_loss(Op::Dropout, {F({7, 33})}, {{"p", 0.25}, {"seed", int64_t(3)}}), 4, 4);
  expect_joint_matches(op_loss(Op::Dropout, {F({1023})}, {{"p", 0.5}, {"seed", int64_t(9)}}), 4, 4);
}

// ---- models (frontend/nn) with a cross-entropy loss

struct ModelLoss {
  TracedGraph tg;
  std::vector<HostTensor> examples;  // the batch
  std::vector<HostTensor> primals() const { return tg.graph_inputs(examples); }
};

Tensor class_targets(int64_t n, int64_t classes, uint64_t seed) { return randint(0, classes, {n}, seed); }

ModelLoss mlp_loss() {
  static nn::MLP mlp(/*d=*/7, /*hidden=*/33, /*seed=*/1);
  Tensor x = randn({5, 7}, 2), t = class_targets(5, 7, 3);
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(mlp(in[0]), in[1])}; },
                         {x, t}, "mlp_loss");
  return {std::move(tg), {x.data(), t.data()}};
}

ModelLoss block_loss() {
  const int64_t B = 2, T = 7, C = 16;
  static nn::Block block(C, /*n_heads=*/2, /*context=*/8, /*seed=*/3);
  Tensor x = randn({B, T, C}, 4), t = class_targets(B * T, C, 5);
  TracedGraph tg = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(block(in[0]).reshape({B * T, C}), in[1])}; },
      {x, t}, "block_loss");
  return {std::move(tg), {x.data(), t.data()}};
}

ModelLoss minigpt_loss() {
  static const nn::MiniGPTConfig cfg = [] {
    nn::MiniGPTConfig c{.vocab_size = 11, .d_model = 16, .n_heads = 2, .n_layers = 2, .context = 8};
    return c;
  }();
  static nn::MiniGPT model(cfg, 5);
  Tensor tokens = randint(0, 11, {2, 7}, 6), targets = randint(0, 11, {2, 7}, 7);
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; },
                         {tokens, targets}, "minigpt_loss");
  return {std::move(tg), {tokens.data(), targets.data()}};
}

JointGraph model_joint(const ModelLoss& m) {
  autograd::JointOptions o;
  o.wrt = m.tg.parameter_names;
  return autograd::build_joint(m.tg.graph, o);
}

void expect_model_joint_matches(const ModelLoss& m, double slack) {
  SCOPED_TRACE(m.tg.graph.name());
  JointGraph j = model_joint(m);
  ASSERT_EQ(j.graph.outputs().size(), 1 + m.tg.parameter_names.size());
  expect_matches_reference(j.graph, joint_inputs(j, m.primals(), 11), slack);
}

TEST_P(BackendBackward, MlpJoint) {
  KILN_REQUIRE_JIT();
  expect_model_joint_matches(mlp_loss(), 20);
}
TEST_P(BackendBackward, BlockJoint) {
  KILN_REQUIRE_JIT();
  expect_model_joint_matches(block_loss(), 50);
}
TEST_P(BackendBackward, MiniGptJoint) {
  KILN_REQUIRE_JIT();
  expect_model_joint_matches(minigpt_loss(), 50);
}

// Compiled forward, then compiled backward on its saved tensors and the tangents, equals the
// interpreted joint graph.
void expect_partitions_match(const ModelLoss& m, double slack) {
  JointGraph j = model_joint(m);
  std::vector<HostTensor> inputs = joint_inputs(j, m.primals(), 13);
  std::vector<HostTensor> want = interpret(j.graph, inputs);
  for (PartitionKind kind : {PartitionKind::Default, PartitionKind::MinCut}) {
    SCOPED_TRACE(fmt::format("{} partition of {}", autograd::partition_kind_name(kind), m.tg.graph.name()));
    Partition p = autograd::partition(j, kind);
    std::vector<HostTensor> primals(inputs.begin(), inputs.begin() + j.num_primals);
    backend::CompiledGraph fwd_cg = compile_for_test(p.forward), bwd_cg = compile_for_test(p.backward);
    KILN_REQUIRE_RUN();
    std::vector<HostTensor> fwd = fwd_cg.run(primals);
    ASSERT_EQ(fwd.size(), static_cast<size_t>(p.num_forward_outputs) + p.saved.size());
    for (int i = 0; i < p.num_forward_outputs; ++i) expect_close(fwd[i], want[i], slack, "forward output");
    std::vector<HostTensor> bwd_in(fwd.begin() + p.num_forward_outputs, fwd.end());
    bwd_in.insert(bwd_in.end(), inputs.begin() + j.num_primals, inputs.end());
    std::vector<HostTensor> grads = bwd_cg.run(bwd_in);
    ASSERT_EQ(grads.size(), want.size() - static_cast<size_t>(j.num_forward_outputs));
    for (size_t i = 0; i < grads.size(); ++i)
      expect_close(grads[i], want[i + static_cast<size_t>(j.num_forward_outputs)], slack, p.backward.outputs()[i].name());
  }
}

TEST_P(BackendBackward, MlpPartitions) {
  KILN_REQUIRE_JIT();
  expect_partitions_match(mlp_loss(), 20);
}
TEST_P(BackendBackward, BlockPartitions) {
  KILN_REQUIRE_JIT();
  expect_partitions_match(block_loss(), 50);
}
TEST_P(BackendBackward, MiniGptPartitions) {
  KILN_REQUIRE_JIT();
  expect_partitions_match(minigpt_loss(), 50);
}

// ---- the training-step graph

// An Executor that compiles each graph it meets once (train() runs the same graph each step).
Executor compiled_executor(int* compiles) {
  auto cache = std::make_shared<std::map<std::string, backend::CompiledGraph>>();
  return [cache, compiles](const Graph& g, std::span<const HostTensor> in) {
    std::string key = print_graph(g);
    auto it = cache->find(key);
    if (it == cache->end()) {
      ++*compiles;
      it = cache->emplace(key, compile_for_test(g)).first;
    }
    return it->second.run(in);
  };
}

void expect_three_steps_match(const OptimizerConfig& opt, const std::string& what) {
  SCOPED_TRACE(what);
  ModelLoss m = mlp_loss();
  TrainStep ts = make_train_step(m.tg, opt);
  compile_for_test(ts.graph);  // on CUDA with no GPU: NVRTC still compiles the step
  KILN_REQUIRE_RUN();
  TrainState ref = ts.init(m.tg.parameters), cpu = ts.init(m.tg.parameters);
  std::vector<double> ref_losses = train(ts, ref, m.examples, 3);
  int compiles = 0;
  std::vector<double> cpu_losses = train(ts, cpu, m.examples, 3, compiled_executor(&compiles));
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(cpu.step, 3);
  ASSERT_EQ(cpu_losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(cpu_losses[i], ref_losses[i], 1e-5 * (1 + std::abs(ref_losses[i]))) << "step " << i;
  EXPECT_LT(ref_losses[2], ref_losses[0]);  // it trains
  ASSERT_EQ(cpu.params.size(), ref.params.size());
  for (size_t i = 0; i < ref.params.size(); ++i) expect_close(cpu.params[i], ref.params[i], 20, ts.param_names[i]);
  ASSERT_EQ(cpu.state.size(), ref.state.size());
  for (size_t i = 0; i < ref.state.size(); ++i) expect_close(cpu.state[i], ref.state[i], 20, ts.state_names[i]);
  // The parameters moved: a step that did nothing would pass the comparison too.
  EXPECT_FALSE(tensors_close(ref.params[0], m.tg.parameters[0], 1e-6, 0));
}

TEST_P(BackendBackward, TrainStepSgdMomentum) {
  KILN_REQUIRE_JIT();
  expect_three_steps_match(SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, "sgd momentum");
}
TEST_P(BackendBackward, TrainStepAdamW) {
  KILN_REQUIRE_JIT();
  expect_three_steps_match(AdamWConfig{.lr = 1e-2}, "adamw");
}

// ---- views and broadcasting under differentiation

// Transposed and sliced HostTensor views fed to a joint graph whose inputs are contiguous.
TEST_P(BackendBackward, StridedHostViewsAsJointInputs) {
  KILN_REQUIRE_JIT();
  Graph g = op_loss(Op::LayerNorm, {F({7, 33}), F({33}), F({33})}, {{"normalized_shape", IntList{33}}});
  JointGraph j = autograd::build_joint(g);
  std::vector<HostTensor> in = joint_inputs(j, inputs_for(g, 3), 3);
  // x as the transpose of a [33,7] tensor, c as columns 3..36 of a [7,40] tensor, the weight
  // as every other element of a [66] tensor.
  HostTensor xt = random_tensor(F({33, 7}), 21);
  in[0] = xt.view(TensorMeta(DType::F32, {7, 33}, {1, 7}), 0);
  HostTensor wide = random_tensor(F({7, 40}), 22);
  in[3] = wide.view(TensorMeta(DType::F32, {7, 33}, {40, 1}), 3);
  HostTensor w2 = random_tensor(F({66}), 23);
  in[1] = w2.view(TensorMeta(DType::F32, {33}, {2}), 1);
  ASSERT_FALSE(in[0].is_contiguous());
  ASSERT_FALSE(in[3].is_contiguous());
  expect_matches_reference(j.graph, in, 50);
}

// Transposes, slices, permutes and broadcasting inside the differentiated graph.
TEST_P(BackendBackward, ViewsAndBroadcastingInsideGraphs) {
  KILN_REQUIRE_JIT();
  Graph g("views_loss");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({33, 7})));
  Var row = b.wrap(g.add_input("row", F({1, 33})));
  Var col = b.wrap(g.add_input("col", F({7, 1})));
  Var w = b.wrap(g.add_input("w", F({2, 7, 40})));
  Var xt = b.transpose(x, 0, 1);                                // [7,33]
  Var s = b.slice(b.permute(w, {1, 0, 2}), 2, 3, 36);           // [7,2,33] strided
  Var t = b.add(b.mul(b.tanh(xt), row), col);                   // broadcast [7,33]
  Var u = b.mul(b.unsqueeze(t, 1), s);                          // [7,2,33]
  Var v = b.slice(b.exp(b.sub(u, b.amax(u, {2}, true))), 2, 0, 33, 2);  // every other column
  Var loss = b.add(b.sum(v), b.sum(b.matmul(xt, b.transpose(b.slice(w, 2, 0, 33), 1, 2))));
  g.set_outputs({loss});
  expect_joint_matches(g, 4, 20, 5);
}

TEST_P(BackendBackward, BroadcastingAcrossDtypes) {
  KILN_REQUIRE_JIT();
  // f64 with a 0-d operand and a [1,7] row: their gradients are sums over the broadcast dims.
  Graph g("broadcast_loss");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", T(DType::F64, {33, 7})));
  Var r = b.wrap(g.add_input("r", T(DType::F64, {1, 7})));
  Var s = b.wrap(g.add_input("s", T(DType::F64, {})));
  Var y = b.mul(b.sigmoid(b.add(x, r)), s);
  g.set_outputs({b.mean(b.square(y)), b.amax(y, {0})});
  expect_joint_matches(g, 4, 1, 7);
}

}  // namespace
}  // namespace kiln::testing
