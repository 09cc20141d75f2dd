// The CPU code generator's loop shapes against the reference interpreter: column reductions
// (tiles of kept columns with accumulators in memory), large flat pointwise loops (parallel
// chunks) and row max/min with NaNs.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

void check(const std::string& kir, uint64_t seed = 3) { expect_matches_reference(parse_graph(kir), seed); }

TEST(CpuKernels, SumOverRowsKeepsColumnsInTiles) {
  KILN_REQUIRE_JIT();
  const char* kir = R"(
graph g(%x: f32[300,96], %w: f32[96]) {
  %s = sum(%x, dim=[0]) : f32[96]
  %y = mul(%x, %w) : f32[300,96]
  %t = sum(%y, dim=[0], keepdim=true) : f32[1,96]
  return (%s, %t, %y)
})";
  check(kir);
  EXPECT_NE(backend::compile_cpu(parse_graph(kir)).executable.source().find("tiles of 32 columns"), std::string::npos);
}

TEST(CpuKernels, ColumnReductionsOverMiddleDimsAndChains) {
  KILN_REQUIRE_JIT();
  // [4, 50, 40] over dim 1: outer 4, tiles of 40; mean then variance (two levels); max/min; an
  // integer product (wraps) and an f16 sum (accumulates in f32).
  check(R"(
graph g(%x: f32[4,50,40], %i: i64[4,50,40], %h: f16[6,7,64]) {
  %m = mean(%x, dim=[1], keepdim=true) : f32[4,1,40]
  %d = sub(%x, %m) : f32[4,50,40]
  %q = mul(%d, %d) : f32[4,50,40]
  %v = sum(%q, dim=[1]) : f32[4,40]
  %a = amax(%x, dim=[1]) : f32[4,40]
  %b = amin(%x, dim=[1]) : f32[4,40]
  %p = prod(%i, dim=1) : i64[4,40]
  %k = amax(%i, dim=[1]) : i64[4,40]
  %s = sum(%h, dim=[0,1]) : f16[64]
  return (%v, %a, %b, %p, %k, %s, %d)
})");
}

TEST(CpuKernels, ColumnMaxAndRowMaxPropagateNaN) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(R"(
graph g(%x: f32[64,48]) {
  %c = amax(%x, dim=[0]) : f32[48]
  %r = amax(%x, dim=[1]) : f32[64]
  %n = amin(%x, dim=[1]) : f32[64]
  %s = softmax(%x, dim=-1) : f32[64,48]
  return (%c, %r, %n, %s)
})");
  std::vector<HostTensor> in = inputs_for(g, 5);
  in[0].set(7 * 48 + 3, NAN);
  in[0].set(20 * 48 + 47, NAN);
  in[0].set(33 * 48 + 0, -INFINITY);
  expect_matches_reference(g, in);
}

TEST(CpuKernels, LargeFlatPointwiseRunsInChunks) {
  KILN_REQUIRE_JIT();
  // 200K elements: above the parallel threshold, with every inline math function.
  check(R"(
graph g(%x: f32[200003], %y: f32[200003]) {
  %a = tanh(%x) : f32[200003]
  %b = sigmoid(%y) : f32[200003]
  %c = exp(%a) : f32[200003]
  %e = abs(%y) : f32[200003]
  %l = log(%e) : f32[200003]
  %p = log1p(%e) : f32[200003]
  %s = add(%c, %b) : f32[200003]
  %t = add(%l, %p) : f32[200003]
  %o = mul(%s, %t) : f32[200003]
  return (%o)
})");
}

}  // namespace
}  // namespace kiln::testing
