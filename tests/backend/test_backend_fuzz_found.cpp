// Compiler bugs kiln fuzz found (issue 12), each as a small graph compiled on every test device
// and compared with the reference interpreter. The fuzzer's reproducers replay in
// tests/tools/fuzz_regressions/; these pin each bug down where the fuzzer's tolerance might
// not (a 16-bit accumulation is within the rounding bound of a cancelling sum).
#include <cmath>
#include <limits>
#include <string>

#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

// Every case compiles: skipped on the CPU of a build without the JIT (the GPU machine's).
class BackendFuzzFound : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    KILN_REQUIRE_JIT();
  }
};
KILN_DEVICE_TESTS(BackendFuzzFound);

// A per-row value without keepdim, broadcast into the row space, aligns to the right:
// maximum(x[5,17,5], amin(x, dim=[1,2])[5]) pairs amin[k] with x[i,j,k]. The fused kernel
// used row i's amin.
TEST_P(BackendFuzzFound, AReducedValueBroadcastAgainstOtherDimsThanItsRows) {
  expect_matches_reference(parse_graph(R"(graph g(%x: f32[5,17,5]) {
  %m = amin(%x, dim=[1,2]) : f32[5]
  %y = maximum(%x, %m) : f32[5,17,5]
  %s = sum(%x, dim=[0,1]) : f32[5]
  %z = sub(%x, %s) : f32[5,17,5]
  %e = expand(%m, size=[5,17,5]) : f32[5,17,5]{0,0,1}
  %w = mul(%x, %e) : f32[5,17,5]
  return (%y, %z, %w)
})"));
}

// A gather along dim 0 of a value the softmax's kernel computes: it was recomputed there with
// the current row's max and sum.
TEST_P(BackendFuzzFound, AGatherAcrossTheRowsOfASoftmax) {
  Graph g = parse_graph(R"(graph g(%x: f32[6,7], %i: i64[6,7]) {
  %p = softmax(%x, dim=1) : f32[6,7]
  %e = exp(%p) : f32[6,7]
  %g = gather(%e, %i, dim=0) : f32[6,7]
  return (%g)
})");
  expect_matches_reference(g, inputs_for(g, 3, /*int_bound=*/6));
}

// A cat of 400 parts (a joint graph's gradient of a split into ones): its select chain was 400
// deep and broke clang's nesting limit; NVRTC's too.
TEST_P(BackendFuzzFound, ACatOfFourHundredParts) {
  std::string args, types, names;
  for (int k = 0; k < 400; ++k) {
    names += (k ? ", %p" : "%p") + std::to_string(k);
    types += (k ? ", f32[1]" : "f32[1]");
  }
  Graph g = parse_graph("graph g(%x: f32[400]) {\n  " + names + " = split(%x, split_size=1) : " + types +
                        "\n  %y = cat(" + names + ") : f32[400]\n  %z = exp(%y) : f32[400]\n  return (%z)\n}");
  expect_matches_reference(g);
}

// scatter_add into f16 summed in f16: 4096 ones into one element stopped at 2048, where f16's
// spacing reaches 2. Sums of f16/bf16 accumulate in f32 and round once.
TEST_P(BackendFuzzFound, AnF16ScatterAddAccumulatesInF32) {
  Graph g = parse_graph(R"(graph g(%src: f16[4096]) {
  %self = zeros(size=[1], dtype=f16) : f16[1]
  %i = zeros(size=[4096], dtype=i64) : i64[4096]
  %one = full(size=[], fill_value=1.0, dtype=f16) : f16[]
  %ones = mul(%src, %one) : f16[4096]
  %y = scatter_add(%self, %i, %ones, dim=0) : f16[1]
  return (%y)
})");
  backend::CompiledGraph c = compile_for_test(g);
  KILN_REQUIRE_RUN();
  HostTensor ones = HostTensor::from_doubles(DType::F16, {4096}, std::vector<double>(4096, 1.0));
  EXPECT_EQ(c.run(std::vector<HostTensor>{ones})[0].get(0), 4096.0);
}

// A float product that overflows f32 on the way to a zero is 0, not inf * 0 = NaN: products
// accumulate in f64.
TEST_P(BackendFuzzFound, AProductThatOverflowsF32BeforeAZeroIsZero) {
  Graph g = parse_graph(R"(graph g(%x: bf16[64]) {
  %p = prod(%x) : bf16[]
  return (%p)
})");
  backend::CompiledGraph c = compile_for_test(g);
  KILN_REQUIRE_RUN();
  std::vector<double> v(64, 1e4);  // 1e4^63 = 1e252: past f32, within f64
  v[63] = 0;
  EXPECT_EQ(c.run(std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0), 0.0);
  v[63] = 1e-30;  // 1e252 * 1e-30 overflows bf16: inf, as the reference says
  EXPECT_EQ(c.run(std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0),
            interpret(g, std::vector<HostTensor>{HostTensor::from_doubles(DType::BF16, {64}, v)})[0].get(0));
}

// A matrix times a vector plus a vector: the CUDA backend folded the add into cuBLASLt's bias
// epilogue, which adds along the GEMM's n, but the result's dim is m ([6,3] @ [3] + b[6]).
TEST_P(BackendFuzzFound, AMatrixTimesAVectorPlusAVector) {
  expect_matches_reference(parse_graph(R"(graph g(%a: f32[6,3], %b: f32[6], %v: f32[3]) {
  %m = matmul(%a, %v) : f32[6]
  %y = add(%b, %m) : f32[6]
  return (%y)
})"));
}

// The gradient of minimum(f16, f32) with respect to the broadcast f32 operand: a sum over
// strided f16 loads. On an AVX-512 CPU, clang 14 vectorized it into 512-bit code that gave
// wrong sums; the CPU JIT now asks for vectors of at most 256 bits.
TEST_P(BackendFuzzFound, AReassociatedSumOverStridedF16LoadsOnWideVectors) {
  Graph g = parse_graph(R"(graph g(%a: f32[1,1,3], %s: f16[7,13,3], %t: f32[7,13,3]) {
  %gt = gt(%s, %a) : bool[7,13,3]
  %two = full(size=[], fill_value=2.0, dtype=f32) : f32[]
  %half = div(%t, %two) : f32[7,13,3]
  %eq = eq(%s, %a) : bool[7,13,3]
  %w = where(%eq, %half, %t) : f32[7,13,3]
  %ds = masked_fill(%w, %gt, value=0.0) : f32[7,13,3]
  %lt = lt(%s, %a) : bool[7,13,3]
  %da = masked_fill(%w, %lt, value=0.0) : f32[7,13,3]
  %ga = sum(%da, dim=[0,1], keepdim=true) : f32[1,1,3]
  return (%ga, %ds)
})");
  for (uint64_t seed : {1, 2, 3, 4}) expect_matches_reference(g, seed);
}

// A column max kept in global memory, then selected against an input in the same kernel. NVVM
// turned `lt ? acc[c] : in[0]` into one load from a selected pointer and read it through the
// read-only cache (ld.global.nc), which missed the kernel's own stores: every selected max
// came out as the memory's old contents (0 on a fresh allocation). CUDA only; the kernel's
// pointers are no longer __restrict__ when it reads back what it writes.
TEST_P(BackendFuzzFound, ASelectBetweenAnAccumulatorAndAnInput) {
  Graph g = parse_graph(R"(graph g(%c: f32[1], %x: f32[1,2,14], %lt: bool[14], %y: f32[9,40,3], %m: bool[3]) {
  %amax = amax(%x, dim=[0,1]) : f32[14]
  %w = where(%lt, %amax, %c) : f32[14]
  %s = sum(%y, dim=[0,1]) : f32[3]
  %v = where(%m, %c, %s) : f32[3]
  %n = amin(%y, dim=[0,1]) : f32[3]
  %u = maximum(%n, %c) : f32[3]
  return (%w, %v, %u)
})");
  for (uint64_t seed : {1, 2, 3}) expect_matches_reference(g, seed);
}

// clamp keeps a NaN, also clamp(x, c, c), which is c for every other x: from plain selects
// NVRTC 13.0 made it c for a NaN too (found by kiln fuzz on the H100: ge(clamp, clamp) came out
// true where the reference, with the NaN, has false). Every mix of bounds, NaN and infinities.
TEST_P(BackendFuzzFound, AClampKeepsANanAlsoBetweenEqualBounds) {
  Graph g = parse_graph(R"(graph g(%x: f32[6]) {
  %p = clamp(%x, min=-0.5, max=-0.5) : f32[6]
  %q = clamp(%x, min=-0.5, max=0.25) : f32[6]
  %r = clamp(%x, min=0.5) : f32[6]
  %s = clamp(%x, max=-0.5) : f32[6]
  %e = ge(%p, %p) : bool[6]
  return (%p, %q, %r, %s, %e)
})");
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<HostTensor> in{HostTensor::from_doubles(DType::F32, {6}, std::vector<double>{nan, -inf, inf, 0.1, -3.0, -nan})};
  expect_matches_reference(g, in);
  for (uint64_t seed : {1, 2}) expect_matches_reference(g, seed);
}

// A bf16 matmul whose sum cancels: each row of a is 24 ones then 24 minus ones, so the partial
// sums reach ~24 (bf16 ulp 0.125) while the result is (j + 1) / 64, exact in bf16. With f32
// accumulation it comes out exact; a split-K GEMM that reduces its partials in bf16 (cuBLASLt's
// INPLACE and OUTPUT_TYPE schemes) got a bf16 weight gradient of this shape 9 ulps wrong.
TEST_P(BackendFuzzFound, ABf16MatmulThatCancelsAccumulatesInF32) {
  KILN_REQUIRE_RUN();
  Graph g = parse_graph(R"(graph g(%a: bf16[7,48], %b: bf16[48,14]) {
  %y = matmul(%a, %b) : bf16[7,14]
  return (%y)
})");
  HostTensor a = HostTensor::empty(DType::BF16, {7, 48}), b = HostTensor::empty(DType::BF16, {48, 14});
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t k = 0; k < 48; ++k) a.set(i * 48 + k, k < 24 ? 1.0 : -1.0);
  for (int64_t k = 0; k < 48; ++k)
    for (int64_t j = 0; j < 14; ++j) b.set(k * 14 + j, 1.0 + static_cast<double>((k + j) % 8) / 128 + (k == 0 ? static_cast<double>(j + 1) / 64 : 0.0));
  backend::CompiledGraph c = compile_for_test(g);
  HostTensor y = c.run(std::vector<HostTensor>{a, b})[0];
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 14; ++j) EXPECT_EQ(y.get(i * 14 + j), static_cast<double>(j + 1) / 64) << "y[" << i << "," << j << "]";
}

// One value is one value: x * y used by a variance's mean and again by its deviations. The
// CUDA backend let NVVM contract a*b+c into an FMA, and it fused the product into the mean's
// sum in one place and into x - mean in the other, so the deviation of a single element was
// the product's rounding error: var(x * y) over one element came out ~1e-16 instead of 0, and
// the 0-d var (0/0) +inf instead of NaN (kiln fuzz, H100, seed 2301; then pow(x, var) cast to
// i64 gave 0 instead of INT64_MIN).
TEST_P(BackendFuzzFound, AProductUsedTwiceHasOneValue) {
  KILN_REQUIRE_RUN();
  Graph g = parse_graph(R"(graph g(%a: f32[4,1], %b: f32[4,1], %c: f64[3,1], %d: f64[3,1], %s: f64[]) {
  %p = mul(%a, %b) : f32[4,1]
  %vp = var(%p, dim=[1], correction=0.0) : f32[4]
  %q = mul(%c, %d) : f64[3,1]
  %vq = var(%q, dim=[1], correction=0.0) : f64[3]
  %k = full(size=[], fill_value=1.3333333333333333, dtype=f64) : f64[]
  %t = mul(%s, %k) : f64[]
  %vt = var(%t, correction=1.0) : f64[]
  return (%vp, %vq, %vt)
})");
  backend::CompiledGraph c = compile_for_test(g);
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<HostTensor> in = inputs_for(g, seed);
    std::vector<HostTensor> out = c.run(in);
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out[0].get(i), 0.0) << "var of one f32 product, row " << i << ", seed " << seed;
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(out[1].get(i), 0.0) << "var of one f64 product, row " << i << ", seed " << seed;
    EXPECT_TRUE(std::isnan(out[2].get(0))) << "var of a 0-d product is 0/0, got " << out[2].get(0) << ", seed " << seed;
    expect_matches_reference(g, in);
  }
}

}  // namespace
}  // namespace kiln::testing
