// Gradchecks (float64, every element) of the derivative rules of composite ops, and direct
// checks where a finite difference cannot see the rule (embedding's padding_idx, dtypes).
#include <gtest/gtest.h>

#include "ir/reference/interpreter.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

using namespace kiln;
using namespace kiln::autograd;
using kiln::testing::gradcheck_graph;
using kiln::testing::gradcheck_values;
using kiln::testing::tensors_close;

namespace {

HostTensor rnd(const Shape& s, uint64_t seed) { return random_tensor(TensorMeta(DType::F64, s), seed); }
HostTensor idx(const Shape& s, std::vector<int64_t> v) { return kiln::testing::ints(DType::I64, s, std::move(v)); }

Attrs loss_attrs(const std::string& reduction, int64_t ignore_index = -100, double smoothing = 0.0) {
  Attrs a{{"reduction", reduction}, {"ignore_index", ignore_index}};
  if (smoothing > 0) a.set("label_smoothing", smoothing);
  return a;
}

const char* const kReductions[] = {"mean", "sum", "none"};

}  // namespace

TEST(CompositeRules, Softmax) {
  EXPECT_TRUE(gradcheck_values(Op::Softmax, {rnd({3, 5}, 1)}, {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Softmax, {rnd({3, 5}, 2)}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::Softmax, {rnd({2, 7, 3}, 3)}, {{"dim", int64_t{1}}}));
  EXPECT_TRUE(gradcheck_values(Op::Softmax, {rnd({1}, 4)}, {{"dim", int64_t{0}}}));
  EXPECT_TRUE(gradcheck_values(Op::Softmax, {rnd({2, 3}, 5)}, {{"dim", int64_t{-1}}, {"dtype", DType::F64}}));
}

TEST(CompositeRules, LogSoftmax) {
  EXPECT_TRUE(gradcheck_values(Op::LogSoftmax, {rnd({3, 5}, 1)}, {{"dim", int64_t{-1}}}));
  EXPECT_TRUE(gradcheck_values(Op::LogSoftmax, {rnd({4, 2, 3}, 2)}, {{"dim", int64_t{-3}}}));
  EXPECT_TRUE(gradcheck_values(Op::LogSoftmax, {rnd({33}, 3)}, {{"dim", int64_t{0}}}));
}

TEST(CompositeRules, SoftmaxWithDtypeGivesTheInputsDtypeBack) {
  // softmax(f32, dtype=f64): y and the backward arithmetic are f64, the gradient is f32.
  Graph g("softmax_dtype");
  Value x = g.add_input("x", TensorMeta(DType::F32, {2, 4}));
  g.set_outputs({g.add(Op::Softmax, {x}, {{"dim", int64_t{-1}}, {"dtype", DType::F64}})});
  JointGraph j = build_joint(g);
  ASSERT_EQ(j.graph.outputs().size(), 2u);
  EXPECT_EQ(j.graph.outputs()[1].meta().str(), "f32[2,4]");
  HostTensor xv = random_tensor(TensorMeta(DType::F32, {2, 4}), 1);
  HostTensor t = random_tensor(TensorMeta(DType::F64, {2, 4}), 2);
  auto out = interpret(j.graph, std::vector<HostTensor>{xv, t});
  // The same gradient computed in f64 throughout, rounded to f32.
  Graph g64 = to_float64(g);
  JointGraph j64 = build_joint(g64);
  auto out64 = interpret(j64.graph, std::vector<HostTensor>{xv.to(DType::F64), t});
  EXPECT_TRUE(tensors_close(out[1], out64[1].to(DType::F32), 1e-7, 1e-6));
}

TEST(CompositeRules, LayerNormOverOneAndTwoTrailingDims) {
  Attrs one{{"normalized_shape", IntList{5}}};
  Attrs two{{"normalized_shape", IntList{3, 4}}, {"eps", 1e-3}};
  EXPECT_TRUE(gradcheck_values(Op::LayerNorm, {rnd({4, 5}, 1), rnd({5}, 2), rnd({5}, 3)}, one));
  EXPECT_TRUE(gradcheck_values(Op::LayerNorm, {rnd({2, 3, 4}, 4), rnd({3, 4}, 5), rnd({3, 4}, 6)}, two));
  EXPECT_TRUE(gradcheck_values(Op::LayerNorm, {rnd({2, 3, 4}, 7)}, two));               // no weight, no bias
  EXPECT_TRUE(gradcheck_values(Op::LayerNorm, {rnd({2, 3, 4}, 8), rnd({3, 4}, 9)}, two));  // weight only
  EXPECT_TRUE(gradcheck_values(Op::LayerNorm, {rnd({7}, 10), rnd({7}, 11), rnd({7}, 12)},
                          {{"normalized_shape", IntList{7}}}));  // one row, no batch dims
}

TEST(CompositeRules, EmbeddingWithRepeatedIndices) {
  EXPECT_TRUE(gradcheck_values(Op::Embedding, {rnd({5, 3}, 1), idx({2, 3}, {1, 4, 1, 0, 1, 4})}));
  EXPECT_TRUE(gradcheck_values(Op::Embedding, {rnd({5, 3}, 2), idx({}, {2})}));  // 0-d index
  EXPECT_TRUE(gradcheck_values(Op::Embedding, {rnd({7, 1}, 3), idx({4}, {6, 6, 6, 6})}));
  // A padding_idx that no index hits changes nothing.
  EXPECT_TRUE(gradcheck_values(Op::Embedding, {rnd({5, 3}, 4), idx({3}, {0, 1, 1})}, {{"padding_idx", int64_t{3}}}));
}

TEST(CompositeRules, EmbeddingPaddingRowsGetNoGradient) {
  // A finite difference sees the padding row's use, so this compares with the gradient built
  // by hand: each tangent row added into its index's row, except at padding_idx.
  const int64_t V = 5, D = 3, pad = 1;
  std::vector<int64_t> ids{1, 4, 1, 0, 4, 2};
  HostTensor w = rnd({V, D}, 1), ix = idx({2, 3}, ids), t = rnd({2, 3, D}, 2);
  Graph g = kiln::testing::one_op_graph(Op::Embedding, {w.meta(), ix.meta()}, {{"padding_idx", pad}});
  std::vector<HostTensor> grads = kiln::testing::joint_gradients(g, {w, ix}, {t});
  std::vector<double> expected(V * D, 0.0), tv = kiln::testing::vals(t);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != pad)
      for (int64_t c = 0; c < D; ++c) expected[static_cast<size_t>(ids[i] * D + c)] += tv[i * D + static_cast<size_t>(c)];
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_TRUE(tensors_close(grads[0], kiln::testing::make(DType::F64, {V, D}, expected), 1e-12, 0));
}

TEST(CompositeRules, CrossEntropyEveryReduction) {
  for (const char* r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {rnd({4, 5}, 1), idx({4}, {0, 4, 2, 2})}, loss_attrs(r)));
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {rnd({1, 33}, 2), idx({1}, {32})}, loss_attrs(r)));
  }
}

TEST(CompositeRules, CrossEntropyIgnoredRowsAndLabelSmoothing) {
  for (const char* r : kReductions) {
    SCOPED_TRACE(r);
    HostTensor x = rnd({5, 4}, 3);
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {x, idx({5}, {1, -100, 3, -100, 0})}, loss_attrs(r)));
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {x, idx({5}, {1, 2, 3, 2, 0})}, loss_attrs(r, 2)));
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {x, idx({5}, {1, 2, 3, 0, 0})}, loss_attrs(r, -100, 0.1)));
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {x, idx({5}, {1, -1, 3, -1, 0})}, loss_attrs(r, -1, 0.3)));
  }
}

TEST(CompositeRules, CrossEntropyOfOneRowWithA0dTarget) {
  for (const char* r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {rnd({7}, 1), idx({}, {3})}, loss_attrs(r)));
    EXPECT_TRUE(gradcheck_values(Op::CrossEntropy, {rnd({7}, 2), idx({}, {6})}, loss_attrs(r, -100, 0.2)));
  }
}

TEST(CompositeRules, NllLoss) {
  for (const char* r : kReductions) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(gradcheck_values(Op::NllLoss, {rnd({4, 5}, 1), idx({4}, {0, 4, 2, 2})}, loss_attrs(r)));
    EXPECT_TRUE(gradcheck_values(Op::NllLoss, {rnd({4, 5}, 2), idx({4}, {0, 7, 7, 2})}, loss_attrs(r, 7)));
    EXPECT_TRUE(gradcheck_values(Op::NllLoss, {rnd({6}, 3), idx({}, {5})}, loss_attrs(r)));
  }
}

TEST(CompositeRules, DropoutIsLinearWithAFixedMask) {
  for (double p : {0.0, 0.3, 1.0}) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(gradcheck_values(Op::Dropout, {rnd({4, 7}, 1)}, {{"p", p}, {"train", true}, {"seed", int64_t{11}}}));
  }
  EXPECT_TRUE(gradcheck_values(Op::Dropout, {rnd({3, 3}, 2)}, {{"p", 0.5}, {"train", false}}));
}

TEST(CompositeRules, DropoutOfATransposedInputKeepsTheMaskOrder) {
  Graph g("dropout_t");
  Value x = g.add_input("x", TensorMeta(DType::F64, {3, 5}));
  Value t = g.add(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  g.set_outputs({g.add(Op::Dropout, {t}, {{"p", 0.4}, {"seed", int64_t{3}}})});
  EXPECT_TRUE(gradcheck_graph(g, {rnd({3, 5}, 1)}));
}

TEST(CompositeRules, TrilAndTriu) {
  for (int64_t d : {-1, 0, 2}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(gradcheck_values(Op::Tril, {rnd({2, 3, 4}, 1)}, {{"diagonal", d}}));
    EXPECT_TRUE(gradcheck_values(Op::Triu, {rnd({4, 3}, 2)}, {{"diagonal", d}}));
  }
}

TEST(CompositeRules, TrilFromSizeHasNoGradient) {
  // x * tril(size=[3,3]): the mask is a constant; only x gets a gradient.
  Graph g("mask");
  Value x = g.add_input("x", TensorMeta(DType::F64, {3, 3}));
  Value m = g.add(Op::Tril, {}, {{"size", IntList{3, 3}}, {"dtype", DType::F64}});
  g.set_outputs({g.add(Op::Mul, {x, m})});
  JointGraph j = build_joint(g);
  EXPECT_EQ(j.wrt, std::vector<std::string>{"x"});
}

TEST(CompositeRules, LayerNormBiasAloneNeedsNoStatistics) {
  Graph g = kiln::testing::one_op_graph(Op::LayerNorm, {kiln::testing::F64({2, 3}), kiln::testing::F64({3}),
                                                        kiln::testing::F64({3})},
                                        {{"normalized_shape", IntList{3}}});
  JointGraph j = build_joint(g, {{"x2"}});
  for (Node* n : j.graph.nodes()) EXPECT_NE(n->op(), Op::Rsqrt) << "mean and rstd are recomputed only for x and weight";
  EXPECT_TRUE(gradcheck_graph(g, {rnd({2, 3}, 1), rnd({3}, 2), rnd({3}, 3)}, GradcheckOptions{.wrt = {"x2"}}));
}
