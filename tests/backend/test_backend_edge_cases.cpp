// Edge cases of issue 12 not covered by test_backend_shapes.cpp / test_backend_ops.cpp, on
// every test device against the reference interpreter: graph inputs that are views at an
// element offset (contiguous ones reach the CPU kernels as unaligned pointers), with zero or
// odd strides; size-1 dims under every reduction and composite, with NaN and infinities;
// empty tensors through layer_norm, the class losses, var, argmax and their gradients; and
// strided views holding NaN inside differentiated graphs.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/parser.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendEdgeCases : public DeviceTest {};
KILN_DEVICE_TESTS(BackendEdgeCases);

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

// The joint graph of `g` compiled and compared with the reference on `primals` and random
// tangents.
void expect_joint_matches(const Graph& g, std::vector<HostTensor> primals, double slack = 1, uint64_t seed = 1) {
  autograd::JointGraph j = autograd::build_joint(g);
  ASSERT_GT(j.graph.outputs().size(), static_cast<size_t>(j.num_forward_outputs)) << "no gradients";
  for (size_t i = primals.size(); i < j.graph.inputs().size(); ++i)
    primals.push_back(random_tensor(j.graph.inputs()[i]->meta(), seed + 101 * i));
  expect_matches_reference(j.graph, primals, slack);
}

// ---- views at an offset

// `meta` viewed at element `offset` of a fresh random storage big enough for it.
HostTensor view_at(const TensorMeta& meta, int64_t offset, uint64_t seed) {
  int64_t extent = 1;
  for (int64_t d = 0; d < meta.rank(); ++d)
    if (meta.shape[d] > 0) extent += (meta.shape[d] - 1) * meta.strides[d];
  HostTensor base = random_tensor(TensorMeta(meta.dtype, {offset + extent}), seed);
  return base.view(meta, offset);
}

TEST_P(BackendEdgeCases, ContiguousViewsAtAnOffsetAsGraphInputs) {
  KILN_REQUIRE_JIT();
  // Contiguous inputs go to the CPU kernels as they are: a view one f32 (4 bytes), three f32,
  // one f16 and one f64 past its storage's 64-byte-aligned start is an unaligned pointer into
  // loops that the compiler vectorizes. 1025 columns leave a vector tail.
  Graph g("offset_views");
  Builder b(g);
  Var x = input(b, "x", F({7, 1025}));
  Var y = input(b, "y", F({7, 1025}));
  Var h = input(b, "h", T(DType::F16, {3, 1025}));
  Var d = input(b, "d", T(DType::F64, {1025}));
  Var w = input(b, "w", F({1025}));
  g.set_outputs({b.exp(x) * y + b.sigmoid(x), b.sum(x, {1}), b.amax(y, {1}), b.argmax(x, 1),
                 b.op(Op::Softmax, {y}, {{"dim", int64_t{-1}}}), b.op(Op::LayerNorm, {x, w}, {{"normalized_shape", IntList{1025}}}),
                 b.mul(h, h), b.sum(h, {1}), b.exp(d), b.sum(d), b.add(x, b.to(d, DType::F32))});
  std::vector<HostTensor> in = {view_at(F({7, 1025}), 1, 1), view_at(F({7, 1025}), 3, 2),
                                view_at(T(DType::F16, {3, 1025}), 1, 3), view_at(T(DType::F64, {1025}), 1, 4),
                                view_at(F({1025}), 5, 5)};
  for (const HostTensor& t : in) ASSERT_TRUE(t.is_contiguous() && t.offset() > 0);
  expect_matches_reference(g, in, 4);
}

TEST_P(BackendEdgeCases, StridedExpandedAndOffsetViewsAsGraphInputs) {
  KILN_REQUIRE_JIT();
  // Graph inputs declared contiguous, given as: a column slice at an offset (rows of 40), an
  // expanded row (stride 0), every third element from offset 2, a [33,1] column whose size-1
  // dim has an odd stride; and an input declared strided, given at an offset.
  Graph g("strided_views");
  Builder b(g);
  Var a = input(b, "a", F({7, 33}));
  Var e = input(b, "e", F({7, 33}));
  Var s = input(b, "s", F({33}));
  Var c = input(b, "c", F({33, 1}));
  Var t = input(b, "t", TensorMeta(DType::F32, {7, 33}, {40, 1}));
  g.set_outputs({a * e + s, b.amax(a, {0}), b.sum(e, {1}), b.argmax(c, 0), b.op(Op::Softmax, {t}, {{"dim", int64_t{0}}}),
                 b.sum(t, {1}), c * s});
  std::vector<HostTensor> in = {view_at(TensorMeta(DType::F32, {7, 33}, {40, 1}), 5, 1),
                                view_at(TensorMeta(DType::F32, {7, 33}, {0, 1}), 2, 2),
                                view_at(TensorMeta(DType::F32, {33}, {3}), 2, 3),
                                view_at(TensorMeta(DType::F32, {33, 1}, {1, 77}), 1, 4),
                                view_at(TensorMeta(DType::F32, {7, 33}, {40, 1}), 6, 5)};
  expect_matches_reference(g, in, 2);
  // The same views as the inputs of a joint graph.
  expect_joint_matches(g, in, 4);
}

// ---- size-1 dims

TEST_P(BackendEdgeCases, SizeOneDimsUnderEveryReductionAndComposite) {
  KILN_REQUIRE_JIT();
  Graph g("size_one");
  Builder b(g);
  Var one = input(b, "one", F({1, 1, 1}));
  Var y = input(b, "y", F({3, 1, 5}));
  Var v = input(b, "v", F({4, 1}));
  Var w = input(b, "w", F({1}));
  Var t = input(b, "t", I({4}));
  Attrs d1{{"dim", int64_t{1}}};
  g.set_outputs({b.sum(one), b.amax(one, {1}, true), b.argmax(one), b.mean(one, {0, 2}), b.var(one, {1}, 0),
                 b.sum(y, {1}), b.amax(y, {1}, true), b.argmax(y, 1), b.amin(y, {0, 1}), b.prod(y, 1),
                 b.op(Op::Softmax, {y}, d1), b.op(Op::LogSoftmax, {y}, d1), b.op(Op::Softmax, {v}, d1),
                 b.op(Op::LogSoftmax, {v}, d1), b.op(Op::LayerNorm, {v, w, w}, {{"normalized_shape", IntList{1}}}),
                 b.argmax(v, 1), b.amax(v, {1}), b.add(y, b.reshape(v, {1, 4, 1})),
                 b.op(Op::CrossEntropy, {v, t}, {{"reduction", std::string("none")}}), b.sum(b.permute(y, {2, 0, 1}), {2})});
  // Targets in [0, 1): class 0 of the one class.
  std::vector<HostTensor> in = inputs_for(g, 3, 1);
  // A size-1 softmax is 1, or NaN for -inf, +inf and NaN (x - max is NaN); a layer_norm over
  // one element is its bias, or NaN for those three.
  in[2] = make(DType::F32, {4, 1}, {-kInf, kInf, kNan, 2});
  expect_matches_reference(g, in);
}

TEST_P(BackendEdgeCases, SizeOneAndOddDimsUnderDifferentiation) {
  KILN_REQUIRE_JIT();
  Graph g("size_one_grads");
  Builder b(g);
  Var y = input(b, "y", F({3, 1, 5}));
  Var z = input(b, "z", F({1, 7, 1}));
  Var odd = input(b, "odd", F({3, 5, 7}));
  Var v = input(b, "v", F({4, 1}));
  Var w = input(b, "w", F({1}));
  Var bc = b.add(y, z);  // [3,7,5]
  g.set_outputs({b.sum(b.op(Op::Softmax, {bc}, {{"dim", int64_t{0}}}) * bc), b.amax(bc, {1}),
                 b.op(Op::LayerNorm, {v, w, w}, {{"normalized_shape", IntList{1}}}), b.var(b.permute(odd, {2, 0, 1}), {1, 2}),
                 b.sum(b.op(Op::LogSoftmax, {b.transpose(odd, 0, 2)}, {{"dim", int64_t{1}}}), {0})});
  expect_joint_matches(g, inputs_for(g, 5), 4);
}

// ---- empty tensors

TEST_P(BackendEdgeCases, EmptyTensorsThroughCompositesAndClassLosses) {
  KILN_REQUIRE_JIT();
  Graph g("empty_composites");
  Builder b(g);
  Var x = input(b, "x", F({0, 4}));
  Var w = input(b, "w", F({4}));
  Var logits = input(b, "logits", F({0, 3}));
  Var target = input(b, "target", I({0}));
  Var z = input(b, "z", F({0, 5}));
  Attrs ln{{"normalized_shape", IntList{4}}};
  auto ce = [&](const char* reduction) {
    return b.op(Op::CrossEntropy, {logits, target}, {{"reduction", std::string(reduction)}});
  };
  // Over no rows: cross_entropy "mean" is 0/0 = NaN, "sum" 0, "none" empty; mean, var over
  // the empty dim are NaN per column; prod is 1; argmax over the non-empty dim is empty.
  g.set_outputs({b.op(Op::LayerNorm, {x, w, w}, ln), ce("mean"), ce("sum"), ce("none"),
                 b.op(Op::NllLoss, {b.op(Op::LogSoftmax, {logits}, {{"dim", int64_t{1}}}), target}), b.mean(z, {0}),
                 b.var(z, {0}), b.prod(z, 0), b.argmax(z, 1), b.amin(z, {1}, true), b.sum(b.transpose(z, 0, 1), {1})});
  expect_matches_reference(g);
}

TEST_P(BackendEdgeCases, GradientsOfEmptyTensors) {
  KILN_REQUIRE_JIT();
  // The gradients of empty inputs are empty; of a weight that only meets empty tensors, zeros
  // (a sum over no rows); of mean over nothing, what g / 0 broadcast to nothing is: empty.
  Graph g("empty_grads");
  Builder b(g);
  Var x = input(b, "x", F({0, 4}));
  Var w = input(b, "w", F({4}));
  Var s = input(b, "s", F({0, 7}));
  Var logits = input(b, "logits", F({0, 3}));
  Var target = input(b, "target", I({0}));
  Var e = input(b, "e", F({0}));
  g.set_outputs({b.sum(b.op(Op::LayerNorm, {x, w, w}, {{"normalized_shape", IntList{4}}})),
                 b.sum(b.op(Op::Softmax, {s}, {{"dim", int64_t{1}}}) * s), b.op(Op::CrossEntropy, {logits, target}),
                 b.op(Op::CrossEntropy, {logits, target}, {{"reduction", std::string("sum")}}), b.mean(e), b.sum(x * w)});
  expect_joint_matches(g, inputs_for(g, 7));
}

// ---- strided views holding NaN and infinities, differentiated

TEST_P(BackendEdgeCases, StridedViewsWithNaNAndInfinityInsideJointGraphs) {
  KILN_REQUIRE_JIT();
  // v = x^T[1:39:2] is a [19,6] view with strides (2, 40): v[k][j] = x[j][1 + 2k]. A NaN, an
  // +inf and a -inf land in rows 2, 5 and 9 of v, a tie of 5s in row 3: amax splits the
  // gradient over the tie and makes row 2's NaN; softmax and layer_norm carry NaN through
  // their rows; relu of the every-third-column view, expanded, passes the gradient at a NaN.
  // y's two +inf share a full amax's gradient through a reshape and a permute.
  Graph g("strided_nan");
  Builder b(g);
  Var x = input(b, "x", F({6, 40}));
  Var y = input(b, "y", F({6, 40}));
  Var v = b.slice(b.transpose(x, 0, 1), 0, 1, 39, 2);
  Attrs last{{"dim", int64_t{-1}}};
  g.set_outputs({b.amax(v, {1}), b.sum(b.op(Op::Softmax, {v}, last) * v), b.op(Op::LayerNorm, {v}, {{"normalized_shape", IntList{6}}}),
                 b.relu(b.expand(b.unsqueeze(b.slice(x, 1, 0, 40, 3), 0), {2, 6, 14})),
                 b.amax(b.permute(b.reshape(y, {6, 4, 10}), {2, 0, 1}))});
  HostTensor xs = random_tensor(F({6, 40}), 9), ys = random_tensor(F({6, 40}), 10);
  xs.set(0 * 40 + 5, kNan);                     // v[2][0]
  xs.set(3 * 40 + 11, kInf);                    // v[5][3]
  xs.set(4 * 40 + 19, -kInf);                   // v[9][4]
  xs.set(2 * 40 + 7, 5), xs.set(4 * 40 + 7, 5);  // v[3][2] and v[3][4]
  xs.set(1 * 40 + 9, kNan);                     // v[4][1], and column 3 of x[:, ::3] (relu)
  ys.set(17, kInf), ys.set(230, kInf);
  expect_matches_reference(g, {xs, ys});
  expect_joint_matches(g, {xs, ys}, 2);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

TEST_P(BackendEdgeCases, ValuesNamedLikeCppKeywords) {
  KILN_REQUIRE_JIT();
  // Graphs imported from ONNX keep the model's tensor names (`not`, `and`, `int`...); a
  // generated kernel names its lets after values, so those must not become C++/CUDA keywords.
  Graph g = parse_graph(R"(
graph keywords(%x: bool[3,5], %y: bool[3,5], %float: f32[3,5]) {
  %not = logical_not(%x) : bool[3,5]
  %and = logical_and(%not, %y) : bool[3,5]
  %xor = ne(%and, %x) : bool[3,5]
  %int = to(%xor, dtype=i32) : i32[3,5]
  %return = mul(%float, %float) : f32[3,5]
  %double = where(%xor, %return, %float) : f32[3,5]
  %sum = sum(%double, dim=[1]) : f32[3]
  return (%int, %sum)
})");
  expect_matches_reference(g, 3);
}

}  // namespace
}  // namespace kiln::testing
