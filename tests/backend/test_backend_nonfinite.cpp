// NaN and infinities through compiled kernels, on every test device, against the reference
// interpreter (issue 12's edge cases): max/min/argmax reductions, softmax, log_softmax,
// layer_norm and cross_entropy over rows that hold NaN, +inf, -inf, nothing but -inf, ties;
// argmax ties that parallel reductions must still resolve to the first index; and the joint
// graphs of tests/support/nonfinite_grads.cpp (every derivative rule fed NaN and +-inf).
// tensors_close puts NaN and infinities at the same positions, so a kernel that drops a NaN,
// or turns one into an infinity, fails here.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "tests/backend/backend_check.h"
#include "tests/support/nonfinite_grads.h"

namespace kiln::testing {
namespace {

class BackendNonfinite : public DeviceTest {};
KILN_DEVICE_TESTS(BackendNonfinite);

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

// Rows of `len` values in (-1, 1), then the special ones; each comment says what the row
// tests. Positions are spread so that on the GPU they fall to different threads and warps.
HostTensor special_rows(int64_t len, uint64_t seed) {
  const int64_t rows = 14, mid = len / 2, last = len - 1;
  HostTensor x = random_tensor(F({rows, len}), seed);
  auto set = [&](int64_t r, int64_t c, double v) { x.set(r * len + c, v); };
  auto fill = [&](int64_t r, double v) {
    for (int64_t c = 0; c < len; ++c) set(r, c, v);
  };
  // row 0: finite only
  set(1, last, kNan);  // a NaN in the last place
  set(2, 0, kNan);     // a NaN in the first place
  set(3, mid, kInf);   // one +inf: softmax is NaN (inf - inf), amax and argmax find it
  set(4, mid, -kInf);  // one -inf among finite values: softmax 0 there
  fill(5, -kInf);      // nothing but -inf: softmax NaN (PyTorch), argmax 0
  fill(6, kNan);       // nothing but NaN
  set(7, mid / 2, kInf), set(7, last, kNan);  // an +inf before a NaN: the NaN wins amax and argmax
  set(8, last, kInf), set(8, mid, kInf);      // two +inf: argmax takes the first
  set(9, 2 * len / 3, 5), set(9, len / 3, 5);  // a finite maximum twice
  fill(10, -kInf), set(10, last, kNan);       // -inf everywhere but a NaN
  fill(11, kInf);                             // nothing but +inf
  fill(12, 0.25);                             // all equal: argmax 0, layer_norm 0
  set(13, 0, -kInf), set(13, last, kInf);     // both infinities
  return x;
}

// One graph over [14, len] rows (dim 1) and the same values stored transposed, [len, 14],
// reduced over dim 0 (the column kernels), plus reductions over every element.
void check_special_rows(int64_t len, uint64_t seed, DType dt = DType::F32) {
  SCOPED_TRACE(fmt::format("{} rows of {}", dtype_name(dt), len));
  Graph g(fmt::format("special_rows_{}", len));
  Builder b(g);
  Var x = input(b, "x", T(dt, {14, len}));
  Var xt = input(b, "xt", T(dt, {len, 14}));
  Var w = input(b, "w", T(dt, {len}));
  Var bias = input(b, "bias", T(dt, {len}));
  Var target = input(b, "target", I({14}));
  Attrs last{{"dim", int64_t{-1}}}, first{{"dim", int64_t{0}}};
  g.set_outputs({b.amax(x, {1}), b.amin(x, {1}, true), b.argmax(x, 1), b.sum(x, {1}), b.op(Op::Softmax, {x}, last),
                 b.op(Op::LogSoftmax, {x}, last), b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{len}}}),
                 b.op(Op::CrossEntropy, {x, target}, {{"reduction", std::string("none")}}), b.amax(xt, {0}), b.amin(xt, {0}),
                 b.argmax(xt, 0), b.op(Op::Softmax, {xt}, first), b.op(Op::LogSoftmax, {xt}, first), b.amax(x), b.argmax(x)});
  HostTensor rows = special_rows(len, seed);
  HostTensor cols = HostTensor::empty(F({len, 14}));
  for (int64_t r = 0; r < 14; ++r)
    for (int64_t c = 0; c < len; ++c) cols.set(c * 14 + r, rows.get(r * len + c));
  std::vector<HostTensor> in = inputs_for(g, seed, len);
  in[0] = rows.to(dt);
  in[1] = cols.to(dt);
  expect_matches_reference(g, in, std::max(1.0, std::sqrt(static_cast<double>(len)) / 10));
}

// The CUDA schedule takes a thread per row up to 16 elements, a warp up to 1024, a block
// beyond (codegen/schedule.cpp); the CPU vectorizes long rows and keeps a NaN flag beside its
// integer max keys. Lengths on each side.
TEST_P(BackendNonfinite, MaxArgmaxSoftmaxLayerNormOverRowsWithNaNAndInfinity) {
  KILN_REQUIRE_JIT();
  uint64_t seed = 1;
  for (int64_t len : {5, 16, 33, 1024, 1025, 4097}) check_special_rows(len, seed++);
  // f16 and bf16 compute in f32: the conversions must keep NaN and the infinities.
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t len : {33, 1025}) check_special_rows(len, seed++, dt);
}

// The reference's answer checked by hand too: PyTorch's amax propagates NaN, argmax treats
// NaN as the maximum and returns the first index of the maximum, softmax of an all-(-inf)
// row is NaN everywhere, layer_norm of a row with an infinity is NaN.
TEST_P(BackendNonfinite, RowsWithNaNAndInfinityGivePyTorchsAnswers) {
  KILN_REQUIRE_JIT();
  const int64_t len = 1025;
  Graph g("pytorch_answers");
  Builder b(g);
  Var x = input(b, "x", F({14, len}));
  g.set_outputs({b.amax(x, {1}), b.argmax(x, 1), b.op(Op::Softmax, {x}, {{"dim", int64_t{1}}}),
                 b.op(Op::LayerNorm, {x}, {{"normalized_shape", IntList{len}}})});
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor rows = special_rows(len, 3);
  std::vector<HostTensor> out = cg.run(std::vector<HostTensor>{rows});
  const int64_t mid = len / 2, last = len - 1;
  // amax: NaN in rows 1, 2, 6, 7, 10; +inf in 3, 8, 11, 13; -inf in 5; 5 in row 9.
  for (int64_t r : {1, 2, 6, 7, 10}) EXPECT_TRUE(std::isnan(out[0].get(r))) << "amax row " << r;
  for (int64_t r : {3, 8, 11, 13}) EXPECT_EQ(out[0].get(r), kInf) << "amax row " << r;
  EXPECT_EQ(out[0].get(5), -kInf);
  EXPECT_EQ(out[0].get(9), 5);
  // argmax: the first NaN, else the first maximum.
  const std::vector<int64_t> want_argmax = {-1, last, 0, mid, -1, 0, 0, last, mid, len / 3, last, 0, 0, last};
  for (int64_t r = 1; r < 14; ++r) {
    if (want_argmax[r] < 0) continue;
    EXPECT_EQ(out[1].get_int(r), want_argmax[r]) << "argmax row " << r;
  }
  // softmax: NaN everywhere in rows with a NaN or +inf, and in the all -inf row; a -inf
  // element of a finite row gets exactly 0.
  for (int64_t r : {1, 2, 3, 5, 6, 7, 8, 10, 11, 13})
    for (int64_t c : {int64_t{0}, mid, last}) EXPECT_TRUE(std::isnan(out[2].get(r * len + c))) << "softmax row " << r;
  EXPECT_EQ(out[2].get(4 * len + mid), 0);
  EXPECT_FALSE(std::isnan(out[2].get(4 * len)));
  // layer_norm: NaN through any row holding a NaN or an infinity; a constant row is 0.
  for (int64_t r : {1, 3, 4, 5, 11, 13}) EXPECT_TRUE(std::isnan(out[3].get(r * len + 1))) << "layer_norm row " << r;
  EXPECT_EQ(out[3].get(12 * len + 7), 0);
}

// ---- argmax ties

// A row of `len` values in (-1, 1) with the maximum 2 (or NaN) at `at`.
HostTensor with_values_at(int64_t len, const std::vector<int64_t>& at, double v, uint64_t seed) {
  HostTensor x = random_tensor(F({len}), seed);
  for (int64_t i : at) x.set(i, v);
  return x;
}

// Ties placed so that index order and thread order disagree: on the GPU a block of 512
// threads strides over a row (thread t reads t, t + 512, ...), so index 515 is thread 3's
// second element and 700 is thread 188's first; a warp's lanes stride by 32. The tree that
// combines the partials must still return the smallest index, and a thread must keep its
// first tie.
TEST_P(BackendNonfinite, ArgmaxTiesPickTheFirstIndexInParallelReductions) {
  KILN_REQUIRE_JIT();
  struct Tie {
    int64_t len;
    std::vector<int64_t> at;
    double value;
  };
  const std::vector<Tie> ties = {
      {17, {16, 9}, 2},                    // a thread per row
      {1000, {999, 40, 33, 500}, 2},       // a warp: lanes 7, 8, 1, 20 -> 33
      {1025, {700, 515, 1024}, 2},         // a block: thread 188, thread 3 (2nd), thread 0 (3rd) -> 515
      {4097, {3, 515, 4096}, 2},           // thread 3 sees 3 then 515: keeps 3
      {4097, {4000, 2100, 2049}, kNan},    // NaN ties: the first NaN
      {100000, {99999, 70001, 64000}, 2},  // many stride iterations
      {100000, {5, 99999}, kInf},
  };
  for (const Tie& t : ties) {
    SCOPED_TRACE(fmt::format("a row of {} with {} at {} places", t.len, t.value, t.at.size()));
    Graph g(fmt::format("ties_{}", t.len));
    Builder b(g);
    Var x = input(b, "x", F({2, t.len}));
    Var y = input(b, "y", F({t.len, 3}));
    g.set_outputs({b.argmax(x, 1), b.argmax(x), b.argmax(y, 0), b.amax(x, {1})});
    HostTensor row = with_values_at(t.len, t.at, t.value, 7);
    HostTensor xs = HostTensor::empty(F({2, t.len})), ys = HostTensor::empty(F({t.len, 3}));
    for (int64_t i = 0; i < t.len; ++i) {
      xs.set(i, row.get(i));
      xs.set(t.len + i, row.get(t.len - 1 - i));  // reversed: the ties fall elsewhere
      for (int64_t c = 0; c < 3; ++c) ys.set(i * 3 + c, row.get(i));
    }
    int64_t first = *std::min_element(t.at.begin(), t.at.end());
    int64_t first_reversed = t.len - 1 - *std::max_element(t.at.begin(), t.at.end());
    expect_matches_reference(g, {xs, ys});
    backend::CompiledGraph cg = compile_for_test(g);
    KILN_REQUIRE_RUN();
    std::vector<HostTensor> out = cg.run(std::vector<HostTensor>{xs, ys});
    EXPECT_EQ(out[0].get_int(0), first);
    EXPECT_EQ(out[0].get_int(1), first_reversed);
    EXPECT_EQ(out[1].get_int(0), first);  // the flat index over both rows
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(out[2].get_int(c), first);
  }
}

// A full argmax of a million elements: one long reduction (argmax is never split into
// partials, codegen/lower_split.cpp), ties far apart.
TEST_P(BackendNonfinite, ArgmaxTiesOverAMillionElements) {
  KILN_REQUIRE_JIT();
  Graph g("argmax_million");
  Builder b(g);
  Var x = input(b, "x", F({1000000}));
  g.set_outputs({b.argmax(x), b.amax(x)});
  HostTensor v = with_values_at(1000000, {999999, 524288, 123457, 600000}, 3, 5);
  expect_matches_reference(g, {v});
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  EXPECT_EQ(cg.run(std::vector<HostTensor>{v})[0].get_int(0), 123457);
}

// Few rows, long reductions: the GPU splits them into partials and a combine
// (codegen/lower_split.cpp), which must keep a NaN and an infinity whichever chunk holds it.
TEST_P(BackendNonfinite, SplitReductionsKeepNaNAndInfinity) {
  KILN_REQUIRE_JIT();
  Graph g("split_nan");
  Builder b(g);
  Var x = input(b, "x", F({1, 1000000}));
  Var c = input(b, "c", F({65536, 4}));
  g.set_outputs({b.amax(x, {1}), b.amin(x, {1}), b.sum(x, {1}), b.amax(c, {0}), b.amin(c, {0}), b.sum(c, {0})});
  std::vector<HostTensor> in = inputs_for(g, 17);
  in[0].set(777777, kNan);
  // Column 0 finite; 1 a NaN late; 2 a +inf and a -inf (the sum is NaN); 3 a -inf only.
  in[1].set(60000 * 4 + 1, kNan);
  in[1].set(3 * 4 + 2, kInf), in[1].set(65000 * 4 + 2, -kInf);
  in[1].set(40000 * 4 + 3, -kInf);
  expect_matches_reference(g, in, 10);
}

// ---- the joint graphs of tests/support/nonfinite_grads.cpp

// Every case's one-op forward graph side by side in one graph (inputs named <case>_x<i>,
// results <case>_y), with its floating inputs and tangents in `dt`: one compile checks them all.
struct Merged {
  Graph graph{"nonfinite_grads"};
  std::vector<HostTensor> primals, tangents;
};

Merged merge_cases(const std::vector<NonfiniteGradCase>& cases, DType dt) {
  Merged m;
  std::vector<Value> outs;
  for (const NonfiniteGradCase& c : cases) {
    const Node* op = nullptr;
    for (const Node* n : c.graph.nodes())
      if (!n->is_input()) op = n;
    std::vector<Value> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      HostTensor v = is_floating(c.inputs[i].dtype()) ? c.inputs[i].to(dt) : c.inputs[i];
      ins.push_back(m.graph.add_input(fmt::format("{}_x{}", c.name, i), v.meta()));
      m.primals.push_back(v);
    }
    outs.push_back(m.graph.add_node(op->op(), ins, op->attrs(), c.name + "_y")->result(0));
    m.tangents.push_back(c.tangents[0].to(dt));
  }
  m.graph.set_outputs(outs);
  return m;
}

TEST_P(BackendNonfinite, JointGraphsOfEveryRuleAtNaNAndInfinityMatchTheReference) {
  KILN_REQUIRE_JIT();
  std::vector<NonfiniteGradCase> cases = nonfinite_grad_cases();
  for (DType dt : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    Merged m = merge_cases(cases, dt);
    autograd::JointGraph j = autograd::build_joint(m.graph);
    std::vector<HostTensor> in = m.primals;
    in.insert(in.end(), m.tangents.begin(), m.tangents.end());
    expect_matches_reference(j.graph, in);
    // Unfused too: each backward op its own kernel, so no fused expression hides a difference.
    backend::CpuCompileOptions unfused;
    unfused.fuse = false;
    expect_matches_reference(j.graph, in, 1, unfused);
  }
}

// A division by a row's sum runs as a multiplication by the sum's reciprocal, taken once a row
// (codegen/invariant_division.h). Rows whose sum is subnormal (its plain reciprocal would be
// infinite), past 2^126 (a subnormal reciprocal), zero, infinite or NaN still give the IEEE
// quotient within 2 ulp, with NaN and infinities where the reference has them.
TEST_P(BackendNonfinite, DivisionByARowSumAtTheEdgesOfTheFloatRange) {
  const int64_t len = 1000;
  Graph g("divide_by_row_sum");
  Builder b(g);
  Var x = input(b, "x", F({8, len}));
  g.set_outputs({b.div(x, b.sum(x, {1}, true))});
  HostTensor in = random_tensor(F({8, len}), 5);
  auto fill = [&](int64_t r, auto value) {
    for (int64_t c = 0; c < len; ++c) in.set(r * len + c, value(c));
  };
  fill(0, [](int64_t c) { return 1.0 + c % 7; });                      // ordinary
  fill(1, [](int64_t c) { return std::ldexp(1.0 + c % 5, -149 + 6); });  // subnormal values and sum
  fill(2, [](int64_t c) { return std::ldexp(1.0 + c % 3, -137); });      // normal values, subnormal-adjacent sum
  fill(3, [](int64_t c) { return std::ldexp(1.0 + c % 3, 116); });       // a sum past 2^126
  fill(4, [](int64_t) { return 0.0; });                                 // 0 / 0
  fill(5, [](int64_t c) { return c == 17 ? kInf : 1.0; });               // x / inf, inf / inf
  fill(6, [](int64_t c) { return c == 3 ? kNan : 1.0; });                // a NaN sum
  fill(7, [](int64_t c) { return c % 2 ? -3.0 : 1.0; });                 // a negative sum
  backend::CompiledGraph cg = compile_for_test(g);
  std::string why;
  if (!device_can_run(&why)) GTEST_SKIP() << why;
  std::vector<HostTensor> inputs{in};
  HostTensor want = interpret(g, inputs)[0], got = cg.run(inputs)[0];
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.get(i), v = got.get(i);
    SCOPED_TRACE(fmt::format("row {} column {}: got {} want {}", i / len, i % len, v, w));
    if (std::isnan(w)) EXPECT_TRUE(std::isnan(v));
    else if (std::isinf(w) || w == 0) EXPECT_EQ(v, w);
    else EXPECT_LE(std::abs(v - w), 2 * std::ldexp(std::abs(w), -23));
  }
}

}  // namespace
}  // namespace kiln::testing
