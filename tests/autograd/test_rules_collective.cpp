// The collectives' derivative rules, gradchecked in float64 over a simulated group: the joint
// graph of loss_r = sum(collective(x_r) * c_r), run for every rank by interpret_group, against
// central differences of the loss summed over the ranks, perturbing one element of one rank's
// x at a time (each rank's gradient of the total loss, as DDP and FSDP take them).
#include <gtest/gtest.h>

#include <cmath>

#include "ir/parser.h"
#include "ir/reference/group.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/vjp.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

struct Case {
  const char* name;
  int world;
  const char* graph;  // inputs %x (differentiated) and %c (the weights of the loss)
};

const Case kCases[] = {
    {"all_reduce_sum", 3, R"(graph g(%x: f64[2,3], %c: f64[2,3]) {
  %y = all_reduce(%x, world_size=3) : f64[2,3]
  %p = mul(%y, %c) : f64[2,3]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"all_reduce_mean", 3, R"(graph g(%x: f64[4], %c: f64[4]) {
  %y = all_reduce(%x, world_size=3, op="mean") : f64[4]
  %q = mul(%y, %y) : f64[4]
  %p = mul(%q, %c) : f64[4]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"all_gather", 3, R"(graph g(%x: f64[2,2], %c: f64[2,6]) {
  %y = all_gather(%x, world_size=3, dim=1) : f64[2,6]
  %t = tanh(%y) : f64[2,6]
  %p = mul(%t, %c) : f64[2,6]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"reduce_scatter_sum", 2, R"(graph g(%x: f64[4,3], %c: f64[2,3]) {
  %y = reduce_scatter(%x, world_size=2) : f64[2,3]
  %q = mul(%y, %y) : f64[2,3]
  %p = mul(%q, %c) : f64[2,3]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"reduce_scatter_mean", 2, R"(graph g(%x: f64[2,4], %c: f64[2,2]) {
  %y = reduce_scatter(%x, world_size=2, dim=1, op="mean") : f64[2,2]
  %p = mul(%y, %c) : f64[2,2]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"broadcast", 3, R"(graph g(%x: f64[3], %c: f64[3]) {
  %y = broadcast(%x, world_size=3, src=1) : f64[3]
  %s = sin(%y) : f64[3]
  %p = mul(%s, %c) : f64[3]
  %l = sum(%p) : f64[]
  return (%l)
})"},
    {"reduce_mean", 3, R"(graph g(%x: f64[2], %c: f64[2]) {
  %y = reduce(%x, world_size=3, dst=2, op="mean") : f64[2]
  %q = mul(%y, %y) : f64[2]
  %p = mul(%q, %c) : f64[2]
  %l = sum(%p) : f64[]
  return (%l)
})"},
};

class CollectiveRule : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveRule, MatchesCentralDifferencesOfTheLossOverTheGroup) {
  const Case& k = GetParam();
  Graph g = parse_graph(k.graph);
  autograd::JointOptions o;
  o.wrt = {"x"};
  autograd::JointGraph j = autograd::build_joint(g, o);
  ASSERT_EQ(j.num_tangents, 1);
  std::vector<std::vector<HostTensor>> in;  // per rank: x, c
  for (int r = 0; r < k.world; ++r) {
    std::vector<HostTensor> mine;
    for (size_t i = 0; i < g.inputs().size(); ++i) mine.push_back(random_tensor(g.inputs()[i]->meta(), 100 * r + i + 1));
    in.push_back(std::move(mine));
  }
  // The analytic gradients: each rank's joint graph with tangent 1 for its loss.
  std::vector<std::vector<HostTensor>> joint_in = in;
  for (auto& mine : joint_in) mine.push_back(HostTensor::scalar(DType::F64, 1.0));
  std::vector<std::vector<HostTensor>> joint_out = interpret_group(j.graph, joint_in);
  auto total = [&](const std::vector<std::vector<HostTensor>>& at) {
    double s = 0;
    for (const auto& rank : interpret_group(g, at)) s += rank[0].get(0);
    return s;
  };
  const double h = 1e-6;
  int checked = 0;
  for (int r = 0; r < k.world; ++r) {
    const HostTensor& grad = joint_out[static_cast<size_t>(r)][static_cast<size_t>(j.num_forward_outputs)];
    for (int64_t i = 0; i < in[static_cast<size_t>(r)][0].numel(); ++i) {
      auto plus = in, minus = in;
      plus[static_cast<size_t>(r)][0] = in[static_cast<size_t>(r)][0].clone();
      minus[static_cast<size_t>(r)][0] = in[static_cast<size_t>(r)][0].clone();
      plus[static_cast<size_t>(r)][0].set(i, in[static_cast<size_t>(r)][0].get(i) + h);
      minus[static_cast<size_t>(r)][0].set(i, in[static_cast<size_t>(r)][0].get(i) - h);
      const double numeric = (total(plus) - total(minus)) / (2 * h);
      EXPECT_NEAR(grad.get(i), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << k.name << ": rank " << r << ", x[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CollectiveRule, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Every collective has a rule, and each is its adjoint collective (all_gather <-> reduce_scatter).
TEST(CollectiveRules, EachIsItsAdjointCollective) {
  const std::pair<const char*, const char*> pairs[] = {{"all_gather", "reduce_scatter"}, {"reduce_scatter", "all_gather"},
                                                       {"all_reduce", "all_reduce"},     {"broadcast", "reduce"},
                                                       {"reduce", "broadcast"}};
  for (auto [fwd, bwd] : pairs) {
    Op op = find_op(fwd)->op;
    EXPECT_NE(autograd::find_vjp(op), nullptr) << fwd;
    EXPECT_TRUE(autograd::is_differentiable(op)) << fwd;
    const Shape s = std::string(fwd) == "reduce_scatter" ? Shape{4} : Shape{2};
    Graph g("g");
    Value x = g.add_input("x", TensorMeta(DType::F64, s));
    Attrs a{{"world_size", int64_t(2)}};
    Node* n = g.add_node(op, {x}, a, "y");
    g.set_outputs({n->result(0)});
    autograd::JointOptions o;
    o.wrt = {"x"};
    std::string backward;
    autograd::JointGraph j = autograd::build_joint(g, o);
    for (Node* m : j.graph.nodes())
      if (m->category() == OpCategory::Collective && m->name() != "y") backward += std::string(m->info().name) + " ";
    EXPECT_TRUE(testing::has(backward, bwd)) << fwd << "'s backward: " << backward;
  }
}

}  // namespace
}  // namespace kiln
