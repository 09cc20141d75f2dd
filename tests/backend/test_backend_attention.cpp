// scaled_dot_product_attention compiled on every device against the reference interpreter:
// the flash kernels (forward and both backward passes) at odd sizes, tails and empty calls, in
// every float dtype, causal or not; the written-out form (masks, dropout, broadcast batch,
// heads wider than the kernels'); views as inputs; and runs that give the same bits twice.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendAttention : public DeviceTest {};

int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const Node* m : g.nodes()) n += m->op() == op;
  return n;
}
KILN_DEVICE_TESTS(BackendAttention);

struct Case {
  Shape batch;
  int64_t L, S, E, Ev;
  bool causal;
};

// sum(sdpa(q, k, v) * c): a loss whose gradient is not uniform.
Graph attention_graph(DType dt, const Case& c, bool loss, const Attrs& extra = {}) {
  Graph g("attention");
  Builder b(g);
  auto dims = [&](int64_t rows, int64_t cols) {
    Shape s = c.batch;
    s.push_back(rows);
    s.push_back(cols);
    return s;
  };
  Value q = g.add_input("q", TensorMeta(dt, dims(c.L, c.E)));
  Value k = g.add_input("k", TensorMeta(dt, dims(c.S, c.E)));
  Value v = g.add_input("v", TensorMeta(dt, dims(c.S, c.Ev)));
  Attrs a = extra;
  a.set("is_causal", c.causal);
  Var y = b.op(Op::ScaledDotProductAttention, {q, k, v}, a, "y");
  if (!loss) {
    g.set_outputs({y});
    return g;
  }
  Var w = b.wrap(g.add_input("c", y.meta()));
  g.set_outputs({b.sum(b.mul(y, w))});  // in the inputs' dtype: its tolerance allows 16-bit weights
  return g;
}

// expect_matches_reference where the device runs; elsewhere the graph is still compiled (NVRTC
// checks every kernel instance: each dtype, head and tile size is a template instance).
void check(const Graph& g, const std::vector<HostTensor>& inputs, double slack, const backend::CompileOptions& options = {}) {
  std::string why;
  if (device_can_run(&why)) return expect_matches_reference(g, inputs, slack, options);
  compile_for_test(g, options);
}

std::vector<HostTensor> joint_inputs(const autograd::JointGraph& j, uint64_t seed) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < j.graph.inputs().size(); ++i) in.push_back(random_tensor(j.graph.inputs()[i]->meta(), seed + 31 * i));
  return in;
}

const Case kCases[] = {
    {{2, 3}, 37, 45, 16, 24, true},   // tails in both tile dims, L < S, Ev != E
    {{2, 3}, 37, 45, 16, 24, false},
    {{1}, 64, 64, 64, 64, true},      // whole tiles
    {{}, 130, 70, 40, 8, true},       // rank 2, L > S (causal rows past S see every key)
    {{3}, 1, 1, 1, 1, false},
    {{2}, 5, 0, 8, 8, false},         // no keys: zeros, lse -inf
    {{2}, 0, 5, 8, 8, true},          // no queries
    {{1, 2}, 33, 33, 128, 128, true},
    {{1}, 17, 19, 256, 200, false},   // the widest head the kernels take
};

TEST_P(BackendAttention, ForwardMatchesTheReferenceAtOddSizesInEveryDtype) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const Case& c : kCases) {
      SCOPED_TRACE(fmt::format("{} batch {} L {} S {} E {} Ev {} causal {}", dtype_name(dt), shape_str(c.batch), c.L, c.S, c.E, c.Ev, c.causal));
      Graph g = attention_graph(dt, c, false);
      check(g, inputs_for(g, 3), 4);
      if (dt == DType::F16 || dt == DType::BF16)  // the tensor-core forward's other tiles: 16 query rows a warp, 32 keys
        for (const char* knobs : {"attention_rows_per_warp 16", "attention_key_tile 32"}) {
          backend::CompileOptions other_tiles;
          other_tiles.schedule_knobs = knobs;
          check(g, inputs_for(g, 3), 4, other_tiles);
        }
    }
}

TEST_P(BackendAttention, BackwardMatchesTheReference) {
  KILN_REQUIRE_JIT();
  const Case cases[] = {kCases[0], kCases[3], kCases[5], kCases[6], kCases[7]};
  for (DType dt : {DType::F32, DType::F64, DType::BF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} batch {} L {} S {} E {} causal {}", dtype_name(dt), shape_str(c.batch), c.L, c.S, c.E, c.causal));
      autograd::JointGraph j = autograd::build_joint(attention_graph(dt, c, true));
      ASSERT_EQ(count_ops(j.graph, Op::FlashAttentionBackward), 1) << "the flash path";
      check(j.graph, joint_inputs(j, 5), 8);
    }
}

// Masks, dropout, broadcast batch dims and heads wider than 256 take the written-out form
// (passes/attention_math.h), forward and backward.
TEST_P(BackendAttention, TheWrittenOutFormCoversWhatTheKernelsDoNotTake) {
  KILN_REQUIRE_JIT();
  Graph g("masked");
  Builder b(g);
  Value q = g.add_input("q", F({2, 3, 9, 8})), k = g.add_input("k", F({1, 3, 11, 8})), v = g.add_input("v", F({2, 3, 11, 8}));
  Value bias = g.add_input("bias", F({9, 11}));
  Value keep = g.add_input("keep", T(DType::Bool, {3, 1, 11}));
  Var a = b.op(Op::ScaledDotProductAttention, {q, k, v, bias}, Attrs{{"dropout_p", 0.25}, {"seed", int64_t{9}}});
  Var m = b.op(Op::ScaledDotProductAttention, {q, k, v, keep}, Attrs{{"scale", 0.5}});
  g.set_outputs({b.sum(a * m)});
  autograd::JointGraph j = autograd::build_joint(g, {{"q", "k", "v", "bias"}});
  EXPECT_EQ(count_ops(j.graph, Op::FlashAttention), 0);
  expect_matches_reference(j.graph, joint_inputs(j, 7), 8);
  Case wide{{2}, 9, 7, 300, 16, true};
  expect_matches_reference(attention_graph(DType::F32, wide, false), 3, 4);
}

// q, k and v as views of one projection ([B, T, 3, H, D] permuted to [B, H, T, D]): the kernels
// read contiguous copies.
TEST_P(BackendAttention, ViewsOfOneProjectionAsInputs) {
  KILN_REQUIRE_JIT();
  Graph g("qkv");
  Builder b(g);
  Value x = g.add_input("qkv", F({2, 10, 3, 4, 16}));
  std::vector<Var> parts = b.split(x, {1, 1, 1}, 2);
  auto head = [&](Var p) { return b.permute(b.reshape(p, {2, 10, 4, 16}), {0, 2, 1, 3}); };
  g.set_outputs({b.op(Op::ScaledDotProductAttention, {head(parts[0]), head(parts[1]), head(parts[2])}, Attrs{{"is_causal", true}})});
  expect_matches_reference(g, 11, 4);
}

TEST_P(BackendAttention, RunsGiveTheSameBitsTwice) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::BF16}) {  // FFMA tiles, and tensor cores on a GPU
    autograd::JointGraph j = autograd::build_joint(attention_graph(dt, {{2, 2}, 77, 77, 64, 64, true}, true));
    backend::CompiledGraph cg = compile_for_test(j.graph);
    KILN_REQUIRE_RUN();
    std::vector<HostTensor> in = joint_inputs(j, 3);
    std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(tensors_close(first[i], second[i], 0, 0)) << dtype_name(dt) << " output " << i;
  }
}

}  // namespace
}  // namespace kiln::testing
