// Shapes that straddle the boundaries of the schedules, compiled for every test device and
// compared with the reference interpreter on random non-zero inputs.
//
// The CUDA schedule (codegen/schedule.cpp) maps a row reduction by its row length: up to 16
// elements a thread per row, up to 1024 a warp per row, longer a block of 512 threads per row;
// a column reduction (innermost dim kept) to blocks of up to 256 threads; a pointwise kernel to
// a grid-stride loop with a 16-byte vector path and a scalar tail when every access is
// contiguous. The CPU schedule has its own thresholds (flat loops, inner loops of 64, parallel
// work of 32768). The lengths below sit on both sides of each: 16/17, 1024/1025, 4096/4097,
// odd sizes that leave a vector tail, strided inputs that take no vector path, empty tensors.
#include <fmt/format.h>

#include <cmath>

#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendShapes : public DeviceTest {};
KILN_DEVICE_TESTS(BackendShapes);

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

// The slack of f32 reductions over `n` elements: the reference folds in f64, kernels in f32
// (in another order), so the error grows with the length. (Measured on the CPU: a row sum of
// 4097 needs 2.7x the default tolerance, of 100000 1.3x, a full sum of 1e6 2.4x.)
double slack_for(int64_t n) { return std::max(1.0, std::sqrt(static_cast<double>(n)) / 10); }

// ------------------------------------------------------------------ row reductions

// One graph per [rows, len]: sum, amax, amin, argmax, prod (of values near 1), mean (as
// sum/div), softmax, log_softmax, layer_norm with weight and bias, cross_entropy.
void check_row_reductions(int64_t rows, int64_t len, uint64_t seed) {
  SCOPED_TRACE(fmt::format("row reductions of f32[{},{}]", rows, len));
  Graph g(fmt::format("rows_{}x{}", rows, len));
  Builder b(g);
  Var x = input(b, "x", F({rows, len}));
  Var w = input(b, "w", F({len}));
  Var bias = input(b, "bias", F({len}));
  Var target = input(b, "target", I({rows}));
  Var near_one = 1.0 + x * 0.01;  // a product of values in (0.99, 1.01) stays representable
  g.set_outputs({b.sum(x, {1}), b.amax(x, {1}), b.amin(x, {-1}, true), b.argmax(x, 1), b.prod(near_one, 1),
                 b.sum(x, {1}, true) / static_cast<double>(len), b.op(Op::Softmax, {x}, {{"dim", int64_t(1)}}),
                 b.op(Op::LogSoftmax, {x}, {{"dim", int64_t(-1)}}),
                 b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{len}}}),
                 b.op(Op::CrossEntropy, {x, target})});
  // Class indices in [0, len).
  expect_matches_reference(g, inputs_for(g, seed, len), slack_for(len));
}

TEST_P(BackendShapes, RowReductionsAroundTheThreadWarpAndBlockBoundaries) {
  KILN_REQUIRE_JIT();
  uint64_t seed = 1;
  for (int64_t len : {1, 7, 16, 17, 33, 1023, 1024, 1025, 4097})
    for (int64_t rows : {1, 3, 130}) check_row_reductions(rows, len, seed++);
}

TEST_P(BackendShapes, RowReductionsOfLongRows) {
  KILN_REQUIRE_JIT();
  // 100000 elements a row: many iterations of a block's stride loop (not 130 rows: the
  // reference interpreter would take long).
  check_row_reductions(1, 100000, 41);
  check_row_reductions(3, 100000, 42);
}

TEST_P(BackendShapes, LongRowsHeldOnChip) {
  KILN_REQUIRE_JIT();
  // Rows too long for one block's registers (codegen/schedule.cpp rows_to_hold): on sm_90 a
  // thread-block cluster's registers hold them, before it a block's shared memory. A
  // 50257-word vocabulary (odd: one element per access), 40000 (16-byte vectors), and 16-bit
  // rows of 65537 and 100000; every combine kind (sum, max, min, argmax's pairs, prod,
  // Welford's triples in layer_norm, online softmax's pairs).
  check_row_reductions(3, 50257, 43);
  check_row_reductions(2, 40000, 44);
  // Longer than any block or cluster holds (300000 words): read from memory in each pass, the
  // statistics in one pass (online softmax, Welford).
  check_row_reductions(1, 300000, 46);
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(fmt::format("{} softmax and layer_norm over rows of 65537 and 100000", dtype_name(dt)));
    Graph g(fmt::format("half_long_rows_{}", dtype_name(dt)));
    Builder b(g);
    Var x = input(b, "x", T(dt, {3, 65537}));
    Var y = input(b, "y", T(dt, {2, 100000}));
    Var w = input(b, "w", T(dt, {100000}));
    Var bias = input(b, "bias", T(dt, {100000}));
    g.set_outputs({b.op(Op::Softmax, {x}, {{"dim", int64_t(-1)}}), b.op(Op::LogSoftmax, {y}, {{"dim", int64_t(-1)}}),
                   b.op(Op::LayerNorm, {y, w, bias}, {{"normalized_shape", IntList{100000}}})});
    expect_matches_reference(g, inputs_for(g, 45), slack_for(100000));
  }
}

TEST_P(BackendShapes, HalfPrecisionRowReductions) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t len : {1023, 4097}) {
      SCOPED_TRACE(fmt::format("{} sum, softmax, layer_norm over rows of {}", dtype_name(dt), len));
      Graph g(fmt::format("half_rows_{}", len));
      Builder b(g);
      Var x = input(b, "x", T(dt, {3, len}));
      Var w = input(b, "w", T(dt, {len}));
      Var bias = input(b, "bias", T(dt, {len}));
      g.set_outputs({b.sum(x, {1}), b.op(Op::Softmax, {x}, {{"dim", int64_t(-1)}}),
                     b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{len}}}),
                     b.sum(x, {1}, false, DType::F32)});
      // A sum of 4097 values near +-37 in f16 holds 3 significant digits: 2x the default.
      expect_matches_reference(g, inputs_for(g, 3), 2);
    }
}

// ------------------------------------------------------------------ norm backwards

// The backward of a norm over the last dim of [rows, cols] (dx, dW, db): the row statistics and
// the column sums in one kernel over chunks of rows (passes/fusion/column_partials.h), on the
// CPU too when asked. Rows that a GPU's SMs divide into chunks (256, 1000), rows with no good
// divisor (a prime: 1009, the groups run apart), rows that are one chunk each (3); columns
// that take 16-byte vectors (4096, 768), odd columns (33, 1000 + 1) and short ones (8).
// The backward graph (default partition) of a layer_norm or an RMSNorm over [rows, cols].
Graph norm_backward(const std::string& which, int64_t rows, int64_t cols, DType dt) {
  Graph f(fmt::format("{}_{}x{}", which, rows, cols));
  Builder b(f);
  Var x = input(b, "x", T(dt, {rows, cols}));
  Var w = input(b, "w", T(dt, {cols}));
  if (which == "layer_norm") {
    Var bias = input(b, "bias", T(dt, {cols}));
    f.set_outputs({b.op(Op::LayerNorm, {x, w, bias}, {{"normalized_shape", IntList{cols}}})});
  } else {  // an RMSNorm as a Llama block writes it
    Var ms = b.sum(x * x, {1}, true) / static_cast<double>(cols);
    f.set_outputs({x * b.op(Op::Rsqrt, {ms + 1e-6}) * w});
  }
  autograd::JointGraph joint = autograd::build_joint(f);
  return std::move(autograd::partition(joint, autograd::PartitionKind::Default).backward);
}

void check_norm_backward(const std::string& which, int64_t rows, int64_t cols, DType dt, uint64_t seed) {
  SCOPED_TRACE(fmt::format("{} backward of {}[{},{}]", which, dtype_name(dt), rows, cols));
  Graph g = norm_backward(which, rows, cols, dt);
  // Both targets' defaults today; asked for here so that the test keeps checking the fold.
  backend::CompileOptions options;
  options.fusion.column_partials_in_rows = true;
  options.fusion.recompute_from_statistics = true;
  // Sums over the rows: the reference folds in f64, the kernels in chunks of rows in f32.
  expect_matches_reference(g, inputs_for(g, seed), 4 * slack_for(rows), options);
}

TEST_P(BackendShapes, NormBackwardsInOnePass) {
  KILN_REQUIRE_JIT();
  uint64_t seed = 60;
  for (const char* which : {"layer_norm", "rms_norm"}) {
    for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{256, 4096}, {1000, 768}, {1009, 33}, {3, 1001}, {264, 8}})
      check_norm_backward(which, rows, cols, DType::F32, seed++);
    check_norm_backward(which, 512, 1024, DType::BF16, seed++);
  }
}

// The chunks' partials are summed in chunk order, each chunk's rows in order: the same bits
// run after run (no atomics), as the issue asks of every new kernel kind.
TEST_P(BackendShapes, NormBackwardInOnePassGivesTheSameBitsTwice) {
  KILN_REQUIRE_JIT();
  Graph g = norm_backward("layer_norm", 256, 4096, DType::F32);
  backend::CompiledGraph cg = compile_for_test(g);
  EXPECT_TRUE(has(cg.executable.source(), "rows, in order")) << "the backward runs as chunks of rows";
  KILN_REQUIRE_RUN();
  std::vector<HostTensor> in = inputs_for(g, 71);
  std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(tensors_close(first[i], second[i], 0, 0)) << "output " << i;
}

// ------------------------------------------------------------------ other reduced dims

TEST_P(BackendShapes, ColumnReductions) {
  KILN_REQUIRE_JIT();
  for (int64_t n : {1, 5, 300}) {
    SCOPED_TRACE(fmt::format("sum/amax over dim 0 of f32[{}, C] for C in 1, 7, 33, 40, 256, 1000", n));
    Graph g(fmt::format("columns_{}", n));
    Builder b(g);
    std::vector<Value> outs;
    for (int64_t c : {1, 7, 33, 40, 256, 1000}) {
      Var x = input(b, fmt::format("x{}", c), F({n, c}));
      outs.push_back(b.sum(x, {0}));
      outs.push_back(b.sum(x, {0}, true));
      outs.push_back(b.amax(x, {-2}, true));
    }
    g.set_outputs(outs);
    expect_matches_reference(g, inputs_for(g, 7), slack_for(n));
  }
}

// Column sums over a few leading rows of many kept points (GQA's dK/dV summed over the query
// heads a key head serves) as a thread per kept point, its sums in registers, the rows in
// order: a GPU's default above 1024 kept points an SM, asked of both targets here
// (column_thread_min_points) so that the lowering is checked wherever the tests run. bf16 and
// f32, two reduced dims, a max, and a mean whose full-size user (x - mean) joins the kernel.
TEST_P(BackendShapes, ColumnSumsAThreadPerKeptPoint) {
  KILN_REQUIRE_JIT();
  Graph g("column_threads");
  Builder b(g);
  Var k = input(b, "k", TensorMeta(DType::BF16, {2, 8, 3, 70})), x = input(b, "x", F({3, 5, 333})), y = input(b, "y", F({6, 257}));
  g.set_outputs({b.sum(k, {1}), b.sum(x, {0, 1}), b.amax(x, {1}), b.sub(y, b.mean(y, {0}, /*keepdim=*/true))});
  backend::CompileOptions options;
  options.schedule_knobs = "column_thread_min_points 64";
  backend::CompiledGraph cg = compile_for_test(g, options);
  EXPECT_TRUE(has(cg.executable.source(), "kept points, a thread each")) << cg.executable.source();
  for (const codegen::Kernel& kn : cg.executable.lowered().kernels)
    for (const codegen::Buffer& buf : kn.buffers) EXPECT_NE(buf.role, codegen::BufferRole::Temp) << kn.name << ": " << buf.name;
  expect_matches_reference(g, inputs_for(g, 13), 2, options);
  // Off (0): the tiles' sums, the same values.
  options.schedule_knobs = "column_thread_min_points 0";
  EXPECT_FALSE(has(compile_for_test(g, options).executable.source(), "kept points, a thread each"));
}

// Few long rows whose outputs over the full space need their reductions: a mean loss's count of
// 65536 targets that are not ignored and its gradient scaled by it (a row of bools), a row
// divided by its sum, a softmax of two rows of 40000 (two levels, a max then a sum: a cluster's
// rows, not split), and a prime length no chunk count divides. On a GPU the first two split into
// partials, a combine and a kernel over the full space (codegen/lower_split.cpp); every device
// gives the interpreter's values.
TEST_P(BackendShapes, FewLongRowsAndOutputsScaledByTheirReductions) {
  KILN_REQUIRE_JIT();
  Graph g("few_long_rows");
  Builder b(g);
  Var x = input(b, "x", F({2, 40000})), t = input(b, "t", TensorMeta(DType::I64, {65536})), r = input(b, "r", F({1, 65536}));
  Var p = input(b, "p", F({1, 100003}));
  Var keep = b.op(Op::Ne, {t, b.scalar(3, DType::I64)});
  Var count = b.op(Op::Sum, {b.op(Op::To, {keep}, {{"dtype", DType::F32}})});
  Var scaled = b.where(keep, b.op(Op::Div, {b.scalar(1.0, DType::F32), count}), b.scalar(0.0, DType::F32));
  Var rs = b.sum(r, {-1}, true);
  g.set_outputs({b.op(Op::Softmax, {x}, {{"dim", int64_t{-1}}}), count, scaled, b.op(Op::Div, {r, rs}), rs,
                 b.sub(p, b.amax(p, {-1}, true))});
  backend::CompiledGraph cg = compile_for_test(g);
  if (on_cuda()) {
    EXPECT_EQ(occurrences(cg.executable.source(), "from the combined reductions"), 2)
        << "the scaled targets and the row over its sum each split";
  }
  expect_matches_reference(g, inputs_for(g, 21), 10);
  // Partials over fixed chunks, combined in chunk order: the same bits run after run.
  KILN_REQUIRE_RUN();
  std::vector<HostTensor> in = inputs_for(g, 22);
  std::vector<HostTensor> first = cg.run(in), second = cg.run(in);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(tensors_close(first[i], second[i], 0, 0)) << "output " << i;
}

TEST_P(BackendShapes, MiddleAndLeadingDims) {
  KILN_REQUIRE_JIT();
  SCOPED_TRACE("f32[4,37,9] over dim 1 (keepdim or not), over dims 0 and 2; f32[300,7,5] over dim 0");
  Graph g("middle");
  Builder b(g);
  Var x = input(b, "x", F({4, 37, 9}));
  Var y = input(b, "y", F({300, 7, 5}));
  g.set_outputs({b.sum(x, {1}), b.sum(x, {1}, true), b.amax(x, {1}), b.amin(x, {1}, true), b.argmax(x, 1),
                 b.argmax(x, 1, true), b.sum(x, {0, 2}), b.sum(x, {2, 0}, true), b.prod(1.0 + x * 0.1, 1),
                 b.sum(y, {0}), b.amax(y, {0}, true), b.sum(y, {0, 1})});
  expect_matches_reference(g, inputs_for(g, 11));
}

TEST_P(BackendShapes, FullReductions) {
  KILN_REQUIRE_JIT();
  for (int64_t n : {1, 4097, 1000000}) {
    SCOPED_TRACE(fmt::format("sum/amax/amin/argmax over every dim of {} elements", n));
    Graph g(fmt::format("full_{}", n));
    Builder b(g);
    Var x = input(b, "x", F({n}));
    g.set_outputs({b.sum(x), b.sum(x, {}, true), b.amax(x), b.amin(x), b.argmax(x)});
    // Not slack_for(n): a tolerance that grows with n would miss a dropped element here.
    expect_matches_reference(g, inputs_for(g, 13), n > 100000 ? 10 : 1);
  }
  SCOPED_TRACE("a 2-d full sum, keepdim: f32[1000,1000] -> f32[1,1]");
  Graph g("full_2d");
  Builder b(g);
  Var x = input(b, "x", F({1000, 1000}));
  g.set_outputs({b.sum(x, {}, true), b.sum(x, {0, 1})});
  expect_matches_reference(g, inputs_for(g, 14), 10);
}

// ------------------------------------------------------------------ pointwise

TEST_P(BackendShapes, PointwiseChainsOfOddSizesInEveryFloatType) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(fmt::format("exp(x)*y + sigmoid(x) in {} on 1, 3, 4, 5, 7, 33, 4096, 4097 and 1000003 elements", dtype_name(dt)));
    Graph g(fmt::format("chain_{}", dtype_name(dt)));
    Builder b(g);
    std::vector<Value> outs;
    for (int64_t n : {1, 3, 4, 5, 7, 33, 4096, 4097, 1000003}) {
      Var x = input(b, fmt::format("x{}", n), T(dt, {n}));
      Var y = input(b, fmt::format("y{}", n), T(dt, {n}));
      outs.push_back(b.exp(x) * y + b.sigmoid(x));
    }
    g.set_outputs(outs);
    expect_matches_reference(g, inputs_for(g, 17));
  }
}

TEST_P(BackendShapes, PointwiseWithBroadcastRowsAndColumns) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F16})
    for (Shape s : {Shape{3, 4097}, Shape{130, 33}, Shape{1000, 1003}, Shape{7, 1}}) {
      SCOPED_TRACE(fmt::format("{}{}: a row vector [C] and a column vector [R,1] broadcast", dtype_name(dt), shape_str(s)));
      Graph g("broadcast");
      Builder b(g);
      Var x = input(b, "x", T(dt, s));
      Var row = input(b, "row", T(dt, {s[1]}));
      Var col = input(b, "col", T(dt, {s[0], 1}));
      g.set_outputs({b.exp(x) * row + b.sigmoid(col), b.maximum(x - col, row), b.add(row, col)});
      expect_matches_reference(g, inputs_for(g, 19));
    }
}

TEST_P(BackendShapes, StridedGraphInputs) {
  KILN_REQUIRE_JIT();
  SCOPED_TRACE("transposed, column-sliced and row-stepped graph inputs into pointwise and reduction kernels");
  Graph g("strided_inputs");
  Builder b(g);
  // [130,1025] stored transposed; [130,1025] in rows of 1040; every other row of [260,1025];
  // a transposed [7,5] (small: one flat loop on the CPU, no vector path on CUDA).
  Var xt = input(b, "xt", TensorMeta(DType::F32, {130, 1025}, {1, 130}));
  Var xs = input(b, "xs", TensorMeta(DType::F32, {130, 1025}, {1040, 1}));
  Var xr = input(b, "xr", TensorMeta(DType::F32, {130, 1025}, {2050, 1}));
  Var small = input(b, "small", TensorMeta(DType::F32, {7, 5}, {1, 7}));
  Var half = input(b, "half", TensorMeta(DType::F16, {33, 17}, {1, 33}));
  g.set_outputs({b.exp(xt) * xs + b.sigmoid(xr), b.sum(xt, {1}), b.sum(xt, {0}), b.op(Op::Softmax, {xs}, {{"dim", int64_t(-1)}}),
                 b.amax(xr, {1}), b.exp(small), b.sum(small, {0}), b.mul(half, half), b.sum(half, {1})});
  expect_matches_reference(g, inputs_for(g, 23), 2);
}

// Reads through transposed and permuted views, which CUDA stages through shared-memory tiles
// (codegen/tiling.h): odd sizes whose edge tiles are partial, a batched transpose, a 4-d
// permute that moves the contiguous dim, a buffer read both ways in one kernel, two
// transposed inputs side by side, in every float type and i32.
TEST_P(BackendShapes, TransposedAndPermutedReads) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32}) {
    SCOPED_TRACE(fmt::format("transposed and permuted reads in {}", dtype_name(dt)));
    Graph g(fmt::format("transposed_{}", dtype_name(dt)));
    Builder b(g);
    Var x = input(b, "x", T(dt, {45, 37}));
    Var w = input(b, "w", T(dt, {45}));
    Var z = input(b, "z", T(dt, {3, 40, 50}));
    Var sq = input(b, "sq", T(dt, {64, 64}));
    Var h = input(b, "h", T(dt, {2, 33, 4, 20}));
    Var a = input(b, "a", T(dt, {40, 96}));
    Var c = input(b, "c", T(dt, {40, 96}));
    Var xt = b.transpose(x, 0, 1);  // [37, 45]
    bool fl = is_floating(dt);
    Var zp = b.permute(z, {0, 2, 1});  // [3, 50, 40]
    g.set_outputs({fl ? b.exp(xt) * w + b.sigmoid(xt) : xt * w + xt, zp + zp, sq + b.transpose(sq, 0, 1),
                   b.contiguous(b.permute(h, {0, 2, 3, 1})), b.transpose(a, 0, 1) - b.transpose(c, 0, 1)});
    expect_matches_reference(g, inputs_for(g, 29));
  }
}

// Copies that move attention's heads beside the sequence and rotations of a head's halves
// (RoPE): CUDA reads them as 16-byte vectors where a head's runs (and halves) are a multiple of
// the vector (heads of 16 in every type; of 12, 4-wide f32 vectors only), one element at a
// time elsewhere (a head of 4, whose halves of 2 split a vector).
TEST_P(BackendShapes, PermutedHeadsAndRotatedHalves) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t head : {16, 12, 4}) {
      SCOPED_TRACE(fmt::format("heads of {} in {}", head, dtype_name(dt)));
      Graph g(fmt::format("heads_{}_{}", head, dtype_name(dt)));
      Builder b(g);
      Var x = input(b, "x", T(dt, {2, 3, 5, head}));  // [batch, heads, seq, head]
      Var cos = input(b, "cos", T(dt, {5, head}));
      Var sin = input(b, "sin", T(dt, {5, head}));
      const int64_t h2 = head / 2;
      Var rotated = b.cat({b.neg(b.slice(x, 3, h2, head)), b.slice(x, 3, 0, h2)}, 3);
      Var rope = x * cos + rotated * sin;
      Var moved = b.reshape(b.contiguous(b.permute(rope, {0, 2, 1, 3})), {2, 5, 3 * head});  // [batch, seq, heads * head]
      g.set_outputs({rope, moved, b.contiguous(b.permute(x, {0, 2, 1, 3}))});
      expect_matches_reference(g, inputs_for(g, 31));
    }
  }
}

// ------------------------------------------------------------------ empty tensors

TEST_P(BackendShapes, EmptyTensors) {
  KILN_REQUIRE_JIT();
  {
    SCOPED_TRACE("pointwise on [0], [0,5], [5,0]; sum/prod over an empty dim; softmax of [0,7]");
    Graph g("empty");
    Builder b(g);
    Var a = input(b, "a", F({0}));
    Var x = input(b, "x", F({0, 5}));
    Var y = input(b, "y", F({5, 0}));
    Var z = input(b, "z", F({3, 0}));
    Var s = input(b, "s", F({0, 7}));
    g.set_outputs({b.exp(a) * a + b.sigmoid(a), b.exp(x) * x, b.sigmoid(y) + y, b.sum(z, {1}), b.sum(z, {1}, true),
                   b.sum(x, {0}), b.sum(y), b.prod(z, 1), b.amax(x, {1}), b.sum(s, {1}),
                   b.op(Op::Softmax, {s}, {{"dim", int64_t(-1)}}), b.op(Op::LogSoftmax, {s}, {{"dim", int64_t(1)}})});
    expect_matches_reference(g, inputs_for(g, 29));
  }
  // A max, min or argmax over an empty dim has no value: the shape rule rejects it when the
  // node is made (the reference never sees it), as torch raises.
  Graph g("empty_max");
  Builder b(g);
  Var z = input(b, "z", F({3, 0}));
  EXPECT_TRUE(has(error_of([&] { b.amax(z, {1}); }), "empty"));
  EXPECT_TRUE(has(error_of([&] { b.amin(z); }), "empty"));
  EXPECT_TRUE(has(error_of([&] { b.argmax(z, 1); }), "empty"));
}

// ------------------------------------------------------------------ integers and bools

TEST_P(BackendShapes, IntegerAndBoolReductions) {
  KILN_REQUIRE_JIT();
  for (int64_t len : {7, 17, 1025, 4097}) {
    SCOPED_TRACE(fmt::format("i64/i32 sum, prod, amax, amin, argmax; bool amax/amin (any/all) over rows of {}", len));
    Graph g(fmt::format("ints_{}", len));
    Builder b(g);
    Var x = input(b, "x", I({3, len}));
    Var y = input(b, "y", T(DType::I32, {3, len}));
    Var p = input(b, "p", I({3, len}));
    Var m = input(b, "m", T(DType::Bool, {3, len}));
    g.set_outputs({b.sum(x, {1}), b.amax(x, {1}), b.amin(x, {0}), b.argmax(x, 1), b.sum(y, {1}), b.sum(y), b.amax(y, {1}, true),
                   b.prod(y, 0), b.prod(p, 1), b.prod(p), b.amax(m, {1}), b.amin(m, {1}), b.amax(m, {0}), b.sum(m, {1})});
    std::vector<HostTensor> in = inputs_for(g, 31, 1000);
    in[0].set_int(5, -7);  // a negative value in the sums and maxima
    // Products of -1 and 1, with 2s and 3s among the first 40 values (at most
    // 3^14, so no overflow): signs that flip, magnitudes that grow.
    for (int64_t i = 0; i < in[2].numel(); ++i) {
      int64_t r = in[2].get_int(i);
      in[2].set_int(i, i < 40 && i % 3 == 0 ? 2 + r % 2 : (r % 2 ? -1 : 1));
    }
    // prod of y over dim 0 (3 values of at most 1000): at most 1e9, exact in i64.
    // One all-false row and one all-true row for any/all.
    for (int64_t j = 0; j < len; ++j) in[3].set_int(j, 0), in[3].set_int(len + j, 1);
    expect_matches_reference(g, in);
  }
}

// ------------------------------------------------------------------ gather and scatter_add

TEST_P(BackendShapes, GatherAtTheEdges) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::I64}) {
    SCOPED_TRACE(fmt::format("{} gather along dims 0 and 1 with indices 0, size-1 and -1", dtype_name(dt)));
    Graph g("gather_edges");
    Builder b(g);
    Var x = input(b, "x", T(dt, {6, 1025}));
    Var i0 = input(b, "i0", I({9, 1025}));
    Var i1 = input(b, "i1", I({6, 40}));
    g.set_outputs({b.gather(x, i0, 0), b.gather(x, i1, 1), b.gather(b.exp(b.to(x, DType::F32)), i1, -1)});
    std::vector<HostTensor> in = inputs_for(g, 37, 6);
    const int64_t edges0[] = {0, 5, -1, -6, 3};
    for (int64_t i = 0; i < in[1].numel(); ++i) in[1].set_int(i, edges0[i % 5]);
    const int64_t edges1[] = {0, 1024, -1, -1025, 512, 1023, 7};
    for (int64_t i = 0; i < in[2].numel(); ++i) in[2].set_int(i, edges1[i % 7]);
    expect_matches_reference(g, in);
  }
}

TEST_P(BackendShapes, ScatterAddWithRepeatedIndices) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::I64}) {
    SCOPED_TRACE(fmt::format("{} scatter_add of 1000 rows into 4 (dim 0) and of 1000 columns into 5 (dim 1)", dtype_name(dt)));
    Graph g("scatter_repeated");
    Builder b(g);
    Var x0 = input(b, "x0", T(dt, {4, 33}));
    Var i0 = input(b, "i0", I({1000, 33}));
    Var s0 = input(b, "s0", T(dt, {1000, 33}));
    Var x1 = input(b, "x1", T(dt, {7, 5}));
    Var i1 = input(b, "i1", I({7, 1000}));
    Var s1 = input(b, "s1", T(dt, {7, 1000}));
    Var zeros = b.zeros({3, 17}, dt);
    Var i2 = input(b, "i2", I({500, 17}));
    Var s2 = input(b, "s2", T(dt, {500, 17}));
    g.set_outputs({b.scatter_add(x0, i0, s0, 0), b.scatter_add(x1, i1, s1, 1), b.scatter_add(zeros, i2, s2, 0)});
    std::vector<HostTensor> in = inputs_for(g, 43, 1000);
    for (int64_t i = 0; i < in[1].numel(); ++i) in[1].set_int(i, in[1].get_int(i) % 4 == 3 ? -1 : in[1].get_int(i) % 4);
    for (int64_t i = 0; i < in[4].numel(); ++i) in[4].set_int(i, in[4].get_int(i) % 5);
    for (int64_t i = 0; i < in[6].numel(); ++i) in[6].set_int(i, 2);  // every row into the last one
    // The f32 sums of ~250 values each: 10x the default, for the order of the additions.
    expect_matches_reference(g, in, 10);
  }
}

// An embedding's gradient: rows of a source added to the rows their ids name, the index the
// same across the features (an expanded column). On a GPU, rows of 32 and more are sorted by
// destination and each run added by its own thread (codegen/sorted_scatter.h), in every float
// type, along dims 0, 1 (the index expanded over the leading dim) and the middle of three, with
// repeated and negative ids; a short index (20 rows) and an empty one keep the ordered kernel.
TEST_P(BackendShapes, ScatterAddOfRowsByAnExpandedIndex) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    SCOPED_TRACE(fmt::format("scatter_add by an expanded index in {}", dtype_name(dt)));
    Graph g(fmt::format("scatter_rows_{}", dtype_name(dt)));
    Builder b(g);
    Var ids = input(b, "ids", I({300}));
    Var few = input(b, "few", I({20}));
    Var s0 = input(b, "s0", T(dt, {300, 24}));
    Var s1 = input(b, "s1", T(dt, {6, 300}));
    Var s2 = input(b, "s2", T(dt, {2, 300, 5}));
    Var s3 = input(b, "s3", T(dt, {20, 24}));
    Var x1 = input(b, "x1", T(dt, {6, 50}));
    Var i0 = b.op(Op::Expand, {b.unsqueeze(ids, 1)}, {{"size", IntList{300, 24}}});
    Var i1 = b.op(Op::Expand, {b.unsqueeze(ids, 0)}, {{"size", IntList{6, 300}}});
    Var i2 = b.op(Op::Expand, {b.unsqueeze(b.unsqueeze(ids, 0), 2)}, {{"size", IntList{2, 300, 5}}});
    Var i3 = b.op(Op::Expand, {b.unsqueeze(few, 1)}, {{"size", IntList{20, 24}}});
    Var none = input(b, "none", T(dt, {300, 0}));  // no features: nothing to add
    Var i4 = b.op(Op::Expand, {b.unsqueeze(ids, 1)}, {{"size", IntList{300, 0}}});
    g.set_outputs({b.scatter_add(b.zeros({50, 24}, dt), i0, s0, 0), b.scatter_add(x1, i1, s1, 1),
                   b.scatter_add(b.zeros({2, 50, 5}, dt), i2, s2, 1), b.scatter_add(b.zeros({50, 24}, dt), i3, s3, 0),
                   b.scatter_add(b.zeros({50, 0}, dt), i4, none, 0)});
    std::vector<HostTensor> in = inputs_for(g, 47, 1000);
    // Ids in [-50, 50): negatives count from the end; most rows repeat (300 ids, 50 rows).
    for (int64_t i = 0; i < in[0].numel(); ++i) in[0].set_int(i, in[0].get_int(i) % 100 - 50);
    for (int64_t i = 0; i < in[1].numel(); ++i) in[1].set_int(i, in[1].get_int(i) % 50);
    expect_matches_reference(g, in, 10);
  }
}

}  // namespace
}  // namespace kiln::testing
