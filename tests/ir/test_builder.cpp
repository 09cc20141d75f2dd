// Builder: the gradient helpers (sum_to, unreduce, restore_reduced_dims), constants, Var
// operators, names and insertion points, checked on the printed nodes and by running them.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace kiln::testing;

// Runs g (outputs set to `outs`) on `inputs` and returns the first output.
HostTensor eval(Graph& g, std::vector<Value> outs, std::vector<HostTensor> inputs) {
  g.set_outputs(std::move(outs));
  return interpret(g, inputs)[0];
}

HostTensor iota(DType dt, const Shape& s) {
  std::vector<double> v;
  for (int64_t i = 0; i < numel(s); ++i) v.push_back(static_cast<double>(i + 1));
  return make(dt, s, v);
}

TEST(Builder, SumToSumsBroadcastDims) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({2, 3, 4}));
  Var r = b.sum_to(x, {3, 1});
  EXPECT_EQ(r.shape(), (Shape{3, 1}));
  EXPECT_EQ(print_node(*g.nodes()[0]), "%sum = sum(%x, dim=[0,2], keepdim=true) : f32[1,3,1]");
  // element (j) = sum over i, k of x[i, j, k] with x = 1..24.
  HostTensor out = eval(g, {r}, {iota(DType::F32, {2, 3, 4})});
  EXPECT_TRUE(tensors_close(out, make(DType::F32, {3, 1}, {10 + 58, 26 + 74, 42 + 90})));
}

TEST(Builder, SumToAScalarAndToTheSameShape) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({2, 3}));
  EXPECT_EQ(b.sum_to(x, {2, 3}).v, x);  // no node
  EXPECT_EQ(g.num_nodes(), 0u);
  Var s = b.sum_to(x, {});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_TRUE(tensors_close(eval(g, {s}, {iota(DType::F32, {2, 3})}), make(DType::F32, {}, {21})));
  // A size-1 dim that stays size 1 is not summed: [2,1] -> [1,1] sums dim 0 only.
  Graph h;
  Builder bh(h);
  Value y = h.add_input("y", F({2, 1}));
  Var t = bh.sum_to(y, {1, 1});
  EXPECT_EQ(print_node(*h.nodes()[0]), "%sum = sum(%y, dim=[0], keepdim=true) : f32[1,1]");
  EXPECT_EQ(t.shape(), (Shape{1, 1}));
}

TEST(Builder, SumToRejectsShapesItCannotReach) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({3}));
  EXPECT_TRUE(has(error_of([&] { b.sum_to(x, {4}); }), "cannot sum [3] down to [4]"));
  EXPECT_TRUE(has(error_of([&] { b.sum_to(x, {2, 3}); }), "more dims"));
}

TEST(Builder, UnreduceBroadcastsBackOverReducedDims) {
  Graph g;
  Builder b(g);
  Value s = g.add_input("s", F({2}));  // sum of an f32[2,3] over dim -1
  Var u = b.unreduce(s, {2, 3}, {-1}, /*keepdim=*/false);
  EXPECT_EQ(u.shape(), (Shape{2, 3}));
  EXPECT_TRUE(tensors_close(eval(g, {u}, {make(DType::F32, {2}, {5, 7})}), make(DType::F32, {2, 3}, {5, 5, 5, 7, 7, 7})));
  // Every dim (empty list), from a 0-d value.
  Graph h;
  Builder bh(h);
  Value t = h.add_input("t", F({}));
  Var all = bh.unreduce(t, {2, 2}, {}, false);
  EXPECT_TRUE(tensors_close(eval(h, {all}, {make(DType::F32, {}, {3})}), make(DType::F32, {2, 2}, {3, 3, 3, 3})));
  // keepdim: only an expand.
  Graph k;
  Builder bk(k);
  Value kv = k.add_input("k", F({1, 3}));
  Var ku = bk.unreduce(kv, {4, 3}, {0}, true);
  ASSERT_EQ(k.num_nodes(), 1u);
  EXPECT_EQ(k.nodes()[0]->op(), Op::Expand);
  EXPECT_EQ(ku.shape(), (Shape{4, 3}));
  // A 0-d input reduced over dim 0 gives a 0-d result: nothing to do.
  Graph z;
  Builder bz(z);
  Value zv = z.add_input("z", F({}));
  EXPECT_EQ(bz.unreduce(zv, {}, {0}, false).v, zv);
}

TEST(Builder, RestoreReducedDimsReshapesWithoutExpanding) {
  Graph g;
  Builder b(g);
  Value s = g.add_input("s", F({3}));  // reduced over dims 0 and 2 of [2,3,4]
  Var r = b.restore_reduced_dims(s, {2, 3, 4}, {0, -1}, false);
  EXPECT_EQ(r.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(b.restore_reduced_dims(r, {2, 3, 4}, {0, -1}, true).v, r.v);
}

TEST(Builder, Constants) {
  Graph g;
  Builder b(g);
  EXPECT_EQ(print_node(*b.scalar(2.5, DType::F16).v.node), "%full = full(size=[], fill_value=2.5, dtype=f16) : f16[]");
  EXPECT_EQ(print_node(*b.full({2}, 3, DType::I64).v.node), "%full_1 = full(size=[2], fill_value=3, dtype=i64) : i64[2]");
  Value x = g.add_input("x", T(DType::BF16, {2, 2}));
  Var z = b.zeros_like(x), o = b.ones_like(x);
  EXPECT_EQ(z.meta(), T(DType::BF16, {2, 2}));
  EXPECT_EQ(o.meta(), T(DType::BF16, {2, 2}));
  Var a = b.arange(4);
  EXPECT_EQ(a.meta(), I({4}));
  g.set_outputs({z, o, a});
  auto outs = interpret(g, std::vector<HostTensor>{make(DType::BF16, {2, 2}, {1, 2, 3, 4})});
  EXPECT_EQ(vals(outs[0]), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(vals(outs[1]), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(vals(outs[2]), (std::vector<double>{0, 1, 2, 3}));
}

TEST(Builder, OperatorsWithNumbersKeepTheVarsDtype) {
  Graph g;
  Builder b(g);
  Var x = b.wrap(g.add_input("x", T(DType::F16, {3})));
  Var y = b.wrap(g.add_input("y", T(DType::F16, {3})));
  Var e = (2.0 * x + 1.0) / y - x * y + (-x) / 4.0 - (1.0 - y) + 6.0 / y;
  EXPECT_EQ(e.dtype(), DType::F16);  // a number never promotes
  HostTensor xv = make(DType::F16, {3}, {1, 2, -1}), yv = make(DType::F16, {3}, {2, 4, 0.5});
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    double xi = vals(xv)[i], yi = vals(yv)[i];
    expected.push_back((2 * xi + 1) / yi - xi * yi + (-xi) / 4 - (1 - yi) + 6 / yi);
  }
  EXPECT_TRUE(tensors_close(eval(g, {e}, {xv, yv}), make(DType::F16, {3}, expected), 2e-2, 1e-2));
}

TEST(Builder, NoNodeForNoOpCastsAndViews) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({2, 3}));
  EXPECT_EQ(b.to(x, DType::F32).v, x);
  EXPECT_EQ(b.reshape(x, {2, 3}).v, x);
  EXPECT_EQ(b.expand(x, {2, 3}).v, x);
  EXPECT_EQ(g.num_nodes(), 0u);
  EXPECT_EQ(b.to(x, DType::F64).dtype(), DType::F64);
  EXPECT_EQ(g.num_nodes(), 1u);
}

TEST(Builder, NamePrefixAndInsertionPoint) {
  Graph g;
  Value x = g.add_input("x", F({2}));
  Value last = g.add(Op::Exp, {x}, {}, "last");
  g.set_outputs({last});
  Builder b(g, last.node);  // insert before %last
  b.set_name_prefix("grad_");
  Var n = b.neg(x);
  Var m = b.mul(n, x);
  EXPECT_EQ(n.v.name(), "grad_neg");
  EXPECT_EQ(m.v.name(), "grad_mul");
  EXPECT_EQ(b.op(Op::Sin, {x}, {}, "explicit").v.name(), "explicit");
  auto nodes = g.nodes();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes.back(), last.node);
}

TEST(Builder, BadCombinationsAreErrorsNamingTheOp) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({3}));
  Value y = g.add_input("y", F({4}));
  std::string err = error_of([&] { b.add(x, y); });
  EXPECT_TRUE(has(err, "add")) << err;
  EXPECT_TRUE(has(err, "[3]")) << err;
}

TEST(Builder, OpsWithAttributes) {
  Graph g;
  Builder b(g);
  Value x = g.add_input("x", F({2, 3}));
  Value i = g.add_input("i", I({3}));
  Value m = g.add_input("m", T(DType::Bool, {3}));
  EXPECT_EQ(print_node(*b.clamp(x, -1.0, std::nullopt).v.node), "%clamp = clamp(%x, min=-1.0) : f32[2,3]");
  // Whole-number bounds stay ints on an integer tensor (an int result), floats otherwise.
  EXPECT_EQ(print_node(*b.clamp(i, 0, 5).v.node), "%clamp_1 = clamp(%i, min=0, max=5) : i64[3]");
  EXPECT_EQ(print_node(*b.clamp(i, 0.5, std::nullopt).v.node), "%clamp_2 = clamp(%i, min=0.5) : f32[3]");
  EXPECT_EQ(print_node(*b.masked_fill(x, m, 0).v.node), "%masked_fill = masked_fill(%x, %m, value=0.0) : f32[2,3]");
  EXPECT_EQ(print_node(*b.var(x, {-1}, 0, true).v.node), "%var = var(%x, dim=[-1], correction=0.0, keepdim=true) : f32[2,1]");
  EXPECT_EQ(print_node(*b.prod(x, 1).v.node), "%prod = prod(%x, dim=1) : f32[2]");
  EXPECT_EQ(print_node(*b.argmax(x).v.node), "%argmax = argmax(%x) : i64[]");
  EXPECT_EQ(print_node(*b.gelu(x, "tanh").v.node), "%gelu = gelu(%x, approximate=\"tanh\") : f32[2,3]");
}

}  // namespace
}  // namespace kiln
