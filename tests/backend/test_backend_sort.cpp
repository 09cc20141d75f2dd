// sort and topk compiled on every device against the reference kernel: every dtype, ties kept in
// index order, NaN and infinities, either direction, any dim (strided rows), views, empty rows and
// k = 0, and rows past a CUDA block's shared memory (sorted in the outputs, or in scratch for
// topk).
#include <cmath>

#include "ir/builder.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendSort : public DeviceTest {};
KILN_DEVICE_TESTS(BackendSort);

std::vector<Var> topk(Builder& b, Value x, int64_t k, int64_t dim, bool largest) {
  return b.op_n(Op::Topk, {x}, {{"k", k}, {"dim", dim}, {"largest", largest}});
}

TEST_P(BackendSort, EveryDtypeEitherWayAlongEachDim) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool}) {
    Graph g("sort");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", T(dt, {6, 37})));
    Var y = b.wrap(g.add_input("y", T(dt, {3, 50, 4})));
    std::vector<Value> outs;
    for (Var v : b.op_n(Op::Sort, {x}, {{"dim", int64_t{1}}})) outs.push_back(v);
    for (Var v : b.op_n(Op::Sort, {x}, {{"dim", int64_t{0}}, {"descending", true}})) outs.push_back(v);
    for (Var v : b.op_n(Op::Sort, {y}, {{"dim", int64_t{1}}, {"descending", true}})) outs.push_back(v);
    for (Var v : topk(b, x, 5, 1, true)) outs.push_back(v);
    for (Var v : topk(b, y, 7, 1, false)) outs.push_back(v);
    for (Var v : topk(b, x, 2, 0, true)) outs.push_back(v);
    g.set_outputs(outs);
    SCOPED_TRACE(dtype_name(dt));
    // Integers below 4 and bools: every row full of ties, kept in index order.
    expect_matches_reference(g, inputs_for(g, 3, 4));
  }
}

TEST_P(BackendSort, NanInfinitiesAndSignedZeros) {
  KILN_REQUIRE_JIT();
  Graph g("sort_special");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({2, 9})));
  std::vector<Value> outs;
  for (bool desc : {false, true}) {
    for (Var v : b.op_n(Op::Sort, {x}, {{"descending", desc}})) outs.push_back(v);
    for (Var v : topk(b, x, 4, -1, desc)) outs.push_back(v);
  }
  g.set_outputs(outs);
  const double nan = std::nan(""), inf = INFINITY;
  HostTensor in = make(DType::F32, {2, 9}, {1, nan, -inf, 0.0, -0.0, inf, nan, -1, 1, nan, nan, nan, 2, -inf, 2, -0.0, 0.0, inf});
  expect_matches_reference(g, {in});
}

TEST_P(BackendSort, ViewsEmptyRowsAndZeroDim) {
  KILN_REQUIRE_JIT();
  Graph g("sort_edges");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({5, 8})));
  Var e = b.wrap(g.add_input("e", F({0, 6})));
  Var z = b.wrap(g.add_input("z", F({4, 0})));
  Var s = b.wrap(g.add_input("s", F({})));
  std::vector<Value> outs;
  for (Var v : b.op_n(Op::Sort, {b.transpose(x, 0, 1)}, {{"dim", int64_t{1}}})) outs.push_back(v);  // a strided view
  for (Var v : b.op_n(Op::Sort, {e}, {})) outs.push_back(v);
  for (Var v : b.op_n(Op::Sort, {z}, {})) outs.push_back(v);
  for (Var v : topk(b, x, 0, 1, true)) outs.push_back(v);
  for (Var v : topk(b, z, 0, 1, true)) outs.push_back(v);
  for (Var v : b.op_n(Op::Sort, {s}, {{"dim", int64_t{0}}})) outs.push_back(v);
  for (Var v : topk(b, s, 1, 0, true)) outs.push_back(v);
  g.set_outputs(outs);
  expect_matches_reference(g);
}

// 40000 f32 pairs take 320 KB: past an H100/H200 block's 227 KB of shared memory, the sort runs
// in its outputs and topk in scratch; 3000 fit.
TEST_P(BackendSort, RowsLongerThanSharedMemory) {
  KILN_REQUIRE_JIT();
  Graph g("sort_long");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({2, 40000})));
  Var y = b.wrap(g.add_input("y", F({3, 3000})));
  std::vector<Value> outs;
  for (Var v : b.op_n(Op::Sort, {x}, {{"descending", true}})) outs.push_back(v);
  for (Var v : topk(b, x, 7, 1, true)) outs.push_back(v);
  for (Var v : topk(b, y, 50, 1, false)) outs.push_back(v);
  g.set_outputs(outs);
  expect_matches_reference(g);
}

}  // namespace
}  // namespace kiln::testing
