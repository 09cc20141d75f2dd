// Every primitive op compiled for the CPU and compared with the reference interpreter on
// random non-zero inputs: odd shapes, broadcasting, f32/f64/f16/bf16/i64/bool, strided graph
// inputs and views inside graphs.
#include <fmt/format.h>

#include "ir/builder.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendOps : public DeviceTest {};
KILN_DEVICE_TESTS(BackendOps);

// One node of `op` over inputs of the given types; nullopt when the shape rule rejects them.
std::optional<Graph> one_op(Op op, const std::vector<TensorMeta>& ins, const Attrs& attrs = {}) {
  Graph g(std::string(op_name(op)));
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input(fmt::format("x{}", i), ins[i]));
  try {
    Node* n = g.add_node(op, vs, attrs, "y");
    std::vector<Value> outs;
    for (int r = 0; r < n->num_results(); ++r) outs.push_back(n->result(r));
    g.set_outputs(outs);
  } catch (const Error&) {
    return std::nullopt;
  }
  return g;
}

const DType kAllTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};

std::vector<Attrs> attrs_for(Op op) {
  switch (op) {
    case Op::Gelu: return {Attrs{{"approximate", std::string("none")}}, Attrs{{"approximate", std::string("tanh")}}};
    case Op::Clamp: return {Attrs{{"min", -0.25}, {"max", 0.5}}, Attrs{{"min", int64_t(1)}}, Attrs{{"max", int64_t(2)}}};
    case Op::To:
      return {Attrs{{"dtype", DType::F32}}, Attrs{{"dtype", DType::I64}}, Attrs{{"dtype", DType::F16}},
              Attrs{{"dtype", DType::Bool}}, Attrs{{"dtype", DType::I32}}, Attrs{{"dtype", DType::F64}}};
    default: return {Attrs{}};
  }
}

// One graph holding every (op, attrs) the shape rules accept for these input types, each
// node an output: one compile checks them all. Returns how many nodes it holds.
int check_ops(const std::vector<TensorMeta>& ins, const std::vector<std::pair<Op, Attrs>>& calls, uint64_t seed,
              double float_scale = 1) {
  Graph g("ops");
  std::vector<Value> vs, outs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input(fmt::format("x{}", i), ins[i]));
  for (auto& [op, attrs] : calls) {
    try {
      Node* n = g.add_node(op, vs, attrs, std::string(op_name(op)));
      for (int r = 0; r < n->num_results(); ++r) outs.push_back(n->result(r));
    } catch (const Error&) {
    }
  }
  if (outs.empty()) return 0;
  g.set_outputs(outs);
  std::vector<HostTensor> in = inputs_for(g, seed);
  // Spread floats beyond (-1, 1) so that casts to integers and exp see interesting values.
  for (auto& t : in)
    if (is_floating(t.dtype()))
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, t.get(i) * float_scale);
  SCOPED_TRACE(fmt::format("inputs {}{}", ins[0].str(), ins.size() > 1 ? ", " + ins[1].str() : ""));
  expect_matches_reference(g, in, 4);
  return static_cast<int>(outs.size());
}

std::vector<std::pair<Op, Attrs>> pointwise_calls(size_t arity) {
  std::vector<std::pair<Op, Attrs>> calls;
  for (size_t o = 0; o < static_cast<size_t>(Op::NumBuiltin); ++o) {
    Op op = static_cast<Op>(o);
    if (op_info(op).category != OpCategory::Pointwise || op_info(op).schema.tensors.size() != arity) continue;
    for (const Attrs& a : attrs_for(op)) calls.emplace_back(op, a);
  }
  return calls;
}

TEST_P(BackendOps, EveryUnaryPointwiseOp) {
  KILN_REQUIRE_JIT();
  int checked = 0;
  for (DType dt : kAllTypes) checked += check_ops({T(dt, {7, 33})}, pointwise_calls(1), 11, 3);
  EXPECT_GT(checked, 60);
}

// The activations (composites): decomposed, fused and compiled, against their own reference
// kernels, on every float type, inputs over [-9, 9] (both sides of every kink and threshold),
// each attribute away from its default, and a transposed (strided) graph input.
TEST_P(BackendOps, EveryActivation) {
  KILN_REQUIRE_JIT();
  const std::vector<std::pair<Op, Attrs>> calls = {
      {Op::Hardsigmoid, {}}, {Op::Hardswish, {}}, {Op::LeakyRelu, {}}, {Op::LeakyRelu, {{"negative_slope", 0.2}}},
      {Op::Elu, {}},         {Op::Elu, {{"alpha", 0.5}, {"scale", 1.5}, {"input_scale", 2.0}}},
      {Op::Selu, {}},        {Op::Softplus, {}}, {Op::Softplus, {{"beta", 2.0}, {"threshold", 1.0}}},
      {Op::Mish, {}}};
  int checked = 0;
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    checked += check_ops({T(dt, {7, 33})}, calls, 21, 9);
    checked += check_ops({TensorMeta(dt, {33, 7}, {1, 33})}, calls, 22, 9);
  }
  EXPECT_EQ(checked, 80);
}

// logsumexp and the non-finite ops, compiled, with NaN and infinities among the inputs.
TEST_P(BackendOps, LogsumexpAndNonFiniteOps) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    Graph g("nonfinite");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", T(dt, {6, 33})));
    g.set_outputs({b.op(Op::Logsumexp, {x.v}, {{"dim", IntList{1}}}), b.op(Op::Logsumexp, {x.v}, {{"dim", IntList{0}}, {"keepdim", true}}),
                   b.op(Op::Isnan, {x.v}), b.op(Op::Isinf, {x.v}), b.op(Op::NanToNum, {x.v}),
                   b.op(Op::NanToNum, {x.v}, {{"nan", 1.0}, {"posinf", 2.0}})});
    std::vector<HostTensor> in = inputs_for(g, 31);
    const double inf = std::numeric_limits<double>::infinity();
    in[0].set(0, std::nan(""));
    in[0].set(40, inf);
    in[0].set(80, -inf);
    for (int64_t i = 99; i < 132; ++i) in[0].set(i, -inf);  // a whole row of -inf
    SCOPED_TRACE(dtype_name(dt));
    expect_matches_reference(g, in, 4);
  }
}

// erfinv over its whole domain (into both tails, its poles, past them) on every float type, and
// bitwise_not (a composite: logical_not of a bool, xor with all ones of an integer) beside the
// other bitwise ops, compiled against the reference kernels.
TEST_P(BackendOps, ErfinvAndBitwiseOps) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Graph g("erfinv");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", T(dt, {1001})));
    g.set_outputs({b.erfinv(x)});
    HostTensor in = HostTensor::empty(T(dt, {1001}));
    for (int64_t i = 0; i < 1001; ++i) in.set(i, -1.0 + 0.002 * static_cast<double>(i));  // -1 ... 1
    in.set(1, -0.9999999);
    in.set(999, 0.99999999);
    in.set(500, 1.5);
    in.set(501, std::nan(""));
    SCOPED_TRACE(dtype_name(dt));
    expect_matches_reference(g, {in}, 4);
  }
  for (DType dt : {DType::I32, DType::I64, DType::Bool}) {
    Graph g("bitwise");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", T(dt, {7, 33}))), y = b.wrap(g.add_input("y", T(DType::I64, {33})));
    Var z = b.wrap(g.add_input("z", T(dt, {7, 33})));
    g.set_outputs({b.bitwise_not(x), b.bitwise_and(x, z), b.bitwise_or(x, y), b.bitwise_xor(b.bitwise_not(x), y)});
    SCOPED_TRACE(dtype_name(dt));
    expect_matches_reference(g, inputs_for(g, 41, 1000), 1);
  }
}

// einsum through its decomposition (diagonals, sums, permutes, matmuls or broadcast products)
// against its reference kernel: matrix and batched products, an ellipsis with broadcasting,
// traces, diagonals, outer products, three operands, integers, bf16, an empty contraction.
TEST_P(BackendOps, Einsum) {
  KILN_REQUIRE_JIT();
  struct Case {
    std::string equation;
    std::vector<Shape> shapes;
    DType dtype = DType::F32;
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{33, 17}, {17, 9}}},
      {"bij,bkj->bik", {{3, 5, 8}, {1, 7, 8}}},
      {"...ij,...jk", {{2, 1, 4, 6}, {3, 6, 5}}},
      {"ii", {{6, 6}}},
      {"bii->bi", {{3, 5, 5}}},
      {"i,j->ij", {{7}, {9}}},
      {"ij,jk,kl->il", {{4, 5}, {5, 6}, {6, 3}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 5, 8}, {2, 3, 7, 8}}},
      {"ij->", {{9, 13}}},
      {"ij,ij->ij", {{4, 5}, {4, 5}}, DType::I64},
      {"ij,jk->ik", {{8, 16}, {16, 8}}, DType::BF16},
      {"ij,jk->ik", {{3, 0}, {0, 4}}},
  };
  for (const Case& c : cases) {
    Graph g("einsum");
    Builder b(g);
    std::vector<Value> ins;
    for (size_t i = 0; i < c.shapes.size(); ++i) ins.push_back(b.wrap(g.add_input(fmt::format("x{}", i), T(c.dtype, c.shapes[i]))));
    g.set_outputs({b.op(Op::Einsum, ins, {{"equation", c.equation}})});
    SCOPED_TRACE(c.equation + " " + std::string(dtype_name(c.dtype)));
    expect_matches_reference(g);
  }
}

TEST_P(BackendOps, EveryBinaryPointwiseOpWithBroadcasting) {
  KILN_REQUIRE_JIT();
  int checked = 0;
  for (DType a : kAllTypes)
    for (DType b : {DType::F32, DType::I64, a}) {
      checked += check_ops({T(a, {7, 1}), T(b, {33})}, pointwise_calls(2), 12);
      checked += check_ops({T(a, {1023}), T(b, {})}, pointwise_calls(2), 13);
    }
  EXPECT_GT(checked, 150);
}

TEST_P(BackendOps, WhereAndMaskedFill) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
    if (auto g = one_op(Op::Where, {T(DType::Bool, {7, 33}), T(dt, {33}), T(DType::F32, {7, 1})})) expect_matches_reference(*g);
    if (auto g = one_op(Op::MaskedFill, {T(dt, {7, 33}), T(DType::Bool, {33})}, {{"value", 2.5}})) expect_matches_reference(*g);
    if (auto g = one_op(Op::MaskedFill, {T(dt, {7, 33}), T(DType::Bool, {7, 1})}, {{"value", int64_t(-3)}}))
      expect_matches_reference(*g);
  }
}

TEST_P(BackendOps, Reductions) {
  KILN_REQUIRE_JIT();
  int checked = 0;
  const std::vector<std::pair<Shape, std::vector<IntList>>> cases = {
      {{7, 33}, {{1}, {0}, {}}}, {{1023}, {{}, {0}}}, {{3, 5, 7}, {{0, 2}, {1}, {-1}}}, {{1, 33}, {{-1}, {0}}}};
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I64, DType::Bool})
    for (auto& [shape, dim_lists] : cases) {
      std::vector<std::pair<Op, Attrs>> calls;
      for (Op op : {Op::Sum, Op::Prod, Op::Amax, Op::Amin, Op::Argmax})
        for (auto& dims : dim_lists)
          for (bool keep : {false, true}) {
            Attrs a{{"keepdim", keep}};
            if (op == Op::Prod || op == Op::Argmax) {
              if (dims.size() > 1) continue;
              if (dims.size() == 1) a.set("dim", dims[0]);
            } else if (!dims.empty()) {
              a.set("dim", dims);
            }
            // a product of 1023 values under/overflows: keep prod to the short rows.
            if (op == Op::Prod && numel(shape) > 200 && (dims.empty() || shape.size() == 1)) continue;
            calls.emplace_back(op, a);
          }
      checked += check_ops({T(dt, shape)}, calls, 3);
    }
  EXPECT_GT(checked, 200);
}

TEST_P(BackendOps, ReductionsWithNaNAndInfinity) {
  KILN_REQUIRE_JIT();
  Graph g("nan_rows");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 5})));
  g.set_outputs({b.amax(x, {1}), b.amin(x, {1}), b.op(Op::Argmax, {x}, {{"dim", int64_t(1)}}), b.sum(x, {1})});
  HostTensor in = make(DType::F32, {4, 5},
                       {1, NAN, 3, 2, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0.5, 2, 2, NAN, NAN, INFINITY, 1, -1, 9, 0});
  expect_matches_reference(g, {in});
}

TEST_P(BackendOps, ViewsOfGraphInputsWithStrides) {
  KILN_REQUIRE_JIT();
  Graph g("strided");
  Builder b(g);
  // A transposed [33,7] and a column-sliced input (row stride 40).
  Var xt = b.wrap(g.add_input("xt", TensorMeta(DType::F32, {33, 7}, {1, 33})));
  Var xs = b.wrap(g.add_input("xs", TensorMeta(DType::F32, {7, 33}, {40, 1})));
  g.set_outputs({b.add(b.transpose(xt, 0, 1), xs), b.sum(xt, {0}), xt});
  expect_matches_reference(g);
}

TEST_P(BackendOps, ViewsInsideGraphs) {
  KILN_REQUIRE_JIT();
  Graph g("views");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({6, 35})));
  Var y = b.wrap(g.add_input("y", F({3, 7, 10})));
  Var e = b.exp(x);
  Var r = b.reshape(e, {3, 2, 5, 7});                      // view of a computed value
  Var p = b.permute(r, {3, 0, 2, 1});                      // [7,3,5,2]
  Var s = b.slice(p, 2, 1, 5, 2);                          // [7,3,2,2]
  Var q = b.reshape(s, {7, 3, 4});
  Var c = b.cat({q, b.slice(b.permute(y, {1, 0, 2}), 2, 0, 10, 1)}, 2);  // [7,3,14]
  auto parts = b.split(c, {5, 9}, 2);
  Var u = b.unsqueeze(b.add(parts[0], b.squeeze(b.expand(b.wrap(g.add_input("z", F({1, 1, 5}))), {1, 3, 5}), {0})), 1);
  g.set_outputs({u, parts[1], b.transpose(c, 0, 2), b.contiguous(b.transpose(parts[1], 1, 2))});
  expect_matches_reference(g);
}

TEST_P(BackendOps, CatOfMixedTypesAndEmptyPieces) {
  KILN_REQUIRE_JIT();
  Graph g("cat");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", T(DType::I64, {4, 3})));
  Var y = b.wrap(g.add_input("y", F({4, 5})));
  Var z = b.wrap(g.add_input("z", F({0})));
  g.set_outputs({b.cat({x, z, b.exp(y), x}, 1)});
  expect_matches_reference(g);
}

TEST_P(BackendOps, CreationOps) {
  KILN_REQUIRE_JIT();
  Graph g("creation");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({5, 7})));
  Var ar = b.op(Op::Arange, {}, {{"end", 7.0}, {"start", 0.5}, {"step", 0.9}});     // 8 elements? (7-0.5)/0.9 -> 8
  Var ai = b.op(Op::Arange, {}, {{"end", int64_t(-3)}, {"start", int64_t(11)}, {"step", int64_t(-2)}});  // i64[7]
  Var c = b.op(Op::Constant, {}, {{"size", IntList{5, 1}}, {"dtype", DType::F32}, {"values", FloatList{1, -2, 3.5, 4, 0.25}}});
  Var ch = b.op(Op::Constant, {}, {{"size", IntList{7}}, {"dtype", DType::F16}, {"values", FloatList{1, 2, 3, 4, 5, 6, 7.1}}});
  Var f = b.full({5, 7}, 1.5, DType::F32);
  Var rnd = b.op(Op::Rand, {}, {{"size", IntList{5, 7}}, {"seed", int64_t(42)}});
  g.set_outputs({b.add(b.mul(x, c), f), ar, b.mul(x, b.to(ai, DType::F32)), b.add(x, rnd), rnd, b.add(x, ch)});
  expect_matches_reference(g);
}

TEST_P(BackendOps, RandMatchesReferenceBitForBit) {
  KILN_REQUIRE_JIT();
  Graph g("rand");
  Builder b(g);
  g.set_outputs({b.op(Op::Rand, {}, {{"size", IntList{33, 31}}, {"seed", int64_t(1234567890123)}})});
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor got = cg.run({})[0], want = interpret(g, {})[0];
  EXPECT_TRUE(tensors_close(got, want, 0, 0));
}

TEST_P(BackendOps, GatherScatterAddAndScatter) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16}) {
    Graph g("gather");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", T(dt, {6, 9})));
    Var i = b.wrap(g.add_input("i", T(DType::I64, {6, 4})));
    Var j = b.wrap(g.add_input("j", T(DType::I64, {3, 9})));
    Var src = b.wrap(g.add_input("src", T(dt, {5, 9})));
    // (random indices below 6 repeat: scatter's later write in index order stays, on every device)
    g.set_outputs({b.gather(x, i, 1), b.gather(x, j, 0), b.scatter_add(x, j, src, 0), b.scatter_add(x, b.slice(i, 0, 0, 5), b.slice(src, 1, 0, 4), 1),
                   b.scatter(x, j, src, 0), b.scatter(x, b.slice(i, 0, 0, 5), b.slice(src, 1, 0, 4), 1)});
    std::vector<HostTensor> in = inputs_for(g, 5, 6);
    // negative indices count from the end, as in PyTorch
    in[1].set_int(3, -2);
    expect_matches_reference(g, in);
  }
}

TEST_P(BackendOps, GatherIndexOutOfRangeIsAnError) {
  KILN_REQUIRE_JIT();
  Graph g("gather_oob");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 5})));
  Var i = b.wrap(g.add_input("i", I({4, 2})));
  g.set_outputs({b.exp(b.gather(x, i, 1))});
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor xi = random_tensor(F({4, 5}), 1), ii = ints(DType::I64, {4, 2}, {0, 1, 2, 3, 4, 5, 1, 0});
  std::string msg = error_of([&] { cg.run(std::vector<HostTensor>{xi, ii}); });
  EXPECT_TRUE(has(msg, "out of range") && has(msg, "5")) << msg;
  // The executable stays usable after the error.
  HostTensor ok = ints(DType::I64, {4, 2}, {0, 1, 2, 3, 4, -5, 1, 0});
  EXPECT_TRUE(tensors_close(cg.run(std::vector<HostTensor>{xi, ok})[0], interpret(g, std::vector<HostTensor>{xi, ok})[0], 1e-6, 1e-6));
}

TEST_P(BackendOps, MatmulShapes) {
  KILN_REQUIRE_JIT();
  const std::vector<std::pair<Shape, Shape>> cases = {{{7, 33}, {33, 5}}, {{33}, {33, 5}}, {{7, 33}, {33}}, {{2, 7, 33}, {33, 5}},
                                                      {{2, 1, 7, 3}, {4, 3, 5}}, {{1, 1}, {1, 1}}, {{3, 0}, {0, 4}}};
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::I64})
    for (auto& [a, bs] : cases)
      if (auto g = one_op(Op::Matmul, {T(dt, a), T(dt, bs)})) expect_matches_reference(*g, 2, 4);
  if (auto g = one_op(Op::Bmm, {F({3, 7, 5}), F({3, 5, 2})})) expect_matches_reference(*g);
  // Transposed operands become BLAS flags; a permuted batch is copied.
  Graph g("mm_views");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 33, 7})));
  Var w = b.wrap(g.add_input("w", F({5, 33})));
  g.set_outputs({b.matmul(b.transpose(x, 1, 2), b.transpose(w, 0, 1)), b.matmul(b.permute(x, {2, 0, 1}), b.wrap(g.add_input("v", F({33}))))});
  expect_matches_reference(g, 3, 4);
}

TEST_P(BackendOps, EmptyTensors) {
  KILN_REQUIRE_JIT();
  Graph g("empty");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({0, 5})));
  Var y = b.wrap(g.add_input("y", F({3, 0})));
  g.set_outputs({b.exp(x), b.sum(x, {0}), b.sum(y, {1}), b.amax(x, {1}), b.transpose(y, 0, 1)});
  expect_matches_reference(g);
}

TEST_P(BackendOps, UnfusedAndFusedAgree) {
  KILN_REQUIRE_JIT();
  Graph g("chain");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var m = b.mean(x, {1}, true);
  Var c = b.sub(x, m);
  g.set_outputs({b.div(c, b.sqrt(b.add(b.mean(b.mul(c, c), {1}, true), b.scalar(1e-5, DType::F32))))});
  backend::CpuCompileOptions unfused;
  unfused.fuse = false;
  expect_matches_reference(g, inputs_for(g, 9), 1, unfused);
  expect_matches_reference(g, inputs_for(g, 9), 1);
}

TEST_P(BackendOps, WrongInputsAreErrors) {
  KILN_REQUIRE_JIT();
  Graph g("wrong");
  Builder b(g);
  g.set_outputs({b.exp(b.wrap(g.add_input("x", F({2, 3}))))});
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  EXPECT_TRUE(has(error_of([&] { cg.run({}); }), "takes 1 input"));
  HostTensor bad = random_tensor(F({3, 2}), 1);
  std::string msg = error_of([&] { cg.run(std::vector<HostTensor>{bad}); });
  EXPECT_TRUE(has(msg, "%x") && has(msg, "f32[2,3]") && has(msg, "f32[3,2]")) << msg;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// The prelude's inline f32 exp (it vectorizes, libm's does not): within 2 ulp of the
// correctly rounded value over its whole range, and exact at the special values.
TEST_P(BackendOps, InlineExpIsAccurateOverItsWholeRange) {
  KILN_REQUIRE_JIT();
  Graph g("exp");
  Builder b(g);
  g.set_outputs({b.exp(b.wrap(g.add_input("x", F({20003}))))});
  std::vector<double> xs;
  for (int i = 0; i < 20000; ++i) xs.push_back(-110.0 + 200.0 * i / 19999.0);
  xs.insert(xs.end(), {-INFINITY, INFINITY, NAN});
  HostTensor x = make(DType::F32, {20003}, xs);
  backend::CompiledGraph cg = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor got = cg.run(std::vector<HostTensor>{x})[0], want = interpret(g, std::vector<HostTensor>{x})[0];
  EXPECT_TRUE(tensors_close(got, want, 1e-44, 2.4e-7));
  EXPECT_EQ(got.get(20000), 0.0);
  EXPECT_EQ(got.get(20001), INFINITY);
  EXPECT_TRUE(std::isnan(got.get(20002)));
}

}  // namespace
}  // namespace kiln::testing
