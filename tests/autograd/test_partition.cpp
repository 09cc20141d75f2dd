// The partitioners: hand-written joint graphs (tests/autograd/partition/*.kir) with exact
// expected saved sets, and real joint graphs from build_joint (MLP, a transformer Block,
// MiniGPT's loss) checked by running forward then backward against the joint graph.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "frontend/kiln.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/partition.h"
#include "tests/support/support.h"

namespace kiln::autograd {
namespace {

using kiln::testing::tensors_close;

// A hand-written joint graph: inputs named tangent_* are the tangents, outputs named grad_*
// the gradients (the joint convention of passes/autograd/joint.h).
JointGraph load_joint(const std::string& file) {
  std::vector<Graph> graphs = parse_file(kiln::testing::data_dir() + "/autograd/partition/" + file);
  JointGraph j;
  j.graph = std::move(graphs.at(0));
  for (const Node* in : j.graph.inputs()) {
    if (in->name().rfind("tangent_", 0) == 0) ++j.num_tangents;
    else ++j.num_primals;
  }
  for (const Value& v : j.graph.outputs()) {
    if (v.name().rfind("grad_", 0) == 0) j.wrt.push_back(v.name().substr(5));
    else ++j.num_forward_outputs;
  }
  return j;
}

std::vector<std::string> saved_names(const Partition& p) {
  std::vector<std::string> out;
  for (const auto& s : p.saved) out.push_back(s.name);
  return out;
}

// Forward then backward on the interpreter equals the joint graph exactly; both graphs print
// and parse back; the backward recomputes only cheap nodes.
void expect_partition_runs_like_joint(const JointGraph& j, const Partition& p, const std::vector<HostTensor>& inputs) {
  SCOPED_TRACE(fmt::format("partition of {}", j.graph.name()));
  std::vector<HostTensor> expected = interpret(j.graph, inputs);
  std::vector<HostTensor> primals(inputs.begin(), inputs.begin() + j.num_primals);
  std::vector<HostTensor> fwd = interpret(p.forward, primals);
  ASSERT_EQ(fwd.size(), static_cast<size_t>(j.num_forward_outputs) + p.saved.size());
  for (int i = 0; i < j.num_forward_outputs; ++i) EXPECT_TRUE(tensors_close(fwd[i], expected[i], 0, 0)) << "output " << i;
  std::vector<HostTensor> bwd_in(fwd.begin() + j.num_forward_outputs, fwd.end());
  bwd_in.insert(bwd_in.end(), inputs.begin() + j.num_primals, inputs.end());
  std::vector<HostTensor> grads = interpret(p.backward, bwd_in);
  ASSERT_EQ(grads.size(), expected.size() - static_cast<size_t>(j.num_forward_outputs));
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_TRUE(tensors_close(grads[i], expected[i + static_cast<size_t>(j.num_forward_outputs)], 0, 0))
        << p.backward.outputs()[i].name();

  for (const Graph* g : {&p.forward, &p.backward}) EXPECT_EQ(print_graph(parse_graph(print_graph(*g))), print_graph(*g));

  int recomputed = 0;
  for (const Node* n : p.backward.nodes()) {
    if (!p.forward.find(n->name())) continue;
    if (p.forward.find(n->name()).node->is_input()) continue;
    ++recomputed;
    bool cheap = n->category() == OpCategory::Pointwise || n->category() == OpCategory::View ||
                 n->category() == OpCategory::Creation || n->op() == Op::Tril || n->op() == Op::Triu;
    EXPECT_TRUE(cheap) << "the backward recomputes %" << n->name() << " = " << op_name(n->op());
  }
  EXPECT_EQ(recomputed, p.recomputed_nodes);
  int64_t bytes = 0;
  for (const auto& s : p.saved) bytes += s.bytes;
  EXPECT_EQ(bytes, p.saved_bytes);
}

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) out.push_back(random_tensor(g.inputs()[i]->meta(), seed + i));
  return out;
}

struct Expected {
  const char* file;
  std::vector<std::string> default_saved;
  int64_t default_bytes;
  std::vector<std::string> mincut_saved;
  int64_t mincut_bytes;
  int mincut_recomputed;
};

class HandWritten : public ::testing::TestWithParam<Expected> {};

TEST_P(HandWritten, SavedSetsAndRuns) {
  const Expected& e = GetParam();
  JointGraph j = load_joint(e.file);
  std::vector<HostTensor> inputs = random_inputs(j.graph, 7);

  Partition d = partition(j, PartitionKind::Default);
  EXPECT_EQ(saved_names(d), e.default_saved);
  EXPECT_EQ(d.saved_bytes, e.default_bytes);
  EXPECT_EQ(d.recomputed_nodes, 0);
  EXPECT_EQ(d.num_forward_outputs, j.num_forward_outputs);
  expect_partition_runs_like_joint(j, d, inputs);

  Partition m = partition(j, PartitionKind::MinCut);
  EXPECT_EQ(saved_names(m), e.mincut_saved);
  EXPECT_EQ(m.saved_bytes, e.mincut_bytes);
  EXPECT_EQ(m.recomputed_nodes, e.mincut_recomputed);
  EXPECT_LE(m.saved_bytes, d.saved_bytes);
  expect_partition_runs_like_joint(j, m, inputs);
}

INSTANTIATE_TEST_SUITE_P(
    Partition, HandWritten,
    ::testing::Values(
        // relu(x @ w): the default saves relu's output; min-cut saves its bool mask instead
        // (64 bytes, not 256) and recomputes the 0-d zero it compares against.
        Expected{"relu_matmul.kir", {"x", "w", "y"}, 128 + 512 + 256, {"x", "w", "mask"}, 128 + 512 + 64, 1},
        // A pointwise chain: saving x and recomputing exp, sin, tanh halves the bytes.
        Expected{"pointwise_chain.kir", {"a", "y"}, 512, {"x"}, 256, 3},
        // gelu(gelu(2x)): the default saves both gelu inputs (and the 0-d 2); min-cut only x.
        Expected{"gelu_chain.kir", {"two", "u", "v"}, 4 + 1024 + 1024, {"x"}, 1024, 3},
        // softmax: y is the cheapest; the alternatives would have to save the sum as well.
        Expected{"softmax.kir", {"y"}, 128, {"y"}, 128, 0},
        // The sum is not recomputed from x although x is saved: a tie, so the default stays.
        Expected{"sum_scale.kir", {"x", "th"}, 128 + 16, {"x", "th"}, 128 + 16, 0},
        // The matmul result is saved (never recomputed from the saved x and w); tanh and
        // sigmoid of it are recomputed.
        Expected{"matmul_two_heads.kir", {"x", "w", "t", "sg"}, 128 + 512 + 256 + 256, {"x", "w", "m"}, 128 + 512 + 256,
                 2}),
    [](const ::testing::TestParamInfo<Expected>& info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.'));
    });

TEST(Partition, GraphsKeepJointNamesAndSignature) {
  JointGraph j = load_joint("matmul_two_heads.kir");
  Partition m = partition(j, PartitionKind::MinCut);
  EXPECT_EQ(print_graph(m.forward),
            "graph joint_forward(%x: f32[4,8], %w: f32[8,16]) {\n"
            "  %m = matmul(%x, %w) : f32[4,16]\n"
            "  %t = tanh(%m) : f32[4,16]\n"
            "  %sg = sigmoid(%m) : f32[4,16]\n"
            "  %y = add(%t, %sg) : f32[4,16]\n"
            "  return (%y, %x, %w, %m)\n"
            "}\n");
  ASSERT_EQ(m.backward.inputs().size(), 4u);
  EXPECT_EQ(m.backward.inputs()[3]->name(), "tangent_y");
  EXPECT_EQ(m.backward.outputs()[0].name(), "grad_x");
  EXPECT_EQ(m.backward.outputs()[1].name(), "grad_w");
  EXPECT_TRUE(m.backward.find("t"));
  EXPECT_TRUE(m.backward.find("sg"));
  EXPECT_FALSE(m.backward.find("y"));  // dead in the backward
}

TEST(Partition, KindNames) {
  EXPECT_EQ(parse_partition_kind("default"), PartitionKind::Default);
  EXPECT_EQ(parse_partition_kind("mincut"), PartitionKind::MinCut);
  EXPECT_EQ(partition_kind_name(PartitionKind::MinCut), "mincut");
  EXPECT_TRUE(kiln::testing::has(kiln::testing::error_of([] { parse_partition_kind("greedy"); }), "'greedy'"));
}

TEST(Partition, BadJointCountsAreErrors) {
  JointGraph j = load_joint("softmax.kir");
  j.num_primals = 5;
  EXPECT_TRUE(kiln::testing::has(kiln::testing::error_of([&] { partition(j, PartitionKind::Default); }), "inputs"));
}

// ---- real joint graphs from build_joint

struct Traced {
  JointGraph joint;
  std::vector<HostTensor> inputs;  // primals (example inputs then parameters), then tangents
};

Traced joint_of(const TracedGraph& tg, const std::vector<HostTensor>& example_inputs) {
  Traced t;
  t.joint = build_joint(tg.graph);
  t.inputs = tg.graph_inputs(example_inputs);
  for (int i = 0; i < t.joint.num_tangents; ++i) {
    const Node* in = t.joint.graph.inputs()[static_cast<size_t>(t.joint.num_primals + i)];
    t.inputs.push_back(random_tensor(in->meta(), 100 + static_cast<uint64_t>(i)));
  }
  return t;
}

void check_both(const Traced& t, const char* what) {
  Partition d = partition(t.joint, PartitionKind::Default);
  Partition m = partition(t.joint, PartitionKind::MinCut);
  expect_partition_runs_like_joint(t.joint, d, t.inputs);
  expect_partition_runs_like_joint(t.joint, m, t.inputs);
  EXPECT_LE(m.saved_bytes, d.saved_bytes);
  std::printf("[ saved    ] %s: default %lld bytes in %zu tensors; mincut %lld bytes in %zu tensors, %d recomputed\n",
              what, static_cast<long long>(d.saved_bytes), d.saved.size(), static_cast<long long>(m.saved_bytes),
              m.saved.size(), m.recomputed_nodes);
}

TEST(PartitionReal, Mlp) {
  nn::MLP mlp(16, 0, 1);
  Tensor x = randn({2, 4, 16}, 3);
  TracedGraph tg = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp(in[0]).sum()}; }, {x});
  check_both(joint_of(tg, {x.data()}), "MLP(16)");
}

TEST(PartitionReal, TransformerBlock) {
  nn::Block block(64, 4, 32, 5);
  Tensor x = randn({2, 16, 64}, 9);
  TracedGraph tg = trace([&](const Tensor& in) { return block(in); }, x);
  Traced t = joint_of(tg, {x.data()});
  Partition d = partition(t.joint, PartitionKind::Default);
  Partition m = partition(t.joint, PartitionKind::MinCut);
  EXPECT_LT(m.saved_bytes, d.saved_bytes);
  check_both(t, "Block(d=64, heads=4) on [2,16,64]");
}

TEST(PartitionReal, MiniGptLoss) {
  nn::MiniGPTConfig cfg{.vocab_size = 40, .d_model = 16, .n_heads = 2, .n_layers = 1, .context = 8};
  nn::MiniGPT model(cfg, 2);
  Tensor tokens = randint(0, 40, {2, 8}, 1), targets = randint(0, 40, {2, 8}, 2);
  TracedGraph tg = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; }, {tokens, targets});
  check_both(joint_of(tg, {tokens.data(), targets.data()}), "MiniGPT(1 layer, d=16) loss");
}

}  // namespace
}  // namespace kiln::autograd
