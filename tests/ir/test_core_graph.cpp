// The Graph API: building, naming, use lists, rewiring, erasing, cloning, re-inference.
#include <gtest/gtest.h>

#include <new>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace kiln {
namespace {

TEST(Graph, AddNodeInfersTypesAndNamesResults) {
  Graph g("g");
  Value x = g.add_input("x", TensorMeta(DType::F32, {4, 1}));
  Value y = g.add_input("y", TensorMeta(DType::F16, {3}));
  Value s = g.add(Op::Add, {x, y});
  EXPECT_EQ(s.meta(), TensorMeta(DType::F32, {4, 3}));
  EXPECT_EQ(s.name(), "add");
  Value s2 = g.add(Op::Add, {x, y});
  EXPECT_EQ(s2.name(), "add_1");
  Value named = g.add(Op::Exp, {x}, {}, "x");  // taken name gets a suffix
  EXPECT_EQ(named.name(), "x_1");
  EXPECT_EQ(x.node->result_info().uses.size(), 3u);
  EXPECT_TRUE(verify(g).empty());
}

TEST(Graph, ShapeErrorsNameOpAndShapes) {
  Graph g("g");
  Value a = g.add_input("a", TensorMeta(DType::F32, {2, 3}));
  Value b = g.add_input("b", TensorMeta(DType::F32, {4, 5}));
  try {
    g.add(Op::Matmul, {a, b});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "matmul(f32[2,3], f32[4,5]): shapes [2,3] and [4,5] cannot be multiplied (2x3 and 4x5)");
  }
  EXPECT_THROW(g.add(Op::Sum, {a}, {{"dims", IntList{0}}}), Error);  // misspelled attribute
  EXPECT_THROW(g.add(Op::Add, {a}), Error);                          // too few inputs
  EXPECT_THROW(g.add_input("a", TensorMeta(DType::F32, {1})), Error);
  EXPECT_EQ(g.num_nodes(), 0u);  // failed adds leave nothing behind
}

TEST(Graph, ReplaceAllUsesAndEraseKeepUseListsRight) {
  Graph g = parse_graph(R"(graph g(%x: f32[3]) {
  %a = exp(%x)
  %b = neg(%a)
  %c = add(%b, %a)
  return (%c, %a)
})");
  Value a = g.find("a"), x = g.find("x");
  Value n = g.add_node(Op::Log, {x}, {}, "l", a.node)->result();  // inserted before %a
  g.replace_all_uses(a, n);
  EXPECT_EQ(g.outputs()[1], n);
  EXPECT_FALSE(g.is_used(a));
  g.erase(a.node);
  EXPECT_TRUE(verify(g).empty()) << verify(g).front();
  EXPECT_EQ(print_graph(g), R"(graph g(%x: f32[3]) {
  %l = log(%x) : f32[3]
  %b = neg(%l) : f32[3]
  %c = add(%b, %l) : f32[3]
  return (%c, %l)
}
)");
  EXPECT_FALSE(g.find("a"));
}

TEST(Graph, EraseOfUsedNodeIsAnInternalError) {
  Graph g = parse_graph("graph g(%x: f32[3]) {\n  %a = exp(%x)\n  return (%a)\n}\n");
  EXPECT_THROW(g.erase(g.find("a").node), InternalError);
}

TEST(Graph, CloneAndMoveAreIndependentAndValid) {
  Graph g = parse_graph(R"(graph g(%x: f32[6]) {
  %p, %q = split(%x, split_size=3)
  %s = mul(%p, %q)
  return (%s)
})");
  Graph c = g.clone();
  EXPECT_EQ(print_graph(c), print_graph(g));
  c.replace_all_uses(c.find("q"), c.find("p"));
  EXPECT_NE(print_graph(c), print_graph(g));
  Graph moved = std::move(c);
  EXPECT_TRUE(verify(moved).empty());
  Value x = moved.inputs()[0]->result();
  EXPECT_EQ(x.node->graph(), &moved);  // nodes follow their graph when it moves
  moved.add(Op::Exp, {x});
}

TEST(Graph, ReinferTypesPropagatesNewStrides) {
  Graph g = parse_graph(R"(graph g(%x: f32[2,3], %y: f32[3,2]) {
  %t = transpose(%x, dim0=0, dim1=1)
  %u = unsqueeze(%t, dim=0)
  return (%u)
})");
  g.find("t").node->set_input(0, g.find("y"));  // now a transpose of a [3,2] tensor
  EXPECT_FALSE(verify(g).empty());
  EXPECT_TRUE(g.reinfer_types());
  EXPECT_TRUE(verify(g).empty());
  EXPECT_EQ(g.find("u").meta().str(), "f32[1,2,3]{2,1,2}");  // PyTorch: sizes[0]*strides[0]
}

TEST(Verifier, ReportsEveryProblemWithTheNode) {
  Graph g = parse_graph("graph g(%x: f32[3]) {\n  %a = exp(%x)\n  %b = neg(%a)\n  return (%b)\n}\n");
  // Point %a at %b: %b is used before it is defined.
  g.find("a").node->set_input(0, g.find("b"));
  auto problems = verify(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "%a = exp: '%b' is used before it is defined");
  try {
    verify_or_throw(g, "after pass 'test'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph 'g' is invalid after pass 'test'"), std::string::npos);
  }
}

TEST(RegisterOp, UserOpsUseTheSameTable) {
  static Op scale2 = register_op(
      "test_scale2", OpCategory::Pointwise, "Tensor self, float factor=2.0",
      [](std::span<const TensorMeta> in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; }, nullptr);
  EXPECT_EQ(find_op("test_scale2")->op, scale2);
  Graph g = parse_graph("graph g(%x: f32[3]) {\n  %y = test_scale2(%x, factor=3.0)\n  return (%y)\n}\n");
  EXPECT_EQ(g.find("y").node->attrs().get_float("factor"), 3.0);
  EXPECT_THROW(register_op("test_scale2", OpCategory::Pointwise, "Tensor self", op_info(scale2).meta, nullptr), Error);
  EXPECT_THROW(register_op("add", OpCategory::Pointwise, "Tensor self", op_info(scale2).meta, nullptr), Error);
}

// A graph's identity is never reused: a cache keyed by it (compiled_executor) cannot take a new
// graph built where a freed one was for that one. A moved graph keeps the identity it had.
TEST(GraphIdentity, IsNeverReusedAndMovesWithTheGraph) {
  alignas(Graph) unsigned char place[sizeof(Graph)];
  Graph* first = new (place) Graph("a");
  const uint64_t first_id = first->id();
  first->~Graph();
  Graph* second = new (place) Graph("a");  // the same address, the same name
  EXPECT_NE(second->id(), first_id);
  Graph moved(std::move(*second));
  EXPECT_NE(moved.id(), second->id()) << "the moved-from graph gets an identity of its own";
  const uint64_t kept = moved.id();
  Graph target("b");
  target = std::move(moved);
  EXPECT_EQ(target.id(), kept);
  second->~Graph();
}

}  // namespace
}  // namespace kiln
