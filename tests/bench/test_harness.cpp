// The benchmark harness's parts that decide what the comparison with PyTorch reports: the .npy
// exchange (what bench/npy_check.py receives, by role and module path) and the L2 rotation.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "bench/harness.h"
#include "bench/workloads.h"
#include "ir/npy.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"

namespace kiln::bench {
namespace {

const Workload& workload(const std::vector<Workload>& all, const std::string& id) {
  for (const Workload& w : all)
    if (w.id == id) return w;
  throw std::runtime_error("no workload " + id);
}

// The interpreter stands in for a backend: the exchange's wiring is what is under test.
std::vector<HostTensor> interpreted(const Graph& g, const std::vector<HostTensor>& ins) { return interpret(g, ins); }

TEST(BenchRotation, CoversTwiceTheL2WhereTheInputsFitInIt) {
  const int64_t l2 = 50 << 20;
  EXPECT_EQ(rotation_count(17 << 20, l2), 6);   // ceil(100 / 17)
  EXPECT_EQ(rotation_count(25 << 20, l2), 4);
  EXPECT_EQ(rotation_count(l2, l2), 2);
  EXPECT_EQ(rotation_count(l2 + 1, l2), 1);     // never in L2: nothing to rotate
  EXPECT_EQ(rotation_count(32 << 10, l2), 1);   // 3200 copies: the working set stays in L2 anyway
  EXPECT_EQ(rotation_count(0, l2), 1);
  EXPECT_EQ(rotation_count(1 << 20, 0), 1);     // no L2 size (the CPU)
}

TEST(BenchExchange, BackwardRowHandsPyTorchTheForwardInputsTangentsAndGradients) {
  auto all = comparison_workloads(1024);
  Case c = workload(all, "layer_norm_bwd").build(true);
  NpyExchange x = c.exchange(interpreted);
  ASSERT_EQ(x.inputs.size(), 4u);
  EXPECT_EQ(x.inputs[0].role, "input");
  EXPECT_EQ(x.inputs[2].role, "input");
  EXPECT_EQ(x.inputs[3].role, "tangent");
  ASSERT_EQ(x.outputs.size(), 3u);
  // The same gradients as the joint graph on the same inputs: the forward's saved tensors reached
  // the backward graph in the partition's order.
  Graph fwd = layer_norm_forward(x.inputs[0].value.shape()[0], x.inputs[0].value.shape()[1]);
  autograd::JointGraph joint = autograd::build_joint(fwd);
  std::vector<HostTensor> joint_inputs;
  for (const NpyTensor& t : x.inputs) joint_inputs.push_back(t.value);
  std::vector<HostTensor> want = interpret(joint.graph, joint_inputs);
  for (size_t i = 0; i < 3; ++i) {
    const HostTensor& got = x.outputs[i].value;
    const HostTensor& ref = want[static_cast<size_t>(joint.num_forward_outputs) + i];
    ASSERT_EQ(got.shape(), ref.shape()) << "grad " << i;
    for (int64_t k = 0; k < ref.numel(); ++k) ASSERT_NEAR(got.get(k), ref.get(k), 1e-5 + 1e-5 * std::abs(ref.get(k))) << "grad " << i;
  }
}

TEST(BenchExchange, TrainStepNamesEveryParameterAndStateByModulePath) {
  auto all = comparison_workloads(1024);
  Case c = workload(all, "mlp_train_step").build(true);
  NpyExchange x = c.exchange(interpreted);
  EXPECT_EQ(x.config.at("model"), "relu_mlp");
  std::set<std::string> params, avg, avg_sq;
  int batch = 0, step = 0;
  for (const NpyTensor& t : x.inputs) {
    if (t.role == "param") params.insert(t.path);
    else if (t.role == "exp_avg") avg.insert(t.path);
    else if (t.role == "exp_avg_sq") avg_sq.insert(t.path);
    else if (t.role == "batch") ++batch;
    else if (t.role == "step") ++step;
    else ADD_FAILURE() << "unexpected role " << t.role;
  }
  EXPECT_EQ(params, (std::set<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(avg, params);
  EXPECT_EQ(avg_sq, params);
  EXPECT_EQ(batch, 2);
  EXPECT_EQ(step, 1);
  ASSERT_EQ(x.outputs.size(), 1 + 3 * params.size());
  EXPECT_EQ(x.outputs[0].role, "loss");
  EXPECT_EQ(x.outputs[0].value.numel(), 1);
  // A new parameter has its input's path and shape.
  for (size_t i = 1; i <= params.size(); ++i) {
    EXPECT_EQ(x.outputs[i].role, "param");
    EXPECT_EQ(x.outputs[i].value.shape(), x.inputs[i - 1].value.shape());
    EXPECT_EQ(x.outputs[i].path, x.inputs[i - 1].path);
  }
  // The rotated inputs are the batch.
  ASSERT_EQ(c.rotated.size(), 2u);
  for (size_t i : c.rotated) EXPECT_EQ(x.inputs[i].role, "batch");
}

TEST(BenchExchange, LlamaRowHandsPyTorchItsConfigAndRopeBuffers) {
  auto all = comparison_workloads(1024);
  Case c = workload(all, "llama_1b_train_step_bf16").build(true);
  NpyExchange x = c.exchange(interpreted);
  EXPECT_EQ(x.config.at("model"), "llama");
  EXPECT_EQ(x.config.at("autocast"), "bf16");
  EXPECT_EQ(x.config.at("kv_heads"), 2);
  std::set<std::string> buffers;
  int params = 0;
  for (const NpyTensor& t : x.inputs) {
    if (t.role == "buffer") buffers.insert(t.path);
    params += t.role == "param";
  }
  EXPECT_EQ(params, 2 + 2 * 9 + 1);  // embed_tokens, 9 a block, norm, lm_head
  // RoPE's tables are module buffers: inputs of the step, loaded into PyTorch's model by path.
  EXPECT_EQ(buffers, (std::set<std::string>{"layers.0.attn.rope.cos", "layers.0.attn.rope.sin", "layers.1.attn.rope.cos",
                                            "layers.1.attn.rope.sin"}));
  // The loss of a step from the same parameters is near log(vocab) for random tokens.
  EXPECT_NEAR(x.outputs[0].value.get(0), std::log(64.0), 1.0);
}

TEST(BenchExchange, WritesAManifestAndNpyFilesThatReadBack) {
  auto all = comparison_workloads(1024);
  Case c = workload(all, "cross_entropy").build(true);
  const std::string dir = (std::filesystem::temp_directory_path() / "kiln-test-exchange").string();
  write_exchange(dir, c, interpreted);
  std::ifstream f(dir + "/manifest.json");
  nlohmann::json m = nlohmann::json::parse(f);
  ASSERT_EQ(m["inputs"].size(), 3u);   // logits, targets, the loss's tangent
  ASSERT_EQ(m["outputs"].size(), 2u);  // loss, the logits' gradient
  EXPECT_EQ(m["inputs"][1]["dtype"], "i64");
  for (const auto& e : m["inputs"]) {
    HostTensor t = read_npy(dir + "/" + e["file"].get<std::string>());
    EXPECT_EQ(t.shape(), e["shape"].get<std::vector<int64_t>>()) << e["file"];
  }
  HostTensor grad = read_npy(dir + "/" + m["outputs"][1]["file"].get<std::string>());
  EXPECT_EQ(grad.shape(), m["inputs"][0]["shape"].get<std::vector<int64_t>>());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::bench
